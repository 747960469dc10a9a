"""The query layer: the one place the package's SQL over the store runs, for the CLI, the dashboard and the API.

``Store`` holds a connection with the views (``views.py``) and runs the package's own SQL with parameters for
every value (``Store.query``) and a person's SQL in the sandbox (``Store.sql``). The functions below are every
query the CLI and the dashboard run; each returns a DataFrame and knows nothing about Dash.

Per-run queries read through ``Store.run_view`` (scans only that run's folder) or, given ``files``, only
those segment files of the run: segments are immutable and their names unique, so a caller that indexes
them by step range (``segment_steps``) can read just the one or two segments a step lives in, or just the
segments written since its last poll, at a cost that does not grow with the run's history.
Column and metric names cannot be SQL parameters, so they are checked against the metric catalogue
before they reach a statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from ..catalogue import ALL_STEP_COLUMNS
from ..detectors.events import EVENT_COLUMNS
from . import lazy, location, mirror, segments
from .migrations import TABLES
from .opening import open_location
from .runrows import BULK, RUN_ROW_COLUMNS, run_info, run_infos, run_names, run_rows  # noqa: F401  (the API's names)
from .sandbox import Limits, ReadOnlyQueryError
from .segments import raced
from .sqlproc import run_user_sql
from .summaries import RUN_COLUMNS, STEP_STATS, run_summary, runs_summary  # noqa: F401  (the API's names)
from .views import VIEW_ORDER, create_views, episodes_sql, view_sql, views_named
from .writer import check_run_name, valid_run_name

STEP_COLUMNS: frozenset[str] = frozenset(ALL_STEP_COLUMNS)
VIEW_NAMES = re.compile(r"\b(?:FROM|JOIN)\s+(?:" + "|".join(VIEW_ORDER) + r")\b|duckdb_views|information_schema",
                        re.IGNORECASE)
"""SQL that reads a store-wide view (the package's own SQL; one run's queries read ``run_view`` scans instead)."""

SYNC_S = 1.0  # an object-store reader lists the bucket at most this often (each listing is one or more requests)

# Token metrics of the heatmap: name -> (column averaged per bin, transform of the mean). The ratio heatmap
# averages log_ratio and exponentiates (a geometric mean): an arithmetic mean of ratios is dominated by its
# largest values and hides the collapse of the small ones.
HEATMAP_METRICS: dict[str, tuple[str, str | None]] = {
    "ratio": ("log_ratio", "exp"),
    "log_ratio": ("log_ratio", None),
    "entropy": ("entropy", None),
}
SEQUENCE_TOKEN_COLUMNS = ("pos", "token_id", "turn_id", "mask", "advantage", "logp", "logp_old", "logp_rollout",
                          "log_ratio", "ratio", "entropy", "clip_low", "clip_high", "is_log_ratio")
"""The columns of one sequence's tokens (:func:`sequence_tokens`, the token page)."""


