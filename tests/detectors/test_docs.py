"""docs/detectors.md names every configuration field, so a new threshold cannot go undocumented, and its defaults
table is generated from the code."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from pathlib import Path

from collapsewatch.detectors import DetectorConfig
from collapsewatch.detectors.defaults import defaults_table, with_defaults

DOC = Path(__file__).resolve().parents[2] / "docs" / "detectors.md"


def test_every_config_field_is_in_the_docs():
    text = DOC.read_text()
    cfg = DetectorConfig()
    missing = []
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        names = [g.name for g in fields(value)] if is_dataclass(value) else [f.name]
        missing += [n for n in names if f"`{n}`" not in text]
    assert missing == []


def test_the_defaults_table_is_generated_from_the_config():
    # the page's table between the markers is today's DetectorConfig: a changed default fails here until the page
    # is regenerated (python -m collapsewatch.detectors.defaults docs/detectors.md)
    assert with_defaults(DOC.read_text()) == DOC.read_text()
    table = defaults_table()
    assert "| `isdd.median_threshold` | 0.9 | " in table and "| `smooth_steps` | 5 | " in table
    # one row per setting: 4 top-level values + `enabled`, and every field of each nested config
    cfg = DetectorConfig()
    n = sum(len(fields(v)) if is_dataclass(v) else 1 for v in (getattr(cfg, f.name) for f in fields(cfg)))
    assert len(table.splitlines()) == 2 + n


def test_a_changed_default_changes_the_table():
    cfg = replace(DetectorConfig(), smooth_steps=7)
    assert "| `smooth_steps` | 7 | Every 'level' is the median" in defaults_table(cfg)


def test_the_synthetic_bench_table_has_a_row_per_detector():
    # docs/lab/detectors-evaluation.md's synthetic table is bench/eval_detectors.py's output, which has one row per
    # registered detector: a detector added since the table was measured (tools, evaluation: s32 #14) shows as a
    # missing row here — rerun the bench and paste its tables, with the date
    from collapsewatch.detectors import DETECTORS

    text = (DOC.parent / "lab" / "detectors-evaluation.md").read_text()
    table = text.split("| detector | positives |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:] if line.startswith("|")]
    assert rows == list(DETECTORS)
