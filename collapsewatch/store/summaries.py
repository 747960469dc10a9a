"""The runs table's numbers: each run's row (``RUN_COLUMNS``, from its run rows) with its step statistics
(``STEP_STATS``: step count, last step, last reward, stored episodes), over every run (``runs_summary``, the
views) or over one run's folder alone (``run_summary``: what ``collapsewatch runs`` computes once per set of a run's
segment files and keeps, ``collapsewatch.report``). One SQL text for both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from ..catalogue import scalar_column_sql
from .views import runs_sql

if TYPE_CHECKING:
    from .queries import Store

RUN_COLUMNS = ("run", "status", "objective", "world_size", "started_at", "updated_at", "ended_at", "hosts",
               "dropped_batches", "write_errors")
"""What ``runs_summary`` takes from the run rows (the rest, ``STEP_STATS``, from the run's segments)."""
STEP_STATS = ("n_steps", "last_step", "last_reward", "n_events")
SUMMARY_COLUMNS = (*RUN_COLUMNS[:7], *STEP_STATS, *RUN_COLUMNS[7:])
"""``runs_summary``'s columns, in its order."""


def _summary_sql(runs: str, step_metrics: str, scalars: str, events: str) -> str:
    """``runs_summary``'s SQL over the given relations: every run's (the views) or one run's (its folder's scans).
    A step is one the ``steps`` view has: a step row, a logged scalar or both (a Monitor that only ``log``s has
    steps; a run with none has 0, not NULL); the last reward is the observed one, else the logged one. Each table is scanned once."""
    return f"""
SELECT r.run, r.status, r.objective, r.world_size, r.started_at, r.updated_at, r.ended_at,
       coalesce(s.n_steps, 0) AS n_steps, s.last_step, coalesce(s.last_reward, s.logged_reward) AS last_reward,
       coalesce(e.n_events, 0) AS n_events, r.hosts,
       r.dropped_batches, r.write_errors
FROM ({runs}) r
LEFT JOIN (SELECT run, rank, count(DISTINCT step) AS n_steps, max(step) AS last_step,
                  arg_max(reward_mean, step) AS last_reward, arg_max(logged_reward, step) AS logged_reward
           FROM (SELECT run, rank, step, reward_mean, NULL::DOUBLE AS logged_reward FROM ({step_metrics})
                 UNION ALL
                 SELECT run, rank, step, NULL::DOUBLE,
                        CASE WHEN {scalar_column_sql("key")} = 'reward_mean' THEN value END FROM ({scalars}))
           GROUP BY run, rank) s
       ON s.run = r.run AND s.rank = r.rank
LEFT JOIN (SELECT run, count(*) AS n_events FROM ({events}) GROUP BY run) e ON e.run = r.run
ORDER BY r.started_at, r.run"""


def runs_summary(store: Store) -> pd.DataFrame:
    """``collapsewatch runs``: each run's row with its step count, last step and reward (lowest rank) and its
    number of detector episodes (the ``events`` view: one row per episode, as on the dashboard)."""
    return store.query(_summary_sql("SELECT * FROM runs", "SELECT * FROM step_metrics", "SELECT * FROM scalars",
                                    "SELECT * FROM events"))


def run_summary(store: Store, run: str) -> dict[str, Any] | None:
    """``runs_summary``'s row of one run, reading that run's folder alone; None when it has no run row."""
    df = store.query(lambda: _summary_sql(runs_sql(store.run_view("run_ranks", run)), store.run_view("step_metrics", run),
                                          store.run_view("scalars", run), store.run_view("events", run)))
    return df.iloc[0].to_dict() if len(df) else None
