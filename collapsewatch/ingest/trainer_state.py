"""HF Trainer / TRL ``trainer_state.json``: its ``log_history``, one entry per ``logging_steps`` (train, eval and the
final summary, each with ``step`` = the global step). :func:`log_rows` is the one reader of such a list of log
dicts; :mod:`.log_history` reads the same list saved on its own (``json.dump(trainer.state.log_history, f)``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, Skip, read_text, row_record

NAME = "trainer_state"
GROWS = False
SNIFF_FORCED = True  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)


def sniff(path: Path, head: str) -> bool:
    """A JSON object holding ``log_history``, not a JSONL log whose first line is a whole object without one
    (ms-swift's ``logging.jsonl`` ends with the trainer's state: a line holding ``log_history``)."""
    if not (head.lstrip().startswith("{") and '"log_history"' in head):
        return False
    first = next(ln for ln in head.splitlines() if ln.strip())
    try:
        row = json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        return True  # an indented trainer_state.json: its first line is "{"
    return isinstance(row, dict) and "log_history" in row  # a one-line trainer_state.json


def load_json(path: Path) -> Any:
    """The file's JSON; IngestError naming the file when it is not JSON."""
    try:
        return json.loads(read_text(path))
    except (json.JSONDecodeError, RecursionError) as e:
        raise IngestError(f"{str(path)!r} is not valid JSON: {e}") from None


def log_rows(entries: list[Any], label: str) -> Iterator[Record | Skip]:
    """One record per log dict, its step under ``step`` / ``global_step`` (records.STEP_KEYS); an entry that is not
    an object or has no step is skipped and named ``label[i]``."""
    for i, row in enumerate(entries):
        yield row_record(row, f"{label}[{i}]")


def read(path: Path, **_: Any) -> Iterator[Record | Skip]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("log_history"), list):
        raise IngestError(f"{str(path)!r} has no 'log_history' list (expected an HF/TRL trainer_state.json)")
    yield from log_rows(data["log_history"], "log_history")


Parser = None  # no parser of its own (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
