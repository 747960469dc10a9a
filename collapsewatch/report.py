"""What ``runs``, ``detect`` and ``watch`` print: a run's verdict and episodes for a person (compact tables, one
sentence per episode) and for a script (JSON objects; the same objects in ``detect --json`` and ``watch --json``).

    event_object(row, run)   {"type": "event", "run", …events row…, "evidence": {…}, "text": "…"}
    verdict_object(j)        {"type": "verdict", "run", "status", "sentence", …, "events_computed", "note"}
    episode_table(events)    steps · severity · detector · phase · what it saw (· evidence)
    runs_table(store)        one row per run with its verdict

Episodes and verdicts come from :func:`collapsewatch.judge.judge` (the reader's rules); episode rows are listed in
:func:`collapsewatch.verdict.reader_order` (the cause first).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from . import judged, runlines
from .alerts import event_message, event_payload
from .detectors.events import SEVERITY_RANK
from .judge import Judgement, fetch_keys, judge, key_files, summary
from .store import queries
from .store.manifest import load_record, run_folders, save_record
from .store.queries import Store
from .store.summaries import RUN_COLUMNS, STEP_STATS, SUMMARY_COLUMNS, run_summary
from .verdict import reader_order

RECORDED_HINT = "--recorded shows the stored ones"


def event_object(row: Any, run: str) -> dict[str, Any]:
    """One episode as the JSON object ``detect --json`` lists and ``watch --json`` prints (and POSTs)."""
    return event_payload(dict(row, run=run))


def verdict_object(j: Judgement) -> dict[str, Any]:
    """A run's verdict as a JSON object: the verdict's fields, and whether its episodes were computed on read."""
    return {"type": "verdict", "run": j.run, **j.verdict.as_dict(), "rules": j.rules,
            "events_computed": j.computed, "note": j.note}


def events_of(j: Judgement, recorded: bool = False, least: str = "info") -> pd.DataFrame:
    """The judgement's episodes (or the stored ones) at or above severity ``least``, in order of start."""
    ev = j.recorded if recorded else j.events
    if ev.empty:
        return ev
    keep = ev["severity"].map(lambda s: SEVERITY_RANK.get(str(s), 0) >= SEVERITY_RANK[least])
    return ev[keep].sort_values(["step_start", "detector", "phase"], kind="stable", ignore_index=True)


