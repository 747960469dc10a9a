"""trackio's local store: one SQLite file per project (``$TRACKIO_DIR/<project>.db``, by default
``~/.cache/huggingface/trackio``), read with trackio's own ``SQLiteStorage`` (runs, then each run's logs).

FILE is the project's ``.db`` file. A project holding several runs is refused, naming them, unless
``source_run`` (``--source-run``) names one. trackio finds a project's file under its module-level
``TRACKIO_DIR``: the read points it at FILE's folder and puts it back afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .records import IngestError, Record, needs, one_run, sqlite_tables

NAME = "trackio"
GROWS = False
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)


def sniff(path: Path, head: str) -> bool:
    """A ``.db`` SQLite file with a ``metrics`` table that is not MLflow's (MLflow's has one too, beside its
    ``alembic_version``)."""
    tables = sqlite_tables(path) if path.suffix == ".db" else None
    return tables is not None and "metrics" in tables and "alembic_version" not in tables


def read(path: Path, source_run: str | None = None, **_: Any) -> Iterator[Record]:
    try:
        from trackio import sqlite_storage
    except ImportError:
        raise needs("trackio", "a trackio store") from None
    if not sniff(path, ""):
        raise IngestError(f"{str(path)!r} is not a trackio project file (<project>.db, SQLite)")
    project, before = path.stem, sqlite_storage.TRACKIO_DIR
    sqlite_storage.TRACKIO_DIR = path.parent.resolve()
    try:
        runs = sqlite_storage.SQLiteStorage.get_runs(project)
        logs = sqlite_storage.SQLiteStorage.get_logs(project, one_run(path, "trackio", [(r, r) for r in runs],
                                                                      source_run))
    except IngestError:
        raise
    except Exception as e:  # sqlite3 errors of a file that is SQLite but not trackio's
        raise IngestError(f"{str(path)!r} could not be read as a trackio project: {e}") from None
    finally:
        sqlite_storage.TRACKIO_DIR = before
    for i, row in enumerate(logs):
        values = {k: v for k, v in row.items() if k not in ("step", "timestamp")}
        stamp = row.get("timestamp")
        wall = datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
        yield Record(f"log {i}", row.get("step"), values, wall)


Parser = None  # no parser of its own (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
