"""Loading and live-updating the run overview: the first draw sends the whole (downsampled) history; each
poll sends only steps after the last one drawn, as a Patch that extends the traces in the browser.

Rows come from ``history.StepHistory``, which re-reads only the run's newest segments, so a poll costs the
same whatever the run's length. The poll state (``dcc.Store``) holds the run, its rank, the last step drawn, the
run summary, a key of the drawn events, the status and the view (smoothing window, selected episode, token
budget; a smoothed point needs the raw points before it: those come from the cached history's tail).
Decorations (thresholds, bands, panel notes), the timeline and the events table are re-sent only when the events
or the summary change.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np
import pandas as pd
from dash import Patch

from collapsewatch.detectors.events import EPISODE_KEY
from collapsewatch.judge import judgement
from collapsewatch.reward import drill_of
from collapsewatch.store import queries

from . import history, state
from .events_view import event_rows
from .figures import COLUMNS, collapsed, decorations, extension, overview_figure
from .panels import GRID, PANELS
from .series import merge_summaries, summarise
from .timeline import timeline_figure

POLL_MS = 2000
"""How often an open overview of a running run asks for new steps."""


def events_key(events: pd.DataFrame) -> str:
    """Changes whenever an episode appears, extends, or changes severity or message."""
    cols = [*EPISODE_KEY, "step_end", "severity", "message"]
    text = events[cols].to_csv(index=False) if not events.empty else ""
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def step_range(rows: pd.DataFrame) -> list[float] | None:
    """The x range of the panels and the timeline: the run's first to last step (None before any)."""
    return [float(rows["step"].min()), float(rows["step"].max())] if len(rows) else None


def token_budget(config: dict[str, Any]) -> int | None:
    """The response-token budget from a run's config (the built-in trainer's ``max_response_tokens``)."""
    budget = config.get("max_response_tokens") if isinstance(config, dict) else None
    return int(budget) if isinstance(budget, (int, float)) and budget > 0 else None


def load(run: str, smooth: int = 1, selected: int | None = None,
         x_range: list[float] | None = None, recorded: bool = False) -> dict[str, Any] | None:
    """A run's overview: ``figure``, ``timeline`` (figure), ``events`` (table rows), ``verdict`` (``verdict_view``),
    ``state`` (of the poll) and ``info`` (run); None when the run does not exist. ``smooth``: trailing-mean window
    (1 = raw); ``selected``: the episode whose band is shown; ``x_range``: the zoom; ``recorded``: show the stored
    episodes even where today's rules differ (:mod:`collapsewatch.judge`)."""
    with state.borrow() as s:
        info = queries.run_info(s, run)
        if info is None:
            return None
        rows = history.step_history(s, run, info["rank"], COLUMNS).rows_for(s, info["status"] == "running")
        j = judgement(s, run, info, history.event_log(s, run).events(s), rows, keep=True)
    events = j.recorded if recorded else j.events
    view = {"selected": selected, "budget": token_budget(info["config"]), "smooth": smooth,
            "onset": drill_of(info["config"]), "recorded": recorded}
    ekey = events_key(events)
    key = (str(state.store_path()), run, info["rank"], len(rows), int(rows["step"].max()) if len(rows) else -1, ekey,
           repr(view), tuple(x_range) if x_range else None)
    drawn = _drawn.get(key)
    if drawn is None:  # the figures of this view of these rows and episodes: built once, then served again
        summary = summarise(rows, COLUMNS)
        full = step_range(rows)
        fig = overview_figure(rows, events, summary, smooth,
                              dict(view, x_range=x_range or full, fit_y=x_range is not None))
        drawn = (fig, timeline_figure(events, x_range or full), event_rows(events, run), summary)
        with _drawn_lock:
            _drawn[key] = drawn
            while len(_drawn) > MAX_DRAWN:
                _drawn.pop(next(iter(_drawn)))
    fig, timeline, rows_shown, summary = drawn
    floors = {p.key: fig["layout"]["yaxis" + c["y"][1:]]["tickvals"][0]
              for p, c in zip(PANELS, GRID["cells"], strict=True) if p.log_y}
    st = {"run": run, "rank": info["rank"], "last": int(rows["step"].max()) if len(rows) else -1,
          "summary": summary, "events": ekey, "status": info["status"], "smooth": smooth,
          "view": view, "zoomed": x_range is not None, "floors": floors}
    return {"figure": fig, "timeline": timeline, "events": rows_shown, "state": st, "info": info,
            "verdict": verdict_view(j)}


_drawn: dict[tuple, tuple] = {}
_drawn_lock = threading.Lock()
MAX_DRAWN = 16
"""Overview figures kept (per run, rows, episodes and view): a page reloaded with nothing new is not redrawn."""