class Store:
    """A store opened for reading: a connection with the views, and the package's queries over it."""

    def __init__(self, path: str | Path) -> None:
        self.path = path if location.is_url(path) else Path(path)
        self.where = open_location(path)
        self.root = self.where.local
        self._generation = mirror.refresh(self.where, SYNC_S)  # synced just now, by open_location
        self.con = duckdb.connect(":memory:")
        # the views are bound at the first query that reads one (binding reads every segment's footer): `sql` (its
        # own process) and one run's queries (``run_view``: that run's folder) never bind them
        self._dirty = True
        self._bound: set[str] = set()
        self._bound_key: tuple | None = None
        allowed = ", ".join("'" + d.replace("'", "''") + "/'" for d in segments.readable_dirs(self.root))
        for stmt in (f"SET allowed_directories = [{allowed}]", "SET enable_external_access = false",
                     "SET lock_configuration = true"):
            self.con.execute(stmt)

    def _views(self, views: set[str] | None = None) -> bool:
        """(Re)create the views (``views`` and what they read, or all); True when they must be created again before
        the next query: a table read as a listed snapshot (a bad or replaced segment skipped, or a mirror) shows
        new segments only then. A mirror's files change only by a sync or a fetch, so its views are created again
        only after one (``lazy.files_key``), not at every query (at 1,000 runs each costs a listing of them all)."""
        listed = create_views(self.con, self.root, views)
        self._bound_key = lazy.files_key(self.root) if self.where.remote is not None else None
        return listed

    def _stale(self) -> bool:
        """Whether the bound views may miss files: dirty, and not a mirror unchanged since they were bound."""
        return self._dirty and (self._bound_key is None or lazy.files_key(self.root) != self._bound_key)

    def _wanted(self, sql: str) -> set[str]:
        """The views ``sql`` reads, with the views they read (a name anywhere in the text counts: more, never
        fewer): binding a view lists its table's folder in every run, so ``runs`` binds neither tokens nor
        sequences."""
        return views_named(sql) if VIEW_NAMES.search(sql) else set()

    def close(self) -> None:
        self.con.close()

    def refresh(self) -> None:
        """On an object-store URL: sync the mirror (at most every ``SYNC_S`` seconds per process), so reads see new
        flushes; the views are rebuilt when its files changed. A folder store needs nothing (the views' globs are
        expanded at every query)."""
        if self.where.remote is None:
            return
        generation = mirror.refresh(self.where, SYNC_S)
        if generation != self._generation:
            self._generation, self._dirty, self._bound_key = generation, True, None

    def query(self, sql: str | Callable[[], str], params: list | dict | None = None,
              relist: bool = True) -> pd.DataFrame:
        """Run trusted SQL (the package's own, with parameters) and return a DataFrame.

        A segment compacted away or gone bad since the views were bound: the views are rebuilt (the file
        list re-expanded, bad files skipped) and the query runs again while the store's files keep changing
        (``segments.read_until_stable``); ``relist=False``: once (SQL over a fixed file list: the same list again
        would fail again). SQL that scans listed files (``run_view``) is passed as a function that builds it
        (``lambda: f"… {store.run_view('steps', run)} …"``): called at every try, after this call has synced a
        mirror, so each try lists the files as they are then. Built before the call, the text would name the files
        of before the sync, and every try would read that same list again."""
        self.refresh()

        def read() -> pd.DataFrame:
            text = sql() if callable(sql) else sql
            wanted = self._wanted(text)
            if (self._stale() and (self._bound or wanted)) or not wanted <= self._bound:
                self._bound = self._bound | wanted
                self._dirty = self._views(self._bound)
            try:
                return self.con.execute(text, params or []).df()
            except duckdb.CatalogException:
                if self._bound == set(VIEW_ORDER):
                    raise
                self._bound = set(VIEW_ORDER)  # a view the pattern missed: bind them all, once
                self._dirty = self._views(self._bound)
                return self.con.execute(text, params or []).df()
            except duckdb.Error as e:
                if raced(e) or isinstance(e, duckdb.InvalidInputException):
                    self._dirty, self._bound_key = True, None  # list afresh before the next try
                raise

        if not relist:
            return read()
        return segments.read_until_stable(self.root, read, also=(duckdb.InvalidInputException,))

    def sql(self, sql: str, limits: Limits = Limits()) -> tuple[pd.DataFrame, bool]:
        """Run a person's query (``sandbox``: plain SELECTs only, on a throwaway connection, with a time
        and a size limit); one statement; returns its rows and whether they were cut at a limit."""
        self.refresh()
        return run_user_sql(self.root, sql, limits)

    def run_view(self, view: str, run: str) -> str:
        """SQL for one run's rows of a view, scanning only that run's folder (fast for live dashboards)."""
        check_run_name(run)
        return view_sql(self.root, run, views=(view,))[view]

    def has_run(self, run: str) -> bool:
        """Whether ``run`` is a run of this store; a name no run can have (``..``, spaces …) is not one."""
        return valid_run_name(run) and (self.root / run / "runs").is_dir()


def check_columns(columns: list[str] | tuple[str, ...]) -> list[str]:
    """The step columns, unchanged, once each is known to the catalogue (names go into SQL verbatim)."""
    unknown = [c for c in columns if c not in STEP_COLUMNS]
    if unknown:
        raise ValueError(f"unknown step metric(s): {', '.join(unknown)}")
    return list(columns)


Files = Sequence[str | Path]


def _files_scan(store: Store, table: str, files: Files) -> str:
    """A Parquet scan of exactly ``files`` (paths listed from the store folder), or of the table's typed
    empty file when there are none."""
    return segments.files_scan([str(f) for f in files], segments.schema_file(store.root, table))


def _source(store: Store, run: str, view: str, files: Files | None) -> str:
    """The rows of ``view`` for one run: the whole run folder, or only ``files`` (of the view's table)."""
    if files is None:
        return store.run_view(view, run)
    return f"SELECT * FROM {_files_scan(store, view, files)}"


def _listed_or_whole(store: Store, sql: Callable[[Any], str], params: list, files: Any) -> pd.DataFrame:
    """``sql(files)``; when a listed segment vanished under the read (compaction merged it), ``sql(None)``: the
    run's folder listed afresh. Exact for reads that filter by step or sequence (not for additive partials)."""
    if files is None:
        return store.query(lambda: sql(None), params)
    try:
        return store.query(sql(files), params, relist=False)  # the same stale list again would fail again
    except duckdb.Error as e:
        if not raced(e):
            raise
        return store.query(lambda: sql(None), params)


