"""The runs page's table over the store's segment caches (``collapsewatch.store.cache``): run rows, each run's
step summary (``series.last_values``) and its detector episodes, computed once per set of segments."""

from __future__ import annotations

import json

import pandas as pd

from collapsewatch.judge import judgement
from collapsewatch.store import cache, queries
from collapsewatch.store.cache import (
    EventLog,
    Partials,
    SegmentIndex,
    StepHistory,
    TokenIndex,
    event_log,
    step_history,
    token_index,
)
from collapsewatch.store.queries import Store

from .events_view import run_event_summary
from .series import last_values
from .tables import active_flags

__all__ = ["EventLog", "Partials", "SegmentIndex", "StepHistory", "TokenIndex", "clear", "event_log", "run_table",
           "step_history", "token_index"]

SUMMARY_COLUMNS = ("reward_mean", "ratio_p50_pos", "logp_old_mean_correct", "entropy_mean", "on_policy",
                   "ratio_p05_pos", "ratio_p95_pos")
_summaries: dict[tuple[str, str], tuple[frozenset, dict]] = {}


def run_table(store: Store, columns: tuple[str, ...]) -> pd.DataFrame:
    """One row per run for the runs page: run rows, step summary (``series.last_values``), events and the
    verdict (:func:`collapsewatch.judge.judgement`), whose reward now / best / collapse step the page shows.

    A running run's summary comes from its ``StepHistory`` (incremental; warm when its overview is open);
    other runs' summaries are computed once per set of segments, so a refresh reads nothing old again."""
    base = queries.run_rows(store)
    rows = []
    for r in base.to_dict("records"):
        run, rank = r["run"], int(r["rank"])
        if r["status"] == "running":
            steps = step_history(store, run, rank, columns).rows_for(store, True)
            summary = last_values(steps)
        else:
            keys = frozenset(queries.segment_files(store, run, "step_metrics") + queries.segment_files(
                store, run, "scalars"))
            cached = _summaries.get((str(store.root), run))
            if cached is None or cached[0] != keys:
                full = queries.step_rows(store, run, SUMMARY_COLUMNS, rank=rank)
                cached = (keys, last_values(full), full[["step", "reward_mean"]])
                _summaries[(str(store.root), run)] = cached
            summary, steps = cached[1], cached[2]
        # the episodes and verdict every reader shows (collapsewatch.judge): stored, or today's rules' on read
        j = judgement(store, run, {**r, "config": _parsed(r.get("config")), "versions": _parsed(r.get("versions"))},
                      event_log(store, run).events(store), steps)
        events = j.events
        n_active, flags = active_flags(events, summary["last_step"])
        v = j.verdict  # the run's reward now / best / collapse: the verdict's, the same as `runs` and the run page
        rows.append({**r, **summary, "n_events": len(events), "n_active": n_active, "active_flags": flags,
                     "reward_now": v.reward_after, "reward_best": v.reward_before,
                     "reward_best_step": v.reward_best_step, "collapse_step": v.collapse_step,
                     "verdict": v.status, "verdict_sentence": v.sentence,
                     "events_computed": j.computed, **run_event_summary(events)})
    return pd.DataFrame(rows)


def _parsed(text: object) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def clear() -> None:
    """Every server-side cache of the dashboard: segment caches, summaries, judgements, drawn overview figures."""
    from collapsewatch import judge

    from . import live

    cache.clear()
    _summaries.clear()
    judge.clear()
    live.clear()
