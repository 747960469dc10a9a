"""Offline detection: the detectors over a stored run; with ``write`` the events are stored too.

Online (the Monitor's recorder) and offline detection feed the same rows — the catalogue's step metrics and
logged scalars of one rank, in step order — to the same :class:`DetectorSuite`, so they give the same
events (tests/test_offline.py holds them to it).
"""

from __future__ import annotations

import os

import pandas as pd

from .catalogue import ALL_STEP_COLUMNS
from .detectors import DetectorConfig, detect_frame
from .detectors.events import TIMELINE_COLUMNS, events_frame
from .detectors.nonfinite import STORED_FIRST_NONFINITE
from .detectors.rules import rules_digest
from .store.queries import Store, run_info, run_names
from .store.writer import replace_segment


def lowest_rank(store: Store, run: str) -> int:
    """The rank a reader reads of ``run`` when none is named: its lowest (:func:`.store.queries.run_info`; 0 for a
    run without a run row)."""
    info = run_info(store, run)
    return 0 if info is None else int(info["rank"])


def run_steps(store: Store, run: str, rank: int = 0) -> pd.DataFrame:
    """One rank's step rows in the columns the detectors read. A frame cannot tell a stored NaN from NULL, so a step
    whose ``first_nonfinite`` is empty names the first of the non-finite detector's scalars (grad_norm, then loss) that
    is NaN there: a NaN loss in an ingested log is flagged like the probe's counts."""
    cols = ", ".join(["step", "ts", *(f"{STORED_FIRST_NONFINITE} AS first_nonfinite" if c == "first_nonfinite" else c
                                      for c in ALL_STEP_COLUMNS)])
    return store.query(lambda: f"SELECT {cols} FROM ({store.run_view('steps', run)}) WHERE rank = ? ORDER BY step",
                       [rank])


def detect_runs(store_path: str | os.PathLike, run: str | None = None, rank: int | None = None, write: bool = False,
                config: DetectorConfig | None = None) -> pd.DataFrame:
    """Detect over one run (or every run) of a store; returns the phase timeline, optionally stores it. Each run is
    read — and its episodes stored — at ``rank``, default the run's lowest: the rank every reader reads
    (:func:`collapsewatch.judge.judge`), so a run recorded only as rank 1 is judged and written as rank 1."""
    store = Store(store_path)
    runs = [run] if run is not None else run_names(store)
    if run is not None and not store.has_run(run):
        raise ValueError(f"run {run!r} not found in store {str(store_path)!r}")
    rows = []
    for r in runs:
        at = rank if rank is not None else lowest_rank(store, r)
        events = detect_frame(run_steps(store, r, at), config)
        cols = events_frame(r, at, events, "offline", rules_digest(config))
        if write:
            replace_segment(store_path, r, "events", f"offline-r{at}", cols)
        rows.append(pd.DataFrame(cols))
    store.close()
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    if out.empty:
        return pd.DataFrame(columns=list(TIMELINE_COLUMNS))
    return out[list(TIMELINE_COLUMNS)].sort_values(["run", "step_start", "detector"], ignore_index=True)
