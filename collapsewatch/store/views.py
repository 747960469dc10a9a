"""The store's views: the SELECT behind each name user SQL and the query layer read, and ``connect``.

``connect(store)`` gives a DuckDB connection with the views ``runs``, ``run_ranks``, ``steps``, ``step_metrics``,
``scalars``, ``sequences``, ``tokens``, ``events`` and ``sentinels``. Their scans come from ``segments.scan_sql``: a glob
re-expanded at every query while every segment is good (rows a writer flushes after ``connect`` show at the
next query), the list of good files while one is bad. ``steps`` is ``step_metrics`` beside the logged scalars
pivoted under their catalogue names; a logged value stands in for an observed step metric left NULL
(``catalogue.LOGGED_STANDINS``).

Three rules live here once, for the views, the query layer, the CLI and the dashboard: the run status
(``RUN_STATUS``), the runs summary row (``runs_sql``) and the episode rule (``episodes_sql``).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from ..catalogue import LOGGED_REPEAT, LOGGED_SCALARS, LOGGED_STANDINS, scalar_column_sql
from ..detectors import events
from . import mirror
from .migrations import TABLES
from .mirror import install_lock
from .opening import store_root
from .segments import files_scan, read_until_stable, readable_dirs, scan_sql, schema_file

RANK_STATUS = """CASE WHEN status = 'running' AND epoch(now() - updated_at) > 3 * heartbeat_s + 10
            THEN 'crashed' ELSE status END"""
"""A rank's status: a running rank whose heartbeat is older than 3 intervals + 10 s has crashed."""
RUN_STATUS = """CASE WHEN bool_or(status = 'crashed') THEN 'crashed'
            WHEN bool_and(status = 'finished') THEN 'finished' ELSE 'running' END"""
"""A run's status over its ranks' statuses: crashed if one crashed, finished if all finished, else running."""

EPISODE_KEY = ("run", *events.EPISODE_KEY)
"""One detector episode: seen by several ranks, re-written as it extends, or found online and offline, it
is one row, the one with the latest extent (``EPISODE_ORDER`` first)."""
EPISODE_ORDER = (("step_end", False), ("written_at", False), ("rank", True), ("source", True))


def episodes_sql(source: str) -> str:
    """One row per episode (``EPISODE_KEY``) of the event rows ``source`` (a SELECT, never a bare name: duckdb
    2.0.1 refuses ``FROM (name)``), the first by ``EPISODE_ORDER``."""
    order = ", ".join(f"{c} {'ASC' if asc else 'DESC'}" for c, asc in EPISODE_ORDER)
    return f"""
SELECT * FROM ({source})
QUALIFY row_number() OVER (PARTITION BY {", ".join(EPISODE_KEY)} ORDER BY {order}) = 1"""


def runs_sql(run_ranks: str) -> str:
    """One summary row per run from rank rows ``run_ranks``: a SELECT (of the ``run_ranks`` view, or of one
    run's slice of it), never a bare name (duckdb 2.0.1 refuses ``FROM (name)``)."""
    return f"""
SELECT run, {RUN_STATUS} AS status,
       min(started_at) AS started_at, max(updated_at) AS updated_at, max(ended_at) AS ended_at,
       max(world_size) AS world_size, count(*) AS ranks_seen, min(rank) AS rank,
       any_value(objective ORDER BY rank) AS objective, any_value(config ORDER BY rank) AS config,
       any_value(versions ORDER BY rank) AS versions, string_agg(DISTINCT host, ',') AS hosts,
       sum(dropped_batches) AS dropped_batches, sum(dropped_rows) AS dropped_rows,
       sum(write_errors) AS write_errors, sum(probe_errors) AS probe_errors
FROM ({run_ranks}) GROUP BY run"""


_LOGGED = "logged_"
"""Prefix of the pivoted scalars that stand in for observed step metrics (``catalogue.LOGGED_STANDINS``)."""


def _scalar_pivot() -> str:
    names = [(m.name, m.name) for m in LOGGED_SCALARS] + [(n, _LOGGED + n) for n in LOGGED_STANDINS]
    return ",\n       ".join(
        f"{LOGGED_REPEAT}(value) FILTER (WHERE {scalar_column_sql('key')} = '{name}') AS {alias}"
        for name, alias in names)


def _standins() -> str:
    """The observed step metric, or the step's logged value where it is NULL (``catalogue.with_logged``)."""
    return ", ".join(f"coalesce(m.{n}, sc.{_LOGGED}{n}) AS {n}" for n in LOGGED_STANDINS)


VIEW_TABLES = {"run_ranks": ("runs",), "runs": ("runs",), "steps": ("step_metrics", "scalars"),
               **{t: (t,) for t in TABLES if t != "runs"}}
"""The tables each view reads (an object store's mirror fetches only those: ``lazy``)."""


def view_tables(views: tuple[str, ...] | list[str] | set[str] | None) -> list[str]:
    """The tables the views read, in ``TABLES`` order (all of them for None)."""
    if views is None:
        return list(TABLES)
    need = {t for v in views for t in VIEW_TABLES[v]}
    return [t for t in TABLES if t in need]


