"""Numbered, append-only SQL migrations and the runner that applies them.

Each ``migrations/NNNN_name.sql`` opens with a comment saying what changed and why. Column lists that
come from the metric catalogue are spliced in through ``{token_metric_columns}``-style placeholders, so
the schema cannot drift from the catalogue. The runner applies pending migrations in order and records
them in ``schema_version`` (simonw/llm's ``migrations.py`` shape).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from ..catalogue import SEQUENCE_METRICS, STEP_METRICS, TOKEN_METRICS, Metric

if TYPE_CHECKING:  # imported where a schema is built: the SQL worker's parent and a mirror's reader need the
    import duckdb  # table names alone

TABLES = ("runs", "step_metrics", "scalars", "sequences", "tokens", "events", "sentinels")


def _columns(metrics: tuple[Metric, ...], skip: tuple[str, ...] = ()) -> str:
    return ",\n    ".join(f"{m.name} {m.dtype}" for m in metrics if m.name not in skip)


PLACEHOLDERS = {
    "step_metric_columns": _columns(STEP_METRICS),
    "sequence_metric_columns": _columns(SEQUENCE_METRICS),
    "token_metric_columns": _columns(TOKEN_METRICS),
}


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration file, in order."""
    out = []
    for f in sorted(resources.files("collapsewatch.store").joinpath("migrations").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            version = int(f.name.split("_", 1)[0])
            out.append((version, f.name, f.read_text().format(**PLACEHOLDERS)))
    return out


LATEST_VERSION = max(v for v, _, _ in migrations())


def _stamp() -> str:
    import hashlib

    digest = hashlib.sha1("\n".join(sql for _, _, sql in migrations()).encode()).hexdigest()[:12]
    return f"{LATEST_VERSION} {digest}"


SCHEMA_STAMP = _stamp()
"""What a store's ``_schema/VERSION`` holds when its typed empty files are this schema: the version and a digest
of the migrations' SQL as applied. The catalogue's metric columns are spliced into migration 0001, so a new
metric changes the schema without a new version number; the digest makes such a ``_schema`` stale too (readers
stand in the current one, writers rewrite it), so new columns are never cut off by an older empty file."""


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every pending migration to ``con``; return the schema version reached."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name VARCHAR, "
                "applied_at TIMESTAMP WITH TIME ZONE DEFAULT now())")
    done = {r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()}
    for version, name, sql in migrations():
        if version in done:
            continue
        con.execute("BEGIN")
        con.execute(sql)
        con.execute("INSERT INTO schema_version (version, name) VALUES (?, ?)", [version, name])
        con.execute("COMMIT")
    return LATEST_VERSION


def schema_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory database holding the empty, fully migrated schema."""
    import duckdb

    con = duckdb.connect(":memory:")
    migrate(con)
    return con