def segment_files(store: Store, run: str, table: str) -> list[tuple[str, int]]:
    """(path, size) of every good Parquet segment of one run's ``table``, by name (plain strings: a live poll
    lists hundreds of them, and pathlib objects would cost more than the read); bad ones are skipped, and a
    name no run can have (``../..``) has none."""
    return run_segment_files(store, run, (table,))[0]


def run_segment_files(store: Store, run: str, tables: tuple[str, ...]) -> list[list[tuple[str, int]]]:
    """``segment_files`` of each of ``tables``, with one refresh and one mirror fetch for them all."""
    if not valid_run_name(run):
        return [[] for _ in tables]
    store.refresh()
    mirror.need(store.root, tables, run)
    return [segments.table_files(store.root, t, run, fetch=False)[0] for t in tables]


def segment_steps(store: Store, files: Files, relist: bool = True) -> pd.DataFrame:
    """``file``, ``min_step``, ``max_step``, ``n_rows`` of each segment, from the Parquet footers only."""
    if not files:
        return pd.DataFrame({"file": [], "min_step": [], "max_step": [], "n_rows": []})
    return store.query("""
SELECT file_name AS file, min(stats_min_value::BIGINT) AS min_step, max(stats_max_value::BIGINT) AS max_step,
       sum(row_group_num_rows) AS n_rows
FROM parquet_metadata(?) WHERE path_in_schema = 'step' GROUP BY file_name ORDER BY file_name""",
                       [[str(f) for f in files]], relist=relist)


def step_rows(store: Store, run: str, columns: list[str] | tuple[str, ...], *, after: int = -1,
              rank: int = 0, files: dict[str, Files] | None = None) -> pd.DataFrame:
    """``step`` plus ``columns`` of one rank of a run for steps > ``after``, in step order.

    The live overview calls this with the last step it has drawn, so a poll reads only the new rows.
    A ``has_metrics`` column says whether the probe's row of that step has arrived (scalars logged for a
    step can land one flush before its step metrics). ``files`` ({"step_metrics": [...], "scalars": [...]})
    restricts the read to those segments."""
    cols = check_columns(columns)
    select = ", ".join(["step", "n_seqs IS NOT NULL AS has_metrics", *cols])

    def sql(f: dict[str, Files] | None) -> str:
        if f is None:
            view = store.run_view("steps", run)
        else:
            view = view_sql(store.root, run, sources={t: _files_scan(store, t, f.get(t, [])) for t in TABLES})["steps"]
        return f"SELECT {select} FROM ({view}) WHERE rank = ? AND step > ? ORDER BY step"

    return _listed_or_whole(store, sql, [rank, after], files)


def event_severities(store: Store, run: str, rank: int, until: int) -> list[str]:
    """The distinct severities of the online event rows ``rank`` of ``run`` wrote for steps ≤ ``until``: every row
    an episode was written as while it extended (the ``events`` view keeps only its latest), so an episode that
    worsened after ``until`` counts with the severity it had then."""
    def sql() -> str:
        mirror.need(store.root, ("events",), run)
        with mirror.install_lock(store.root, exclusive=False):
            scan = segments.scan_sql(store.root, "events", run)[0]
        return f"SELECT DISTINCT severity FROM {scan} WHERE rank = ? AND source = 'online' AND step_end <= ?"

    df = store.query(sql, [rank, until])
    return [str(s) for s in df["severity"]]


def run_events(store: Store, run: str, files: Files | None = None) -> pd.DataFrame:
    """Detector episodes of one run (or of the given event segments), one row each, in order of start."""
    return _listed_or_whole(store, lambda f: f"""
SELECT {", ".join(EVENT_COLUMNS)}
FROM ({episodes_sql(_source(store, run, "events", f))})
ORDER BY step_start, detector, phase""", [], files)


def token_steps(store: Store, run: str, files: Files | None = None) -> pd.DataFrame:
    """Steps that kept token rows: sequences kept (over ranks) and largest position. Additive over disjoint
    sets of files (sum ``n_seqs``, max ``max_pos`` per step)."""
    return store.query(lambda: f"""
WITH per_rank AS (SELECT step, rank, count(DISTINCT seq_id) AS n, max(pos) AS max_pos
                  FROM ({_source(store, run, "tokens", files)}) GROUP BY step, rank)
SELECT step, sum(n)::BIGINT AS n_seqs, max(max_pos) AS max_pos FROM per_rank GROUP BY step ORDER BY step""")