def table_scans(root: Path, tables: list[str], run: str | None = None) -> tuple[dict[str, str], bool]:
    """(the scan of each table, whether one of ``tables`` is read as a listed snapshot: a bad or replaced segment
    skipped, a mirror): ``segments.scan_sql`` of each of ``tables`` (one listing each), an empty typed scan of every
    other table (no asked view reads it: never scanned)."""
    mirror.need(root, tables, run)  # before the shared lock: a mirror fetches what it lacks (lazy.py)
    with install_lock(root, exclusive=False):  # a mirror: one sync's whole state (mirror.py)
        scans = {t: scan_sql(root, t, run) for t in tables}
    empty = {t: files_scan([], schema_file(root, t)) for t in TABLES if t not in scans}
    return {**{t: sql for t, (sql, _) in scans.items()}, **empty}, any(listed for _, listed in scans.values())


def view_sql(root: Path, run: str | None = None, sources: dict[str, str] | None = None,
             views: tuple[str, ...] | list[str] | set[str] | None = None) -> dict[str, str]:
    """The SELECT behind each view (of ``views``, or of all); ``run`` restricts the scans to that run's folder (fast
    path); ``sources`` replaces the Parquet scans with other relations (e.g. the tables of an exported file)."""
    s = sources if sources is not None else table_scans(root, view_tables(views), run)[0]
    step_metrics = f"""
SELECT * FROM {s['step_metrics']}
QUALIFY row_number() OVER (PARTITION BY run, rank, step ORDER BY ts DESC) = 1"""
    scalar_cols = ", ".join("sc." + m.name for m in LOGGED_SCALARS)
    return {
        "run_ranks": f"""
SELECT * REPLACE ({RANK_STATUS} AS status)
FROM {s['runs']}""",
        "scalars": f"SELECT * FROM {s['scalars']}",
        "step_metrics": step_metrics,
        "steps": f"""
WITH sc AS (SELECT run, rank, step, {_scalar_pivot()} FROM {s['scalars']} GROUP BY ALL)
SELECT run, rank, step, m.* EXCLUDE (run, rank, step) REPLACE ({_standins()}), {scalar_cols}
FROM ({step_metrics}) m FULL OUTER JOIN sc USING (run, rank, step)""",
        "sequences": f"SELECT * FROM {s['sequences']}",
        "tokens": f"SELECT * FROM {s['tokens']}",
        "events": episodes_sql(f"SELECT * FROM {s['events']}"),
        "sentinels": f"SELECT * FROM {s['sentinels']}",
        "runs": runs_sql("SELECT * FROM run_ranks"),
    }

VIEW_ORDER = ("run_ranks", "scalars", "step_metrics", "steps", "sequences", "tokens", "events", "sentinels", "runs")


_NAMED = re.compile(r"\b(" + "|".join(VIEW_ORDER) + r")\b", re.IGNORECASE)
_CATALOGUE = re.compile(r"duckdb_views|information_schema", re.IGNORECASE)


_LITERAL = re.compile(r"'(?:[^']|'')*'")


def views_named(sql: str) -> set[str]:
    """The views the package's own SQL text reads, with the views they read: those it names outside string
    literals (file paths: a run's scans name their tables' folders), all of them when it reads the catalogue. A
    name as a column counts too (more, never fewer); ``Store.query`` binds them all when one is missed."""
    sql = _LITERAL.sub("''", sql)
    if _CATALOGUE.search(sql):
        return set(VIEW_ORDER)
    return set(view_closure({m.lower() for m in _NAMED.findall(sql)}))


def view_closure(views: set[str] | None) -> list[str]:
    """``views`` (all for None) with the views they read (``runs`` reads ``run_ranks``), in ``VIEW_ORDER``."""
    if views is None:
        return list(VIEW_ORDER)
    want = set(views) | ({"run_ranks"} if "runs" in views else set())
    return [v for v in VIEW_ORDER if v in want]


def create_views(con: duckdb.DuckDBPyConnection, root: Path, views: set[str] | None = None) -> bool:
    """(Re)create the views (``views`` and what they read, or all) on ``con``; binding reads segment footers, and
    compaction may remove one under us. True when a table they read is a listed snapshot (``table_scans``): new
    segments show only once the views are created again."""
    names = view_closure(views)

    def create() -> bool:
        sources, listed = table_scans(root, view_tables(names))
        sql = view_sql(root, views=names, sources=sources)
        for name in names:
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql[name]}")
        return listed

    return read_until_stable(root, create)


def connect(store: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the store's views. With ``read_only`` (default) file access is limited
    to the store folder and configuration is locked. On an object-store URL the views read the local mirror as
    synced here (later flushes show after a new ``connect``; ``Store`` re-syncs by itself)."""
    root = store_root(store)
    con = duckdb.connect(":memory:")
    create_views(con, root)
    if read_only:
        allowed = ", ".join("'" + d.replace("'", "''") + "/'" for d in readable_dirs(root))
        con.execute(f"SET allowed_directories = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con
