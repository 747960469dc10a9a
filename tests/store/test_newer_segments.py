"""A segment written by a newer collapsewatch — one with a column this package's migrations do not know, as
migration 0006's ``events.rules`` was to the readers before it — is read, not skipped as a foreign file, when it
carries the table stamp every writer now puts in its segments' metadata (``location.TABLE_KEY``). Without the
stamp (segments written before it existed) it is still a bad file to an older reader: what docs/store.md says."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from collapsewatch.cli import app as cli_app
from collapsewatch.store import Store, StoreWriter, queries
from collapsewatch.store.location import TABLE_KEY


def _run(root: Path) -> Path:
    """Run "b": steps 0–3 in two flushes of step_metrics, finished; the first segment's path."""
    w = StoreWriter(root, "b", heartbeat_s=3600)
    for steps in ([0, 1], [2, 3]):
        n = len(steps)
        w.append("step_metrics", {"run": ["b"] * n, "rank": [0] * n, "step": steps, "n_seqs": [4] * n,
                                  "ts": [datetime.now(timezone.utc)] * n, "reward_mean": [0.25, 0.5][:n]})
        w.flush()
    w.flush(status="finished")
    return sorted((root / "b" / "step_metrics").glob("r0-*.parquet"))[0]


def _add_column(path: Path, stamped: bool) -> None:
    """The segment as a newer writer would write it: one more column (a migration this package lacks)."""
    t = pq.read_table(path)
    assert (t.schema.metadata or {}).get(TABLE_KEY) == b"step_metrics"  # what this package's writer stamps
    t = t.append_column("future_metric", pa.array([7.0] * t.num_rows))
    pq.write_table(t if stamped else t.replace_schema_metadata(None), path)


def _cli(*args: str):
    return CliRunner().invoke(cli_app, list(args))


def test_a_stamped_segment_with_a_newer_column_is_read(tmp_path, caplog):
    first = _run(tmp_path)
    _add_column(first, stamped=True)
    caplog.set_level(logging.WARNING, logger="collapsewatch.store")
    s = Store(tmp_path)
    # every step read, the known columns as written: steps 0, 1 (reward 0.25, 0.5) from the newer segment
    rows = queries.step_rows(s, "b", ["reward_mean"])
    assert rows["step"].tolist() == [0, 1, 2, 3] and rows["reward_mean"].tolist() == [0.25, 0.5, 0.25, 0.5]
    out = _cli("runs", str(tmp_path), "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)[0]["n_steps"] == 4, out.output
    # the user's SQL reads it too (Arrow datasets of the known schema: the newer column is not among them)
    out = _cli("sql", str(tmp_path), "SELECT count(*) AS n FROM steps", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == [{"n": 4}], out.output
    assert "no bad files" in _cli("check", str(tmp_path)).stdout
    assert not [r for r in caplog.records if "skipping bad segment" in r.getMessage()]


def test_an_unstamped_segment_with_an_unknown_column_is_still_a_bad_file(tmp_path):
    # what a reader before migration 0006 does with today's events segments (`rules`), whose writers did not stamp
    first = _run(tmp_path)
    _add_column(first, stamped=False)
    out = _cli("check", str(tmp_path))
    assert out.exit_code == 1 and "columns not in table step_metrics: future_metric" in out.stdout, out.output
    assert queries.step_rows(Store(tmp_path), "b", ["reward_mean"])["step"].tolist() == [2, 3]


def test_merged_segments_keep_the_stamp(tmp_path):
    _run(tmp_path)
    out = _cli("compact", str(tmp_path))
    assert out.exit_code == 0, out.output
    merged = list((tmp_path / "b" / "step_metrics").glob("*.parquet"))
    assert len(merged) == 1 and (pq.read_schema(merged[0]).metadata or {}).get(TABLE_KEY) == b"step_metrics"