def clear() -> None:
    with _drawn_lock:
        _drawn.clear()


history.on_clear(clear)


def for_the_wire(fig: dict[str, Any]) -> dict[str, Any]:
    """The figure with each trace's numeric x / y lists as numpy arrays: Dash's encoder (plotly's, with orjson)
    walks a Python list element by element in Python but hands a numeric array to orjson whole — 2,500 points ×
    26 series went from ≈ 450 ms to a few ms on the bench store. The browser receives the same JSON arrays (a live
    Patch still extends them); the figure builders keep plain lists."""
    data = []
    for t in fig["data"]:
        t = dict(t)
        for k in ("x", "y"):
            v = t.get(k)
            if isinstance(v, list) and v and all(isinstance(e, (int, float)) for e in v[:1]):
                arr = np.asarray(v)
                if arr.dtype.kind in "iuf":
                    t[k] = arr
        data.append(t)
    return {**fig, "data": data}


def verdict_view(j: Any) -> dict[str, Any]:
    """What the page shows of a judgement (JSON-ready, as Dash sends it): the verdict's fields and the rules note."""
    return {**j.verdict.as_dict(), "shown": j.verdict.shown, "note": j.note, "computed": j.computed}


def history_rows(run: str) -> pd.DataFrame:
    """Every step row of the run's overview series (raw values; the lowest rank), for the CSV download."""
    with state.borrow() as s:
        info = queries.run_info(s, run)
        if info is None:
            return pd.DataFrame(columns=["step", *COLUMNS])
        rows = history.step_history(s, run, info["rank"], COLUMNS).rows_for(s, info["status"] == "running")
    return rows.drop(columns=["has_metrics"], errors="ignore")


def poll(st: dict[str, Any]) -> dict[str, Any]:
    """What changed since ``st``: ``patch`` (figure Patch or None), ``timeline``, ``events`` and ``verdict``
    (None when unchanged), ``state`` (new) and ``info`` (the run, when the header should change, else None)."""
    run = st["run"]
    same = {"patch": None, "timeline": None, "events": None, "state": st, "info": None, "verdict": None}
    with state.borrow() as s:
        info = queries.run_info(s, run)
        if info is None:
            return same
        rows = history.step_history(s, run, st["rank"], COLUMNS).rows_for(s, info["status"] == "running")
        j = judgement(s, run, info, history.event_log(s, run).events(s), rows, keep=True)
    events = j.recorded if (st.get("view") or {}).get("recorded") else j.events
    new = rows[rows["step"] > st["last"]] if len(rows) else rows
    summary = merge_summaries(st["summary"], summarise(new, COLUMNS))
    key = events_key(events)
    new_events = key != st["events"]
    changed_deco = new_events or summary["on_policy"] != st["summary"]["on_policy"] \
        or summary["present"] != st["summary"]["present"] or (st["summary"]["rows"] == 0 and summary["rows"] > 0)
    view = st.get("view") or {"smooth": st.get("smooth", 1)}
    if collapsed(st["summary"]) != collapsed(summary) \
            or summary.get("same") != st["summary"].get("same"):  # a panel or a series shown / hidden: redraw
        patch: Any = for_the_wire(overview_figure(rows, events, summary, view.get("smooth", 1), view))
    else:
        patch = make_patch(extension(rows, st["last"], view.get("smooth", 1), summary, st.get("floors")),
                           decorations(events, summary, view) if changed_deco else None,
                           None if st.get("zoomed") or not len(new) else step_range(rows))
    new_st = dict(st, last=int(new["step"].max()) if len(new) else st["last"], summary=summary, events=key,
                  status=info["status"])
    header = info if (len(new) or info["status"] != st["status"] or changed_deco) else None
    grew = len(new) and not st.get("zoomed")
    return {"patch": patch, "state": new_st, "info": header,
            "timeline": timeline_figure(events, step_range(rows)) if new_events or grew else None,
            "events": event_rows(events, run) if new_events else None,
            "verdict": verdict_view(j) if new_events or len(new) else None}


def make_patch(ext: dict[int, tuple[list, list]], deco: dict[str, Any] | None,
               x_range: list[float] | None = None) -> Patch | None:
    """A Patch that appends ``ext`` points to their traces and, if given, replaces the decorations and the
    x range."""
    if not ext and deco is None and x_range is None:
        return None
    p = Patch()
    for i, (xs, ys) in ext.items():
        p["data"][i]["x"].extend(xs)
        p["data"][i]["y"].extend(ys)
    if deco is not None:
        p["layout"]["shapes"] = deco["shapes"]
        p["layout"]["annotations"] = deco["annotations"]
    if x_range is not None:
        p["layout"]["xaxis"]["range"] = x_range
    return p
