"""docs/detectors.md names every configuration field, so a new threshold cannot go undocumented."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path

from collapsewatch.detectors import DetectorConfig

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
