"""The tables' Arrow schemas and the one way a segment file is written: atomically, zstd, in row groups a step
query can skip. Shared by the writer (:mod:`.writer`) and the restart cut (:mod:`.restart`), which the writer calls."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .location import TABLE_KEY
from .migrations import TABLES, schema_connection

_SCHEMAS: dict[str, pa.Schema] | None = None


def arrow_schemas() -> dict[str, pa.Schema]:
    """Arrow schema of every table, read from the migrated DuckDB schema (one source of truth)."""
    global _SCHEMAS
    if _SCHEMAS is None:
        con = schema_connection()
        # each schema stamped with its table's name (TABLE_KEY): every segment written from it carries the stamp
        _SCHEMAS = {t: con.sql(f"SELECT * FROM {t} LIMIT 0").to_arrow_table().schema.with_metadata(
            {TABLE_KEY: t.encode()}) for t in TABLES}
        con.close()
    return _SCHEMAS


ROW_GROUP_ROWS = 64 * 1024
"""Rows per Parquet row group: small enough that a query for one step or sequence of a merged segment skips
most of it by the row groups' min/max statistics (pyarrow's default is 1 Mi rows)."""


def atomic_write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that no reader ever sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """A segment written by an older schema gets the newer columns as NULLs."""
    cols = [t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)
