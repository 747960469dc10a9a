"""The store: append-only Parquet segments per rank, read through DuckDB views, compacted on finish.

Layout of a store directory::

    STORE/_schema/<table>/empty.parquet     typed empty tables from the migrations (so globs always match)
    STORE/_schema/VERSION                   schema version the segments were written with
    STORE/<run>/<table>/r<rank>-<n>-<uid>.parquet   one immutable segment per flush, renamed into place
    STORE/<run>/runs/r<rank>.parquet        the rank's run row, atomically replaced at every heartbeat
    STORE/<run>/<run>.duckdb                 the run as one DuckDB database file, written at compaction
    STORE/<run>/_published/r<rank>-<n>-<uid> object stores only: the marker that publishes flush n (location.py)

STORE is a folder (local or a shared filesystem) or ``s3://bucket/prefix`` (``location.py``).

Why: DuckDB lets one process hold a database file read-write and locks others out, yet readers (the
dashboard, ``collapsewatch sql``) must read while several ranks write. Immutable segments renamed into
place give lock-free, never-half-written reads; a killed writer loses at most the rows it had not flushed.

Names are imported lazily: the SQL worker (``python -m collapsewatch.store.sqlproc``) imports this package and needs
none of ``queries``' imports (the detectors, scipy, pandas).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"ReadOnlyQueryError": ".limits", "Store": ".queries", "StoreWriter": ".writer", "connect": ".views"}
__all__ = ["ReadOnlyQueryError", "Store", "StoreWriter", "connect"]

if TYPE_CHECKING:
    from .limits import ReadOnlyQueryError
    from .queries import Store
    from .views import connect
    from .writer import StoreWriter


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'collapsewatch.store' has no attribute {name!r}")
