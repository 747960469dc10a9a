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

from .records import STEP_KEYS, Record, Skip, read_text

NAME = "jsonl"
GROWS = True


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

    def feed(self, text: str, first_line: int) -> Iterator[Record | Skip]:
        for i, line in enumerate(text.splitlines(), first_line):
            if not line.strip():
                continue
            where = f"line {i}"
            row = _object(line)
            if row is Skip:
                yield Skip(where, "not JSON")
            elif not isinstance(row, dict):
                yield Skip(where, "not an object")
            elif not any(k in row for k in STEP_KEYS):
                yield Skip(where, "has no step")
            else:
                key = next(k for k in STEP_KEYS if k in row)
                values = {k: v for k, v in row.items() if k != key}
                if isinstance(values.get("data"), dict) and len(values) == 1:  # verl's file logger
                    values = values["data"]
                yield Record(where, row[key], values)


def read(path: Path, **_: Any) -> Iterator[Record | Skip]:
    yield from Parser().feed(read_text(path), 1)
