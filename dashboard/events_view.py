"""The events table at the top of the run overview — the run's collapse story, one row per detector episode in
the order they began (pure: an events DataFrame in, JSON-ready rows out; the page renders them).

Each row links to its steps on the charts (``?from=&to=&episode=k``: the panels zoom there and show that episode's
band) and to the worst sequence of its last step on the Tokens page, ranked by what the detector watches.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd

from collapsewatch.alerts import event_message
from collapsewatch.trust import trust_line

from .timeline import ordered, row_label
from .token_view import DETECTOR_RANKING

SEVERITY_ORDER = ("critical", "warning", "info")
"""Worst first: the order severities are counted and shown in."""
CONTEXT_STEPS = 10
"""Steps shown either side of an episode when its row zooms the charts to it."""


def chart_href(run: str, start: int, end: int, episode: int, smooth: int | None = None) -> str:
    lo, hi = max(0, start - CONTEXT_STEPS), end + CONTEXT_STEPS
    query = {"from": lo, "to": hi, "episode": episode} | ({"smooth": smooth} if smooth is not None else {})
    return f"/run/{run}?{urlencode(query)}"


def tokens_href(run: str, step: int, detector: str) -> str:
    return f"/tokens/{run}?{urlencode({'step': step, 'rank': DETECTOR_RANKING.get(detector, 'ratio')})}"


def event_rows(events: pd.DataFrame, run: str, smooth: int | None = None) -> list[dict[str, Any]]:
    """Per episode: ``steps`` ('40–71' or '40'), ``what`` (detector · phase), ``severity``, ``sentence``,
    ``trust`` (the benchmark's line for its detector · phase and severity), ``chart`` and ``tokens`` links,
    ``episode`` (its id: position in story order)."""
    rows = []
    for k, ev in enumerate(ordered(events).to_dict("records")):
        start, end = int(ev["step_start"]), int(ev["step_end"])
        rows.append({"episode": k, "steps": f"{start}–{end}" if end > start else str(start),
                     "what": row_label(ev["detector"], ev["phase"]), "detector": ev["detector"],
                     "severity": ev["severity"], "sentence": event_message(ev),
                     "trust": trust_line(ev["detector"], ev["phase"], ev["severity"]),
                     "chart": chart_href(run, start, end, k, smooth), "tokens": tokens_href(run, end, ev["detector"])})
    return rows


def severity_counts(events: pd.DataFrame) -> dict[str, int]:
    """Episodes per severity, worst first (every severity present, 0 when none)."""
    counts = events["severity"].value_counts() if not events.empty else pd.Series(dtype=int)
    return {s: int(counts.get(s, 0)) for s in SEVERITY_ORDER}


def first_critical_step(events: pd.DataFrame) -> int | None:
    """Where the run's first critical episode began (None if none ever was critical). Not the reward collapse,
    whose one rule is :func:`collapsewatch.reward.reward_collapse`."""
    critical = events[events["severity"] == "critical"] if not events.empty else events
    return int(critical["step_start"].min()) if len(critical) else None


def first_event_step(events: pd.DataFrame) -> int | None:
    return int(events["step_start"].min()) if not events.empty else None


def run_event_summary(events: pd.DataFrame) -> dict[str, Any]:
    """Runs table: ``worst_severity`` ever, ``n_<severity>`` episode counts, ``first_critical_step``."""
    counts = severity_counts(events)
    return {"worst_severity": worst_severity(events), "first_critical_step": first_critical_step(events),
            **{f"n_{s}": n for s, n in counts.items()}}


def worst_severity(events: pd.DataFrame) -> str | None:
    """The worst severity any episode of the run ever had (None without episodes)."""
    counts = severity_counts(events)
    return next((s for s in SEVERITY_ORDER if counts[s]), None)
