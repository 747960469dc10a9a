"""Opening a store for reading: the folder itself, or for ``s3://…`` its local mirror synced now
(``mirror.reader``), and ``StoreNotFoundError`` saying why a path is not a store. Light to import (no DuckDB or
pandas): the commands that never query open their store here."""

from __future__ import annotations

from pathlib import Path

from .location import Location
from .mirror import reader


class StoreNotFoundError(FileNotFoundError):
    pass


def open_location(store: str | Path) -> Location:
    """Where a reader reads the store: the resolved folder, or for a URL its local mirror synced now
    (:func:`reader`); StoreNotFoundError saying why it is not a store."""
    where = reader(store)
    root = where.local
    if not root.is_dir():
        raise StoreNotFoundError(f"store {str(store)!r} does not exist or is not a directory")
    if not (root / "_schema").is_dir():
        raise StoreNotFoundError(f"{str(store)!r} is not a collapsewatch store (no _schema folder)")
    return where  # never written to: an older store's _schema is stood in for (segments.schema_file)


def store_root(store: str | Path) -> Path:
    """The local folder a reader reads (``open_location``)."""
    return open_location(store).local
