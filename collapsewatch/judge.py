"""The episodes a reader shows for a run, and its verdict — one home for the run page, ``runs``, ``detect`` and
``watch``.

    j = judge(store, run)            # Judgement: events, recorded, computed, note, rules, verdict

Stored episodes are shown as they are when the rules that found them are the reader's: every stored row's
``rules`` digest equals :func:`collapsewatch.detectors.rules.rules_digest` of the reader's settings (a run with no
stored episode counts when its Monitor ran these rules: ``versions.detector_rules`` in its run row). Otherwise —
older code, other settings, a run ingested or recorded without detectors — the reader's rules run over the stored
steps (offline detection: the online code path, so the same episodes a live run of today's code would have
stored), computed on read and never written; the stored ones stay in ``recorded`` and ``note`` says so.

Cached per (store, run, rank, rules digest, segment files): segments are immutable with unique names, so the
key changes exactly when a flush adds rows (a new last step) or compaction rewrites them. Detection costs about
1 ms a step on a quiet 2-core machine, once per key; ``judge``'s judgements are also kept between processes
(:mod:`collapsewatch.judged`), so a finished run is judged once, not once per command.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import judged
from .detectors import DetectorConfig, detect_frame
from .detectors.events import EVENT_COLUMNS, events_frame
from .detectors.rules import rules_digest
from .judged import Judgement
from .offline import run_steps
from .reward import drill_of
from .store import mirror
from .store.queries import BULK, Store, run_events, run_info, run_segment_files, step_rows
from .verdict import signal_columns, verdict

COMPUTED = "computed"
"""``source`` of episodes computed on read (never stored)."""


KEY_TABLES = ("runs", "step_metrics", "scalars", "events")
"""The tables a run's judgement is derived from."""


def fetch_keys(store: Store, runs: list[str]) -> None:
    """Before judging many ``runs`` of an object store: every run's ``KEY_TABLES`` fetched into the mirror in one
    round (each run's own fetch is a download round and a rewrite of the mirror's state)."""
    if store.where.remote is not None and len(runs) > BULK:
        mirror.need(store.root, KEY_TABLES, None)


def key_files(store: Store, run: str) -> tuple:
    """(path, size) of each run-row, step, scalar and event segment of ``run``, per table: what a judgement of the run
    is derived from (segments are immutable with unique names)."""
    return tuple(tuple(f) for f in run_segment_files(store, run, KEY_TABLES))


_lock = threading.Lock()
_cache: OrderedDict[tuple, Any] = OrderedDict()
MAX_ENTRIES = 64


def stale_reason(recorded: pd.DataFrame, run_rules: str | None, rules: str) -> str:
    """'' when the stored episodes are the reader's rules' own, else why not (one phrase)."""
    if recorded.empty:
        if run_rules == rules:
            return ""
        return ("it was recorded without a rules digest (older code, or no detectors)" if run_rules is None
                else f"it was recorded by other rules ({run_rules})")
    got = set(recorded["rules"].fillna("unknown").astype(str)) if "rules" in recorded.columns else {"unknown"}
    if got == {rules}:
        return ""
    return f"its {len(recorded)} stored episodes were found by other rules ({', '.join(sorted(got))})"


def judge(store: Store, run: str, config: DetectorConfig | None = None, rank: int | None = None) -> Judgement:
    """The run's episodes under ``config``'s rules (default: built-in) and its verdict, read from ``rank`` (default:
    the run's lowest); ValueError naming the known runs when ``run`` is not one."""
    rules = rules_digest(config)
    files = key_files(store, run)
    kept = judged.key(store.root, rank, rules, files)
    found = _cached(("kept", str(store.root), run, repr(kept)), lambda: judged.load(store.root, run, kept))
    if found is not None:  # judged before, by this process or another, on these files under these rules
        return found
    info = run_info(store, run)
    if info is None:
        raise ValueError(unknown_run_message(store, run))
    if rank is not None:
        info = dict(info, rank=rank)
    key = ("judgement", str(store.root), run, int(info["rank"]), rules, files)
    j = _cached(key, lambda: _judge(store, run, info, config, rules))
    judged.save(store.root, run, kept, j)
    with _lock:
        _cache[("kept", str(store.root), run, repr(kept))] = j
    return j


def summary(store: Store, run: str, config: DetectorConfig | None = None, files: tuple | None = None) -> judged.Summary:
    """``judge``'s verdict, episode count and ``computed`` flag, read from the kept judgement without building its
    frames when the run was judged before under these rules on these files (by any process), else judged now.
    ``files``: the run's ``key_files`` when the caller has them."""
    kept = judged.key(store.root, None, rules_digest(config), key_files(store, run) if files is None else files)
    with _lock:
        j = _cache.get(("kept", str(store.root), run, repr(kept)))
    if j is None:
        found = judged.load_summary(store.root, run, kept)
        if found is not None:
            return found
        j = judge(store, run, config)
    return judged.Summary.of(j)


