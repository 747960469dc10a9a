"""A store's runs from their run rows: names newest first, one row or one parsed record per run.

The run rows (``<run>/runs/r<rank>.parquet``, one per rank, replaced at each heartbeat and at the end) are small and
one per run, so what every page and command needs first — which runs there are, their status, config and start —
is read from them alone: of a few runs from their folders, of many in one query over the ``runs`` view, and (the
run names' order) only when a run's ``runs`` folder changed.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from .manifest import SETTLE_NS, in_turn, runs_folder_mtimes
from .views import runs_sql

if TYPE_CHECKING:
    from .queries import Store


RUN_ROW_COLUMNS = ("run", "status", "objective", "world_size", "started_at", "updated_at", "rank", "dropped_batches",
                   "write_errors", "config", "versions")
BULK = 8
"""Runs to read again beyond which ``run_rows`` reads every run row in one query instead of each run's folder."""


def _rows_of(store: Store, runs: Sequence[str]) -> str:
    """The ``runs`` view's rows of ``runs``, scanning their folders alone (built at each try of a ``Store.query``)."""
    return runs_sql(" UNION ALL ".join(f"SELECT * FROM ({store.run_view('run_ranks', r)})" for r in runs))


def run_rows(store: Store, runs: Sequence[str] | None = None,
             columns: Sequence[str] = RUN_ROW_COLUMNS) -> pd.DataFrame:
    """One row per run from the run rows alone (status, objective, heartbeat, lowest rank …: ``columns`` of the
    ``runs`` view), newest first: of every run, or of ``runs`` (up to ``BULK`` of them: their folders alone are
    read; more: every run row, those kept). The runs page's step and event summaries come from per-run caches."""
    bad = [c for c in columns if not c.isidentifier()]
    if bad:
        raise ValueError(f"not a column name of the runs view: {bad[0]!r}")

    def sql() -> str:
        if runs is not None and not runs:
            source = "SELECT * FROM runs WHERE false"
        elif runs is None or len(runs) > BULK:
            source = "SELECT * FROM runs"
        else:
            source = _rows_of(store, runs)
        return f"SELECT {', '.join(columns)} FROM ({source}) ORDER BY started_at DESC, run"

    df = store.query(sql)
    if runs is not None and len(runs) > BULK:
        df = df[df["run"].isin(set(runs))].reset_index(drop=True)
    return df


_starts: dict[tuple[str, str], tuple[int, Any]] = {}
"""(store root, run) → (mtime of the run's ``runs`` folder, its start) for :func:`run_names`, in this process."""
_turns = itertools.count()


def run_names(store: Store) -> list[str]:
    """Every run's name, most recently started first (then by name), as ``SELECT run FROM runs ORDER BY started_at
    DESC, run`` gives them. On a folder store a run's start is read again only when its ``runs`` folder changed (a
    run row added or replaced: its mtime), so a process that asked once does not read every run row again (a run
    page's run picker at 1,000 runs); and that folder is looked at only for new runs and runs in turn unless the
    store's folder changed (``manifest.runs_folder_mtimes`` with ``fresh``: a resumed run's new start shows at
    once where its writer announced it, within runs / ``IN_TURN`` asks otherwise)."""
    if store.where.remote is not None:
        return store.query("SELECT run FROM runs ORDER BY started_at DESC, run")["run"].tolist()
    root, now = str(store.root), time.time_ns()
    turn = next(_turns)

    def fresh(names: list[str]) -> set[str]:  # new, unsettled, without a run row yet, or in turn
        return in_turn(names, turn) | {r for r in names if (k := _starts.get((root, r))) is None
                                       or k[1] is _ABSENT or k[0] > now - SETTLE_NS}

    seen = runs_folder_mtimes(store.root, fresh)
    stale = [r for r, m in seen.items() if m > now - SETTLE_NS or _starts.get((root, r), (None,))[0] != m]
    if stale:
        started = dict(store.query(lambda: "SELECT run, started_at FROM "
                                   f"({'SELECT * FROM runs' if len(stale) > BULK else _rows_of(store, stale)})")
                       .itertuples(index=False))
        for run in seen if len(stale) > BULK else stale:  # (every run row was read: every run's start is known)
            _starts[(root, run)] = (seen[run], started.get(run, _ABSENT))
    rows = [(run, start) for run in seen if (start := _starts[(root, run)][1]) is not _ABSENT]
    dated = sorted(((r, t) for r, t in rows if not pd.isna(t)), key=lambda rt: rt[0])
    dated.sort(key=lambda rt: rt[1], reverse=True)  # stable: runs started at the same instant stay by name
    return [r for r, _ in dated] + sorted(r for r, t in rows if pd.isna(t))  # (DuckDB puts NULLs last)


_ABSENT = object()  # a run folder without a run row (the runs view has no row for it)


def run_info(store: Store, run: str) -> dict[str, Any] | None:
    """Status, objective, config and versions (parsed), ranks and world size of one run; None when the run is
    unknown."""
    return run_infos(store, [run])[run]


def run_infos(store: Store, runs: Sequence[str]) -> dict[str, dict[str, Any] | None]:
    """:func:`run_info` of each of ``runs``, in one query over their folders alone (a compare of 50 runs reads
    them at once)."""
    out: dict[str, dict[str, Any] | None] = {run: None for run in runs}
    known = [run for run in dict.fromkeys(runs) if store.has_run(run)]
    if not known:
        return out
    df = store.query(lambda: f"""
SELECT run, status, objective, config, versions, rank, world_size, ranks_seen, started_at, updated_at
FROM ({_rows_of(store, known)})""")
    for row in df.astype(object).where(df.notna(), None).to_dict("records"):  # NULL as None, whatever the others
        if row["rank"] is None:
            continue
        for k in ("config", "versions"):
            try:
                row[k] = json.loads(row[k]) if row[k] else {}
            except ValueError:
                row[k] = {}
        row["rank"] = int(row["rank"])
        out[row.pop("run")] = row
    return out
