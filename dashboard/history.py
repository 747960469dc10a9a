"""The runs page's table over the store's segment caches (:mod:`.cache`): run rows, each run's
step summary (``series.last_values``) and its detector episodes, computed once per set of segments and rules (kept
between processes) and read again at a refresh only for runs whose folders changed."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable

import pandas as pd

from collapsewatch import judged
from collapsewatch.detectors.rules import rules_digest
from collapsewatch.judge import fetch_keys, judgement, key_files
from collapsewatch.store import manifest, queries
from collapsewatch.store.manifest import in_turn, load_record, run_signature, runs_folder_mtimes, save_record
from collapsewatch.store.queries import Store

from . import cache
from .cache import (
    EventLog,
    Partials,
    SegmentIndex,
    StepHistory,
    TokenIndex,
    event_log,
    step_history,
    token_index,
)
from .events_view import run_event_summary
from .series import last_values
from .tables import RUNS_VERSION, active_flags

__all__ = ["EventLog", "Partials", "SegmentIndex", "StepHistory", "TokenIndex", "clear", "event_log", "run_table",
           "step_history", "token_index"]

SUMMARY_COLUMNS = ("reward_mean", "ratio_p50_pos", "logp_old_mean_correct", "entropy_mean", "on_policy",
                   "ratio_p05_pos", "ratio_p95_pos")
KIND = "runs-page"
_tables: dict[tuple[str, tuple[str, ...]], dict[str, tuple[tuple | None, dict, int | None]]] = {}
ROTATE = manifest.IN_TURN
"""Settled runs whose folders a refresh looks at in turn, whether their ``runs`` folder changed or not."""
_turns = itertools.count()
_looks: dict[tuple[str, tuple[str, ...]], tuple[list[str], dict[str, tuple | None], set[str]]] = {}
_frames: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, ...], pd.DataFrame]] = {}
_versions = itertools.count(1)
FRAME_VERSION = "runs_frame_version"
"""``run_table``'s frames carry a version in their ``attrs``: the same only when no run changed (what the page made
of that frame can be reused)."""


def run_table(store: Store, columns: tuple[str, ...]) -> pd.DataFrame:
    """One row per run for the runs page: run rows, step summary (``series.last_values``), events and the
    verdict (:func:`collapsewatch.judge.judgement`), whose reward now / best / collapse step the page shows.

    A refresh reads again only the runs whose folders changed since the last one (``manifest.run_signature``: their
    mtimes) and the running ones, so its cost does not grow with the number of finished runs. A settled finished
    run's folders are looked at only when its ``runs`` folder changed (every writer, a resumed one too, replaces its
    run row there) and, in turn, ``ROTATE`` runs per refresh (a file copied into a run's folder by hand shows within
    ``runs / ROTATE`` refreshes); on a folder store that ``runs`` folder is itself looked at only for running, new
    and in-turn runs, and for every run when the store's folder changed (a run added or removed, a writer started on
    a run folder that was there: ``manifest.runs_folder_mtimes`` with ``fresh``). A running run's summary comes
    from its ``StepHistory`` (incremental; warm when its overview is open); a finished run's is computed once per
    set of segment files and rules and kept between processes (``store.manifest``), like its judgement."""
    store.refresh()
    key = (str(store.root), columns)
    seen = _tables.setdefault(key, {})
    last = _looks.get(key)  # (names, each run's signature, the runs to look at every time) of the last refresh
    now = time.time_ns()
    turn = next(_turns)
    looked: set[str] | None = None

    def look_again(names: list[str]) -> set[str]:  # runs whose `runs` folder is looked at again (a folder store)
        nonlocal looked
        watch = last[2] if last is not None else {r for r in names if _watched(seen.get(r))}
        looked = in_turn(names, turn, ROTATE) | watch
        return looked

    marks = runs_folder_mtimes(store.root, look_again if store.where.remote is None else None)
    names = sorted(marks)
    checked = in_turn(names, turn, ROTATE)
    if looked is not None and last is not None and names == last[0]:
        sigs, watch = last[1], set(last[2])  # no run added or removed: only the runs looked at are compared
        todo = sorted(looked & marks.keys())
    else:
        sigs, watch, todo = {}, set(), names
    stale = []
    for run in todo:
        kept = seen.get(run)
        if (kept is not None and kept[0] is not None and kept[2] == marks[run] and run not in checked
                and kept[1]["status"] != "running" and marks[run] <= now - manifest.SETTLE_NS):
            sigs[run] = kept[0]  # settled, its run row not replaced: not looked at again (ROTATE)
            watch.discard(run)
            continue
        sigs[run] = sig = run_signature(store.root / run, now)
        if kept is None or sig is None or kept[0] != sig or kept[1]["status"] == "running":
            stale.append(run)
    if stale:
        fetch_keys(store, stale)
        base = queries.run_rows(store, stale)
        for r in base.to_dict("records"):
            if r["run"] in stale:
                row = {**r, **_computed(store, r, columns), RUNS_VERSION: next(_versions)}
                seen[r["run"]] = (sigs.get(r["run"]), row, marks.get(r["run"]))
    for run in todo:  # running, unsettled or without a run row yet: looked at at every refresh
        if _watched(seen.get(run)):
            watch.add(run)
        else:
            watch.discard(run)
    _looks[key] = (names, sigs, watch)
    gone = [r for r in seen if r not in sigs] if todo is names else []
    for run in gone:
        del seen[run]
    kept = _frames.get(key)
    order = kept[0] if kept is not None and not stale and todo is not names else tuple(r for r in sigs if r in seen)
    if kept is not None and not gone and kept[0] == order and len(stale) <= queries.BULK:
        df = kept[1]  # the last refresh's frame, its re-read runs' rows replaced
        if stale:
            fresh = pd.DataFrame([seen[r][1] for r in stale if r in seen], columns=df.columns)
            # (infer_objects: a None beside floats reads as NaN, as in a frame built from every row at once)
            df = _sorted(pd.concat([df[~df["run"].isin(stale)], fresh], ignore_index=True).infer_objects())
    else:
        rows = [seen[r][1] for r in order]
        df = _sorted(pd.DataFrame(rows)) if rows else pd.DataFrame()
    if kept is None or df is not kept[1]:
        df.attrs[FRAME_VERSION] = next(_versions)  # a frame another refresh gave unchanged keeps its version
    _frames[(str(store.root), columns)] = (order, df)
    return df.copy(deep=False)


def _watched(kept: tuple | None) -> bool:
    """Whether a run's kept entry (signature, row, mark) asks for a look at every refresh: none yet, folders that
    changed within ``SETTLE_NS`` (no signature), or running."""
    return kept is None or kept[0] is None or kept[1]["status"] == "running"


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["started_at", "run"], ascending=[False, True], kind="stable", ignore_index=True)


def _computed(store: Store, r: dict, columns: tuple[str, ...]) -> dict:
    """The summary and verdict fields of one run's row; a finished run's kept per set of files and rules."""
    run, rank, running = r["run"], int(r["rank"]), r["status"] == "running"
    key = None if running else judged.key(store.root, rank, rules_digest(None), key_files(store, run)) + [columns]
    kept = load_record(store.root, KIND, run, key) if key is not None else None
    if isinstance(kept, dict):
        return kept
    if running:
        steps = step_history(store, run, rank, columns).rows_for(store, True)
        summary = last_values(steps)
    else:
        full = queries.step_rows(store, run, SUMMARY_COLUMNS, rank=rank)
        summary, steps = last_values(full), full[["step", "reward_mean"]]
    # the episodes and verdict every reader shows (collapsewatch.judge): stored, or today's rules' on read
    j = judgement(store, run, {**r, "config": _parsed(r.get("config")), "versions": _parsed(r.get("versions"))},
                  event_log(store, run).events(store), steps, keep=True)
    events = j.events
    n_active, flags = active_flags(events, summary["last_step"])
    v = j.verdict  # the run's reward now / best / collapse: the verdict's, the same as `runs` and the run page
    out = {**summary, "n_events": len(events), "n_active": n_active, "active_flags": flags,
           "reward_now": v.reward_after, "reward_best": v.reward_before, "reward_best_step": v.reward_best_step,
           "collapse_step": v.collapse_step, "verdict": v.shown, "verdict_sentence": v.sentence,
           "events_computed": j.computed, **run_event_summary(events)}
    out = {k: judged.plain(x, nan=None) for k, x in out.items()}
    if key is not None:
        save_record(store.root, KIND, run, key, out)
    return out


def _parsed(text: object) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def clear() -> None:
    """Every server-side cache of the dashboard: segment caches, summaries, judgements, drawn overview figures."""
    from collapsewatch import judge

    cache.clear()
    _tables.clear()
    _looks.clear()
    _frames.clear()
    judge.clear()
    for hook in _clear_hooks:
        hook()


_clear_hooks: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Have :func:`clear` call ``hook`` too: a module of the dashboard that keeps a cache of its own (the live
    page's drawn figures) registers it here, so this module need not import it."""
    _clear_hooks.append(hook)