def token_sequences(store: Store, run: str, step: int, files: dict[str, Files] | None = None) -> pd.DataFrame:
    """The sequences of ``step`` that kept token rows (one row per rank and seq_id), with their sequence
    metrics. ``files``: {"tokens": [...], "sequences": [...]} holding that step."""
    def sql(f: dict[str, Files] | None) -> str:
        f = f or {}
        return f"""
WITH t AS (SELECT rank, seq_id, count(*) AS n_token_rows
           FROM ({_source(store, run, "tokens", f.get("tokens"))}) WHERE step = ? GROUP BY rank, seq_id)
SELECT t.rank, t.seq_id, t.n_token_rows, s.group_id, s.reward, s.advantage, s.correct, s.n_model_tokens,
       s.displacement_mean, s.entropy_mean, s.seq_ratio, s.repeat_frac_max
FROM t LEFT JOIN (SELECT * FROM ({_source(store, run, "sequences", f.get("sequences"))}) WHERE step = ?) s
     ON s.seq_id = t.seq_id AND s.rank = t.rank
ORDER BY t.rank, t.seq_id"""

    return _listed_or_whole(store, sql, [step, step], files)


def sequence_tokens(store: Store, run: str, step: int, seq_id: int, rank: int = 0,
                    files: Files | None = None) -> pd.DataFrame:
    """Every stored token of one sequence, in position order."""
    return _listed_or_whole(store, lambda f: f"""
SELECT {", ".join(SEQUENCE_TOKEN_COLUMNS)} FROM ({_source(store, run, "tokens", f)})
WHERE step = ? AND seq_id = ? AND rank = ? ORDER BY pos""", [step, seq_id, rank], files)


def token_heatmap(store: Store, run: str, metric: str, *, step_bin: int = 1, pos_bin: int = 1,
                  files: Files | None = None) -> pd.DataFrame:
    """Step × position grid of a token metric over model tokens (mask = 1): ``step`` and ``pos`` are the
    lower edges of bins of ``step_bin`` steps and ``pos_bin`` positions; ``total`` and ``n`` (additive over
    disjoint files) give ``value`` = heatmap_value(metric, total, n)."""
    if metric not in HEATMAP_METRICS:
        raise ValueError(f"unknown token metric {metric!r}; one of {sorted(HEATMAP_METRICS)}")
    column = HEATMAP_METRICS[metric][0]
    df = store.query(lambda: f"""
SELECT (step // ?) * ? AS step, (pos // ?) * ? AS pos, sum({column}) AS total, count(*) AS n
FROM ({_source(store, run, "tokens", files)})
WHERE mask AND isfinite({column})
GROUP BY ALL ORDER BY step, pos""", [step_bin, step_bin, pos_bin, pos_bin])
    df["value"] = heatmap_value(metric, df["total"], df["n"])
    return df


def heatmap_value(metric: str, total: Any, n: Any) -> Any:
    """The cell value from a bin's sum and count: a mean, exponentiated for ``ratio`` (geometric mean)."""
    mean = total / n
    return np.exp(mean) if HEATMAP_METRICS[metric][1] == "exp" else mean


def compare_rows(store: Store, runs: list[str], columns: list[str]) -> pd.DataFrame:
    """``run``, ``step`` and ``columns`` of each run's lowest rank, stacked."""
    cols = check_columns(columns)
    parts = []
    for run in runs:
        select = ", ".join(["? AS run", "step", *cols])
        parts.append(store.query(lambda run=run, select=select: f"""
WITH v AS ({store.run_view("steps", run)})
SELECT {select} FROM v WHERE rank = (SELECT min(rank) FROM v) ORDER BY step""", [run]))
    if not parts:
        return pd.DataFrame(columns=["run", "step", *cols])
    return pd.concat(parts, ignore_index=True)


def view_columns(store: Store) -> pd.DataFrame:
    """``view``, ``column``, ``type`` of every column of the store's views (the SQL page's column browser)."""
    return store.query("""
SELECT table_name AS view, column_name AS "column", data_type AS type FROM information_schema.columns
WHERE table_schema = 'main' AND table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal)
ORDER BY table_name, ordinal_position""")


def user_query(store: Store, sql: str, max_rows: int = 10_000, limits: Limits | None = None
               ) -> tuple[pd.DataFrame, bool]:
    """Run a person's SQL read-only (``sandbox``); return (at most ``max_rows`` rows, whether there were more)."""
    return store.sql(sql, limits or Limits(max_rows=max_rows))


__all__ = ["ReadOnlyQueryError", "STEP_COLUMNS", "Store", "runs_summary", "HEATMAP_METRICS", "check_columns", "compare_rows", "heatmap_value",
           "run_events", "run_info", "run_names", "run_rows", "run_segment_files", "segment_files", "segment_steps", "sequence_tokens",
           "step_rows", "token_heatmap", "token_sequences", "token_steps", "user_query", "view_columns"]
