"""The catalogue is the one definition: schema and docs follow it."""

import subprocess
import sys
from pathlib import Path

from collapsewatch.catalogue import SEQUENCE_METRICS, STEP_METRICS, TOKEN_METRICS
from collapsewatch.store.migrations import schema_connection

ROOT = Path(__file__).resolve().parents[1]


def _columns(con, table):
    return {r[0]: r[1] for r in con.execute(f"DESCRIBE {table}").fetchall()}


def test_schema_has_every_catalogue_metric_with_its_type():
    con = schema_connection()
    for table, metrics in (("step_metrics", STEP_METRICS), ("sequences", SEQUENCE_METRICS),
                           ("tokens", TOKEN_METRICS)):
        cols = _columns(con, table)
        for m in metrics:
            assert cols.get(m.name) == m.dtype, (table, m.name)


def test_names_are_unique_per_level():
    for metrics in (TOKEN_METRICS, SEQUENCE_METRICS, STEP_METRICS):
        names = [m.name for m in metrics]
        assert len(names) == len(set(names))


def test_docs_metrics_md_is_generated_from_the_catalogue():
    out = subprocess.run([sys.executable, "-m", "collapsewatch.catalogue"], capture_output=True, text=True,
                         check=True).stdout
    assert (ROOT / "docs" / "metrics.md").read_text() == out
