"""Loading and live-updating the run overview: the first draw sends the whole (downsampled) history; each
poll sends only steps after the last one drawn, as a Patch that extends the traces in the browser.

Rows come from ``history.StepHistory``, which re-reads only the run's newest segments, so a poll costs the
same whatever the run's length. The poll state (``dcc.Store``) holds the run, its rank, the last step drawn, the run summary, a key of
the drawn events, the status and the smoothing window (a smoothed point needs the raw points before it: those
come from the cached history's tail). Decorations (bands, timeline, panel notes) are re-sent only when the
events or the summary change.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd
from dash import Patch

from collapsewatch.store import queries

from . import history, state
from .figures import COLUMNS, decorations, extension, overview_figure
from .series import merge_summaries, summarise

POLL_MS = 2000
"""How often an open overview of a running run asks for new steps."""


def events_key(events: pd.DataFrame) -> str:
    """Changes whenever an episode appears, extends, or changes severity or message."""
    cols = ["detector", "phase", "step_start", "step_end", "severity", "message"]
    text = events[cols].to_csv(index=False) if not events.empty else ""
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def load(run: str, smooth: int = 1) -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
    """(figure, poll state, run info) of a run's overview (``smooth``: trailing-mean window, 1 = raw); None when
    the run does not exist."""
    with state.borrow() as s:
        info = queries.run_info(s, run)
        if info is None:
            return None
        rows = history.step_history(s, run, info["rank"], COLUMNS).rows_for(s, info["status"] == "running")
        events = history.event_log(s, run).events(s)
    summary = summarise(rows, COLUMNS)
    fig = overview_figure(rows, events, summary, smooth)
    st = {"run": run, "rank": info["rank"], "last": int(rows["step"].max()) if len(rows) else -1,
          "summary": summary, "events": events_key(events), "status": info["status"], "smooth": smooth}
    return fig, st, info


def poll(st: dict[str, Any]) -> tuple[Patch | None, dict[str, Any], dict[str, Any] | None]:
    """(figure patch or None, new state, run info when the header should change, else None)."""
    run = st["run"]
    with state.borrow() as s:
        info = queries.run_info(s, run)
        if info is None:
            return None, st, None
        rows = history.step_history(s, run, st["rank"], COLUMNS).rows_for(s, info["status"] == "running")
        events = history.event_log(s, run).events(s)
    new = rows[rows["step"] > st["last"]] if len(rows) else rows
    summary = merge_summaries(st["summary"], summarise(new, COLUMNS))
    key = events_key(events)
    changed_deco = key != st["events"] or summary["on_policy"] != st["summary"]["on_policy"] \
        or summary["present"] != st["summary"]["present"] or (st["summary"]["rows"] == 0 and summary["rows"] > 0)
    patch = make_patch(extension(rows, st["last"], st.get("smooth", 1)),
                       decorations(events, summary) if changed_deco else None)
    new_st = dict(st, last=int(new["step"].max()) if len(new) else st["last"], summary=summary, events=key,
                  status=info["status"])
    header = info if (len(new) or info["status"] != st["status"] or changed_deco) else None
    return patch, new_st, header


def make_patch(ext: dict[int, tuple[list, list]], deco: dict[str, Any] | None) -> Patch | None:
    """A Patch that appends ``ext`` points to their traces and, if given, replaces the decorations."""
    if not ext and deco is None:
        return None
    p = Patch()
    for i, (xs, ys) in ext.items():
        p["data"][i]["x"].extend(xs)
        p["data"][i]["y"].extend(ys)
    if deco is not None:
        for k in ("y", "base", "x", "hovertext", "marker"):
            p["data"][0][k] = deco["timeline"][k]
        p["layout"]["shapes"] = deco["shapes"]
        p["layout"]["annotations"] = deco["annotations"]
    return p