def episode_table(events: pd.DataFrame, evidence: bool = False) -> pd.DataFrame:
    """A person's table of episodes: the cause first; the evidence JSON only when asked for."""
    cols = ["steps", "severity", "detector · phase", "what it saw"] + (["evidence"] if evidence else [])
    rows = []
    for ev in reader_order(events).to_dict("records"):
        a, b = int(ev["step_start"]), int(ev["step_end"])
        row = [f"{a}–{b}" if b > a else str(a), ev["severity"], f"{ev['detector']} · {ev['phase']}",
               event_message(ev)]
        if evidence:
            row.append(ev["evidence"] if isinstance(ev["evidence"], str) else json.dumps(ev["evidence"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def judge_all(store: Store, run: str | None, config: Any = None, rank: int | None = None) -> list[Judgement]:
    """Judgements of one run (ValueError listing the known runs when it is not one) or of every run, read from
    ``rank`` (default: each run's lowest)."""
    from .store.queries import run_names

    runs = [run] if run is not None else sorted(run_names(store))
    return [judge(store, r, config, rank) for r in runs]


def short_time(v: Any) -> str | None:
    """A timestamp as ``2026-11-25 12:50`` (UTC), None for NULL."""
    if v is None or (isinstance(v, float) and v != v) or v is pd.NaT:
        return None
    ts = pd.Timestamp(v)
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%d %H:%M")


def _step_stats(store: Store, run: str, rank: int | None, files: tuple) -> dict[str, Any]:
    """A run's ``STEP_STATS`` (as ``runs_summary`` gives them), kept between processes keyed by the run's segment
    files and rank: read from that run's folder once per set of files, then from the kept record."""
    k = judged.key(store.root, rank, None, files)
    kept = judged.load_stats(store.root, run, k)
    if kept is not None and set(kept) == set(STEP_STATS) and kept["n_steps"] is not None:  # None: kept before 0
        return kept
    row = run_summary(store, run) or {}
    stats = {c: row.get(c) for c in STEP_STATS}
    judged.save_stats(store.root, run, k, stats)
    return stats


ROW_KIND = "run-row"
ROW_LAYOUT = 1


def _row_key(root: Path, run: str) -> list | None:
    """What a run's row is read from: (name, size, mtime) of each file of its ``runs`` folder (a heartbeat, a finish
    or a resume replaces one, which changes its mtime); None when the folder cannot be listed."""
    try:
        return [ROW_LAYOUT, sorted([e.name, (st := e.stat()).st_size, st.st_mtime_ns]
                                   for e in os.scandir(os.path.join(root, run, "runs")) if e.is_file())]
    except OSError:
        return None


def kept_run_rows(store: Store, runs: list[str] | None = None) -> pd.DataFrame:
    """``RUN_COLUMNS`` and the lowest rank of every run (or of ``runs``), oldest first, as the ``runs`` view gives
    them. A run whose status is settled (finished or crashed: no heartbeat can change it while its run-row files
    stay the same) is read once per set of run-row files and kept between processes (``store.manifest``); the
    others, and runs not kept yet, are read from their folders (``queries.run_rows``: every run row in one query
    when many are)."""
    columns = (*RUN_COLUMNS, "rank")
    store.refresh()
    rows, dtypes, stale, keys = [], None, [], {}
    for run in run_folders(store.root) if runs is None else runs:
        keys[run] = k = _row_key(store.root, run)
        kept = load_record(store.root, ROW_KIND, run, k) if k is not None else None
        if isinstance(kept, dict) and kept.get("columns") == list(columns):
            rows.extend(kept["rows"])
            dtypes = kept["dtypes"]
        else:
            stale.append(run)
    if stale:
        fresh = queries.run_rows(store, stale, columns)
        out = judged.frame_out(fresh)
        for (run, status), row in zip(fresh[["run", "status"]].itertuples(index=False), out["rows"], strict=True):
            if status != "running" and keys.get(run) is not None:
                save_record(store.root, ROW_KIND, run, keys[run], {**out, "rows": [row]})
        rows.extend(out["rows"])
        dtypes = out["dtypes"]
    if dtypes is None:
        return pd.DataFrame(columns=list(columns))
    df = judged.frame_in({"columns": list(columns), "dtypes": dtypes, "rows": rows})
    return df.sort_values(["started_at", "run"], kind="stable", ignore_index=True)


PARALLEL_MIN = 16
"""Runs to judge before ``runs_table`` spreads them over processes: each worker's start (a new interpreter importing
the package, about a second) costs more than judging a few runs in this one."""


def workers_default() -> int:
    """The CPUs this process may run on (``runs --workers``' default)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _line_at(root: str, r: dict) -> tuple[dict, dict]:
    """:func:`_line` in a worker process: the store opened there (a connection is not shared between processes)."""
    return _line(Store(root), r)


def _lines(store: Store, recs: list[dict], workers: int) -> list[tuple[dict, dict]]:
    """``_line`` of each run row, in order: in this process, or — with ``workers`` ≥ 2, at least ``PARALLEL_MIN``
    rows and a local store — in that many worker processes (started afresh: a fork would copy DuckDB's threads'
    locks). Each worker judges its runs from their folders and keeps what it judged (``judged``), as this process
    would; where the pool cannot start or a worker dies, this process goes through every run (reading what the
    workers kept, judging the rest)."""
    if workers < 2 or len(recs) < PARALLEL_MIN or store.where.remote is not None:
        return [(r, _line(store, r)) for r in recs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    n = min(workers, len(recs))
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
            out = list(pool.map(_line_at, [str(store.root)] * len(recs), recs, chunksize=max(1, len(recs) // (4 * n))))
    except (BrokenProcessPool, OSError):
        return [(r, _line(store, r)) for r in recs]
    return list(zip(recs, out, strict=True))


def runs_table(store: Store, workers: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(compact table, full rows): one row per run, oldest first, with its verdict. The full rows (for --json /
    --csv) hold every ``runs_summary`` column plus the verdict's fields; n_events counts the shown episodes.

    A settled run's line (not running) is kept whole between processes (``runlines``), so a warm ``runs`` of 1,000
    finished runs stats five folders and reads one small file per run. The others are read from the run rows
    (``kept_run_rows``) with each run's step statistics and verdict from what was kept of its segment files
    (``_step_stats``, ``judge.summary``), computed from its folder alone when new — by ``workers`` processes where
    many runs need it (a new store, or every run after a rules change: :func:`_lines`)."""
    lines, keys = runlines.kept_lines(store.root)
    stale = [run for run in keys if run not in lines]
    fetch_keys(store, stale)
    recs = (kept_run_rows(store, stale) if stale else pd.DataFrame()).to_dict("records")
    for r, (compact, full) in _lines(store, recs, workers):
        ts = full["started_at"]
        order = [True, 0] if ts is None or ts is pd.NaT else [False, ts.value]
        lines[r["run"]] = line = {"compact": {k: judged.plain(v, None) for k, v in compact.items()},
                                  "full": {k: judged.typed(v) for k, v in full.items()}, "order": order}
        if r["status"] != "running" and keys.get(r["run"]) is not None:
            runlines.keep_line(store.root, r["run"], keys[r["run"]], **line)
    order = runlines.ordered(lines)
    full = [{k: judged.untyped(v) for k, v in lines[run]["full"].items()} for run in order]
    return (pd.DataFrame(runlines.table_rows(lines), columns=list(runlines.COMPACT_COLUMNS)),
            _full_frame(full) if full else pd.DataFrame(columns=full_columns()))  # no run: still the header


def _full_frame(rows: list[dict]) -> pd.DataFrame:
    """The full rows as a frame whose columns of whole numbers stay whole where some run has none (a step such as
    ``first_warning_step``: pandas makes [None, 47] floats, printed 47.0 by --json and --csv)."""
    df = pd.DataFrame(rows)
    for c in df.columns:
        values = [r[c] for r in rows if r.get(c) is not None]
        if values and df[c].dtype.kind == "f" and all(type(v) is int for v in values):
            df[c] = df[c].astype("Int64")
    return df


NOT_IN_FULL = ("status", "n_steps", "last_step")
"""The verdict's fields that a run's full row has already (its run row's ``status``, ``n_steps``, ``last_step``)."""


def full_columns() -> list[str]:
    """The columns of ``runs_table``'s full rows, in ``_line``'s order (a store with no run prints them alone)."""
    from dataclasses import fields

    from .verdict import Verdict

    return list(dict.fromkeys([*SUMMARY_COLUMNS, "n_events", "events_computed", "verdict",  # n_events: once
                               *(f.name for f in fields(Verdict) if f.name not in NOT_IN_FULL)]))


def _line(store: Store, r: dict) -> tuple[dict, dict]:
    """One run's (compact, full) row of ``runs_table`` from its run row ``r``."""
    run = r["run"]
    files = key_files(store, run)
    stats = _step_stats(store, run, None if pd.isna(r["rank"]) else int(r["rank"]), files)
    r = {c: stats[c] if c in STEP_STATS else r[c] for c in SUMMARY_COLUMNS}
    j = summary(store, run, files=files)
    v = j.verdict
    fields = {k: x for k, x in v.as_dict().items() if k not in NOT_IN_FULL}
    full = {**r, "n_events": j.n_events, "events_computed": j.computed, "verdict": v.shown, **fields}
    compact = {"run": run, "status": r["status"], "objective": r["objective"], "steps": r["n_steps"],
               "updated": short_time(r["updated_at"]), "verdict": v.shown + ("*" if j.computed else ""),
               "episodes": j.n_events, "sentence": v.sentence}
    return compact, full
