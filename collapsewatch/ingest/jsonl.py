"""JSON Lines: one ``{"step": N, "key": value, …}`` object per line, or verl's file logger
(``trainer.logger=[file]``: ``{"step": N, "data": {"actor/ppo_kl": …}}``). Grows live (``--follow``).

A line that is not JSON, not an object, or has no step is skipped and named in the summary; a step that is not a
whole number stops the ingest naming its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import Record, Skip, read_text, row_record

NAME = "jsonl"
GROWS = True
SNIFF_FORCED = True  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)


def _object(line: str) -> Any:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return Skip  # the class as a marker: not JSON


def sniff(path: Path, head: str) -> bool:
    """The first non-empty line is a JSON object."""
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    return isinstance(_object(first), dict)


class Parser:
    """Lines → records; stateless (kept a class so every growing format is fed alike)."""

    def notes(self) -> list[str]:
        return []  # every line it skips is a Skip the Account counts

    def feed(self, text: str, first_line: int) -> Iterator[Record | Skip]:
        for i, line in enumerate(text.splitlines(), first_line):
            if not line.strip():
                continue
            where = f"line {i}"
            row = _object(line)
            if row is Skip:
                yield Skip(where, "not JSON")
                continue
            rec = row_record(row, where)
            if isinstance(rec, Record) and isinstance(rec.values.get("data"), dict) and len(rec.values) == 1:
                rec.values = rec.values["data"]  # verl's file logger: {"step": N, "data": {...}}
            yield rec


def read(path: Path, **_: Any) -> Iterator[Record | Skip]:
    yield from Parser().feed(read_text(path), 1)


Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