def _judge(store: Store, run: str, info: dict, config: DetectorConfig | None, rules: str) -> Judgement:
    recorded = run_events(store, run)
    stale = bool(stale_reason(recorded, run_rules(info), rules))
    steps = run_steps(store, run, int(info["rank"])) if stale else \
        step_rows(store, run, ["reward_mean"], rank=int(info["rank"]))
    return judgement(store, run, info, recorded, steps, config, steps_for_detection=steps if stale else None)


def run_rules(info: dict) -> str | None:
    """The rules digest a run's Monitor recorded (None: older code, or no detectors)."""
    versions = info.get("versions")
    return versions.get("detector_rules") if isinstance(versions, dict) else None


def judgement(store: Store, run: str, info: dict, recorded: pd.DataFrame, rows: pd.DataFrame,
              config: DetectorConfig | None = None, steps_for_detection: pd.DataFrame | None = None,
              keep: bool = False) -> Judgement:
    """The judgement from what a caller already holds: the run's ``info`` (``run_info``), its ``recorded``
    episodes and step ``rows`` with ``step`` and ``reward_mean`` (the dashboard's caches). Only when the recorded
    episodes came from other rules are the run's full step rows read (or ``steps_for_detection`` used) and the
    rules run on them, once per (run, rules, segment files). With ``keep`` (``info`` of the run's lowest rank: the
    dashboard's pages), those episodes are first looked up in the judgement ``judge`` keeps between processes
    (``runs``, ``detect``), so a run judged there is not judged again by a page."""
    rules = rules_digest(config)
    why = stale_reason(recorded, run_rules(info), rules)
    computed, kept = False, None
    if why:
        rank = int(info["rank"])
        files = key_files(store, run)
        kept = judged.key(store.root, None, rules, files) if keep else None

        def detect() -> pd.DataFrame | None:
            held = judged.load(store.root, run, kept) if kept is not None else None
            if held is not None and held.computed:  # judged before, by this process or another
                return held.events
            steps = steps_for_detection if steps_for_detection is not None else run_steps(store, run, rank)
            if steps.empty:
                return None
            return pd.DataFrame(events_frame(run, rank, detect_frame(steps, config), COMPUTED, rules),
                                columns=EVENT_COLUMNS)

        found = _cached(("computed", str(store.root), run, rank, rules, files), detect)
        if found is not None:
            events, computed = found, True
    if not computed:
        events = recorded.reindex(columns=EVENT_COLUMNS)
    events = events.sort_values(["step_start", "detector", "phase"], kind="stable", ignore_index=True)
    reward = rows["reward_mean"].to_numpy(dtype=float, na_value=np.nan) if "reward_mean" in rows else []
    logged = logged_signals(store, run, int(info["rank"]), rows, steps_for_detection)
    v = verdict(events, rows["step"].to_numpy() if len(rows) else [], reward, drill_of(info.get("config")), logged)
    note = f"Showing today's detector rules ({rules}), computed on read: {why}." if computed else ""
    return Judgement(run, events, recorded.reindex(columns=EVENT_COLUMNS), computed, note, rules, v)


WATCHED = (*signal_columns(), "response_length_mean", "eval_score")
"""The columns the verdict's note on a log without early signals reads (:func:`collapsewatch.verdict.blind_note`)."""


def logged_signals(store: Store, run: str, rank: int, *held: pd.DataFrame | None) -> set[str]:
    """The columns of ``WATCHED`` that hold a value on some step of the run: read from the frames the caller holds
    (all of the run's steps) where they have the column; the others are read only when those frames show no early
    signal (what the note needs), once per (run, rank, segment files)."""
    frames = [f for f in held if f is not None and len(f.columns)]
    out, missing = set(), []
    for c in WATCHED:
        have = [f for f in frames if c in f.columns]
        if not have:
            missing.append(c)
        elif any(f[c].notna().any() for f in have):
            out.add(c)
    if not missing or out & set(signal_columns()):
        return out

    def read() -> set[str]:
        rows = step_rows(store, run, missing, rank=rank)
        return {c for c in missing if c in rows.columns and rows[c].notna().any()}

    return out | _cached(("logged", str(store.root), run, rank, tuple(missing), key_files(store, run)), read)


def _cached(key: tuple, make: Callable[[], Any]) -> Any:
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    value = make()
    with _lock:
        _cache[key] = value
        while len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    return value


def unknown_run_message(store: Store, run: str) -> str:
    """'run 'x' not found in store …; known runs: a, b' — the one wording of an unknown run name."""
    from .store.queries import run_names

    names = run_names(store)
    where = store.path if isinstance(store.path, str) else str(Path(store.path))
    known = ", ".join(sorted(names)) if names else "none"
    return f"run {run!r} not found in store {where!r}; known runs: {known}"


def clear() -> None:
    with _lock:
        _cache.clear()
