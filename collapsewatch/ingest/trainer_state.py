"""HF Trainer / TRL ``trainer_state.json``: its ``log_history``, one entry per ``logging_steps`` (train, eval and the
final summary, each with ``step`` = the global step)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, Skip, read_text, row_record

NAME = "trainer_state"
GROWS = False


def sniff(path: Path, head: str) -> bool:
    return head.lstrip().startswith("{") and '"log_history"' in head


def read(path: Path, **_: Any) -> Iterator[Record | Skip]:
    try:
        data = json.loads(read_text(path))
    except (json.JSONDecodeError, RecursionError) as e:
        raise IngestError(f"{str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("log_history"), list):
        raise IngestError(f"{str(path)!r} has no 'log_history' list (expected an HF/TRL trainer_state.json)")
    for i, row in enumerate(data["log_history"]):
        yield row_record(row, f"log_history[{i}]")
