"""A JSON array of per-step log dicts — TRL's / HF Trainer's ``log_history`` saved on its own
(``json.dump(trainer.state.log_history, f)``), a ``step_logs.json`` — read as ``trainer_state.json``'s
``log_history`` is (:func:`.trainer_state.log_rows`: the same step rule, the same keys).

A list that holds no log dict is refused in one line naming the file: an empty list, a list of non-objects, or of
objects none of which holds a number besides its step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import STEP_KEYS, IngestError, Record, Skip, flatten, number
from .trainer_state import load_json, log_rows

NAME = "log_history"
GROWS = False
SNIFF_FORCED = True  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
_OPENS = re.compile(r"\s*\[\s*(\{|\]|$)")
"""A JSON array whose first item is an object (or an empty one); a console line opening with ``[INFO]`` is not."""


def sniff(path: Path, head: str) -> bool:
    """An array opening with an object (or empty), or any whole JSON array (refused by :func:`read` if not logs)."""
    if _OPENS.match(head):
        return True
    if not head.lstrip().startswith("["):
        return False
    try:
        return isinstance(json.loads(head), list)
    except (json.JSONDecodeError, RecursionError):
        return False


def _holds_a_number(row: Any) -> bool:
    return isinstance(row, dict) and any(
        k not in STEP_KEYS and v is not None and number(v)[0] for k, v in flatten(row))


def read(path: Path, **_: Any) -> Iterator[Record | Skip]:
    data = load_json(path)
    what = "expected a list of per-step log dicts, as json.dump(trainer.state.log_history, f) writes"
    if not isinstance(data, list):
        raise IngestError(f"{str(path)!r} is JSON but not a list ({what})")
    if not data:
        raise IngestError(f"{str(path)!r} is an empty JSON list ({what})")
    if not any(isinstance(row, dict) for row in data):
        raise IngestError(f"{str(path)!r} is a JSON list of {type(data[0]).__name__} values, not of objects ({what})")
    if not any(_holds_a_number(row) for row in data):
        raise IngestError(f"{str(path)!r} is a JSON list of objects none of which holds a number ({what})")
    yield from log_rows(data, "item")


Parser = None  # no parser of its own (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
