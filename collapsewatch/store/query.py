"""Read side of the store: DuckDB views over the Parquet segments, and the query layer.

``connect(store)`` gives a DuckDB connection with the views ``runs``, ``run_ranks``, ``steps``,
``scalars``, ``sequences``, ``tokens`` and ``events``. Every query re-expands the globs, so rows a writer
flushes after ``connect`` are visible to the next query. All SQL of the package lives here or in
``queries.py``; values from users always travel as parameters.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import duckdb
import pandas as pd

from ..catalogue import LOGGED_REPEAT, LOGGED_SCALARS
from .migrations import TABLES
from .sandbox import Limits, run_user_sql
from .writer import check_run_name, ensure_schema

# duckdb's DataFrame export calls DataFrame.drop(inplace=True), which pandas ≥ 3.1 deprecates: noise a user of
# ``.df()`` cannot act on. Matched on the message only, so every other warning still shows.
warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame.drop is deprecated")

RETRIES = 3  # a segment compacted away between glob expansion and read: retry the query


class StoreNotFoundError(FileNotFoundError):
    pass


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


def _scan(root: Path, table: str, run: str | None = None) -> str:
    if run is not None and any((root / run / table).glob("*.parquet")):
        pattern = _q(root / run / table / "*.parquet")
    elif run is not None:
        pattern = _q(root / "_schema" / table / "empty.parquet")
    else:
        pattern = _q(root / "*" / table / "*.parquet")  # matches _schema/<table>/empty.parquet too
    return f"read_parquet('{pattern}', union_by_name = true)"


def _scalar_pivot() -> str:
    cols = ",\n       ".join(
        f"{LOGGED_REPEAT}(value) FILTER (WHERE replace(key, '/', '_') = '{m.name}') AS {m.name}"
        for m in LOGGED_SCALARS)
    return cols


def view_sql(root: Path, run: str | None = None, sources: dict[str, str] | None = None) -> dict[str, str]:
    """The SELECT behind each view; ``run`` restricts the scans to that run's folder (fast path);
    ``sources`` replaces the Parquet scans with other relations (e.g. the tables of an exported file)."""
    s = sources or {t: _scan(root, t, run) for t in TABLES}
    step_metrics = f"""
SELECT * FROM {s['step_metrics']}
QUALIFY row_number() OVER (PARTITION BY run, rank, step ORDER BY ts DESC) = 1"""
    scalar_cols = ", ".join("sc." + m.name for m in LOGGED_SCALARS)
    return {
        "run_ranks": f"""
SELECT * REPLACE (CASE WHEN status = 'running'
        AND epoch(now() - updated_at) > 3 * heartbeat_s + 10 THEN 'crashed' ELSE status END AS status)
FROM {s['runs']}""",
        "scalars": f"SELECT * FROM {s['scalars']}",
        "step_metrics": step_metrics,
        "steps": f"""
WITH sc AS (SELECT run, rank, step, {_scalar_pivot()} FROM {s['scalars']} GROUP BY ALL)
SELECT run, rank, step, m.* EXCLUDE (run, rank, step), {scalar_cols}
FROM ({step_metrics}) m FULL OUTER JOIN sc USING (run, rank, step)""",
        "sequences": f"SELECT * FROM {s['sequences']}",
        "tokens": f"SELECT * FROM {s['tokens']}",
        "events": f"""
SELECT * FROM {s['events']}
QUALIFY row_number() OVER (PARTITION BY run, rank, detector, phase, step_start, source
                           ORDER BY written_at DESC, step_end DESC) = 1""",
        "runs": """
SELECT run,
       CASE WHEN bool_or(status = 'crashed') THEN 'crashed'
            WHEN bool_and(status = 'finished') THEN 'finished' ELSE 'running' END AS status,
       min(started_at) AS started_at, max(updated_at) AS updated_at, max(ended_at) AS ended_at,
       max(world_size) AS world_size, count(*) AS ranks_seen,
       any_value(objective ORDER BY rank) AS objective, any_value(config ORDER BY rank) AS config,
       any_value(versions ORDER BY rank) AS versions, string_agg(DISTINCT host, ',') AS hosts,
       sum(dropped_batches) AS dropped_batches, sum(write_errors) AS write_errors,
       sum(probe_errors) AS probe_errors
FROM run_ranks GROUP BY run""",
    }


VIEW_ORDER = ("run_ranks", "scalars", "step_metrics", "steps", "sequences", "tokens", "events", "runs")


def connect(store: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the store's views. With ``read_only`` (default) file access is limited
    to the store folder and configuration is locked."""
    root = Path(store).expanduser().resolve()
    if not root.is_dir():
        raise StoreNotFoundError(f"store {str(store)!r} does not exist or is not a directory")
    if not (root / "_schema").is_dir():
        raise StoreNotFoundError(f"{str(store)!r} is not a collapsewatch store (no _schema folder)")
    try:
        ensure_schema(root)  # a store written by an older version gets the newer empty tables
    except OSError:
        pass  # a read-only copy of a store: old segments still read (union_by_name)
    con = duckdb.connect(":memory:")
    sql = view_sql(root)
    for attempt in range(RETRIES):  # binding a view reads segment footers; compaction may remove one under us
        try:
            for name in VIEW_ORDER:
                con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql[name]}")
            break
        except duckdb.IOException:
            if attempt == RETRIES - 1:
                raise
            time.sleep(0.05)
    if read_only:
        con.execute(f"SET allowed_directories = ['{_q(root)}/']")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


class Store:
    """The query layer used by the CLI and the dashboard."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.con = connect(path)
        self.root = Path(path).expanduser().resolve()

    def close(self) -> None:
        self.con.close()

    def query(self, sql: str, params: list | dict | None = None) -> pd.DataFrame:
        """Run trusted SQL (the package's own, with parameters) and return a DataFrame."""
        for attempt in range(RETRIES):
            try:
                return self.con.execute(sql, params or []).df()
            except duckdb.IOException:
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")

    def sql(self, sql: str, limits: Limits = Limits()) -> tuple[pd.DataFrame, bool]:
        """Run a person's query (``sandbox``: plain SELECTs only, on a throwaway connection, with a time
        and a size limit); returns the last statement's rows and whether they were cut at a limit."""
        return run_user_sql(self.root, view_sql(self.root), VIEW_ORDER, sql, limits)

    def run_view(self, view: str, run: str) -> str:
        """SQL for one run's rows of a view, scanning only that run's folder (fast for live dashboards)."""
        check_run_name(run)
        return view_sql(self.root, run)[view]

    def runs(self) -> pd.DataFrame:
        return self.query("""
SELECT r.run, r.status, r.objective, r.world_size, r.started_at, r.updated_at, r.ended_at,
       s.n_steps, s.last_step, s.last_reward, coalesce(e.n_events, 0) AS n_events, r.hosts,
       r.dropped_batches, r.write_errors
FROM runs r
LEFT JOIN (SELECT run, count(DISTINCT step) AS n_steps, max(step) AS last_step,
                  arg_max(reward_mean, step) AS last_reward FROM step_metrics GROUP BY run) s USING (run)
LEFT JOIN (SELECT run, count(*) AS n_events FROM events GROUP BY run) e USING (run)
ORDER BY r.started_at""")

    def has_run(self, run: str) -> bool:
        check_run_name(run)
        return (self.root / run / "runs").is_dir()
