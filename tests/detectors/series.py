"""Builders for hand-made step series: every column a constant, a sequence, or a function of the step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fixtures.synthetic_steps import GATE_30

from collapsewatch.detectors import DetectorConfig, DetectorSuite, Event

__all__ = ["GATE_30", "feed", "rows", "spans"]

Column = float | bool | str | None | Sequence[Any] | Callable[[int], Any]


def rows(n: int, start: int = 0, **columns: Column) -> list[dict[str, Any]]:
    """Rows for steps start … start + n − 1."""
    out = []
    for i in range(n):
        step = start + i
        row: dict[str, Any] = {"step": step}
        for name, col in columns.items():
            if callable(col):
                row[name] = col(step)
            elif isinstance(col, (list, tuple)):
                row[name] = col[i]
            else:
                row[name] = col
        out.append(row)
    return out


def feed(rows_: list[dict[str, Any]], config: DetectorConfig | None = None) -> tuple[list[Event], DetectorSuite]:
    """Feed rows online; return the stream of events update() returned, and the suite."""
    suite = DetectorSuite(config)
    stream = [e for r in rows_ for e in suite.update(r)]
    return stream, suite


def spans(events: list[Event], detector: str) -> list[tuple[str, int, int, str]]:
    """(phase, step_start, step_end, severity) of one detector's episodes, in start order."""
    return [(e.phase, e.step_start, e.step_end, e.severity) for e in events if e.detector == detector]


def latest(stream: list[Event]) -> list[Event]:
    """What the store keeps: the last row per (detector, phase, step_start), ordered like episodes()."""
    keep: dict[tuple[str, str, int], Event] = {}
    for e in stream:
        keep[e.key] = e
    return sorted(keep.values(), key=lambda e: (e.step_start, e.detector, e.phase))
