"""Detector episodes on the run overview, pure (DataFrames in, plain plotly dicts out):

* the phase timeline — its own figure, one row per detector · phase, drawn once, above the first panel column on
  exactly that column's x domain and margins, so a step sits at the same pixel in the timeline and in the panels
  below it; hover is per bar ("closest"), never the panels' "x unified";
* the band of one episode (the selected or hovered one) across the panel grid — all bands exist, hidden, so the
  browser can show one without asking the server;
* the LLD death spiral (stagnation → decay → collapse) as numbered stages on the panel of L;
* each episode's threshold on the panel of the metric it watches (from the event row: ``metric``, ``threshold``).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from collapsewatch.detectors.lld import PHASES as LLD_PHASES
from collapsewatch.verdict import reader_order

from . import theme
from .panels import GRID, MARGIN, N_COLS, PANELS

ROW_PX = 17
TIMELINE_COLS = 1
"""Panel columns the timeline is drawn above: one timeline (over the first column, on its x domain); the second
column's panels share its step axis."""
LLD_STAGES = {p: (i + 1, p.split("_")[-1]) for i, p in enumerate(LLD_PHASES)}
"""LLD phase → (stage number, short name): early_stagnation → (1, 'stagnation') …"""
TREND_DETECTORS = frozenset({"lld"})
"""Detectors whose event ``value``/``threshold`` are a change over the window, not a level of ``metric``: no
threshold line (LLD: slope × window of L; its phases are drawn as the spiral on the panel of L instead)."""


def row_label(detector: str, phase: str) -> str:
    return detector if phase == detector else f"{detector} · {phase}"


def ordered(events: pd.DataFrame) -> pd.DataFrame:
    """Episodes in reader order (:func:`collapsewatch.verdict.reader_order`: grouped by detector · phase, the cause
    first) with a fresh index: position k is the episode's id in band names (``band:k``), the timeline's
    customdata, the events table's rows and the ``?episode=k`` of links."""
    return reader_order(events)


def evidence_lines(evidence: str | None, limit: int = 12) -> list[str]:
    """The evidence JSON of an event as ``key: value`` lines (nested keys dotted), at most ``limit``."""
    if not isinstance(evidence, str) or not evidence:
        return []
    try:
        data = json.loads(evidence)
    except ValueError:
        return [str(evidence)[:200]]
    lines: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, float):
            lines.append(f"{prefix}: {value:.4g}")
        elif isinstance(value, list) and len(value) > 6:
            lines.append(f"{prefix}: [{', '.join(_short(v) for v in value[:6])}, … {len(value)} values]")
        else:
            lines.append(f"{prefix}: {value if not isinstance(value, list) else [_short(v) for v in value]}")

    walk("", data)
    return lines[:limit] + ([f"… {len(lines) - limit} more"] if len(lines) > limit else [])


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def episodes(events: pd.DataFrame) -> list[dict[str, Any]]:
    """``ordered(events)`` as records (iterating dicts is far cheaper than DataFrame rows)."""
    return ordered(events).to_dict("records")


def hover_text(ev: dict[str, Any]) -> str:
    # plotly reads hover text as HTML: a message like "r<0.1" must not open a tag
    lines = "<br>".join(escape(line) for line in evidence_lines(ev["evidence"]))
    return (f"<b>{escape(row_label(ev['detector'], ev['phase']))}</b> · {ev['severity']}<br>steps "
            f"{ev['step_start']}–{ev['step_end']}<br>{escape(str(ev['message']))}" + (f"<br>{lines}" if lines else ""))


def timeline_figure(events: pd.DataFrame, x_range: list[float] | None = None) -> dict[str, Any]:
    """One bar per episode (row = detector · phase), above the first panel column on its x domain; the bar's
    ``customdata`` is the episode id. ``x_range``: the panels' step range (both figures get the same one)."""
    ev = episodes(events)
    rows = list(dict.fromkeys(row_label(e["detector"], e["phase"]) for e in ev))
    height = 30 + ROW_PX * max(1, len(rows))
    layout = theme.base_layout(height, showlegend=False, hovermode="closest", margin=dict(MARGIN, t=4, b=22),
                               bargap=0.3)
    layout.pop("template")  # a plain-dict figure: plotly.js knows no template names
    traces = []
    for col in range(TIMELINE_COLS):
        sx = "" if col == 0 else str(col + 1)
        layout[f"xaxis{sx}"] = theme.axis(domain=GRID["cells"][col]["xd"], anchor=f"y{sx}", fixedrange=True,
                                          showspikes=False, **({"range": x_range} if x_range else {}))
        layout[f"yaxis{sx}"] = theme.axis(type="category", categoryorder="array", categoryarray=rows,
                                          autorange="reversed", fixedrange=True, showspikes=False,
                                          showticklabels=col == 0, tickfont=dict(size=10, color=theme.TEXT),
                                          **({"matches": "y"} if col else {}))
        traces.append(_bars(ev, f"x{sx}", f"y{sx}"))
    if not ev:
        layout["annotations"] = [dict(text="no detector phases flagged", xref="paper", yref="paper", x=0.5, y=0.5,
                                      showarrow=False, font=dict(size=12, color=theme.MUTED))]
    return {"data": traces, "layout": layout}


def _bars(ev: list[dict[str, Any]], xaxis: str, yaxis: str) -> dict[str, Any]:
    colours = [theme.rgba(theme.detector_colour(e["detector"]), 0.5 + 2 * theme.SEVERITY_OPACITY.get(e["severity"], 0.1))
               for e in ev]
    return dict(type="bar", orientation="h", xaxis=xaxis, yaxis=yaxis, name="phases",
                y=[row_label(e["detector"], e["phase"]) for e in ev], base=[int(e["step_start"]) - 0.5 for e in ev],
                x=[int(e["step_end"]) - int(e["step_start"]) + 1 for e in ev],
                customdata=list(range(len(ev))), marker=dict(color=colours, line=dict(width=0)),
                hovertext=[hover_text(e) for e in ev], hoverinfo="text", hoverlabel=dict(align="left"))


def band_shapes(events: pd.DataFrame, selected: int | None = None) -> list[dict[str, Any]]:
    """A band down the whole panel grid (each column) per episode, named ``band:k``; only ``selected`` visible."""
    shapes = []
    for k, ev in enumerate(episodes(events)):
        colour = theme.detector_colour(ev["detector"])
        for col in range(N_COLS):
            shapes.append(dict(type="rect", xref=GRID["cells"][col]["x"], yref="paper", x0=ev["step_start"] - 0.5,
                               x1=ev["step_end"] + 0.5, y0=0, y1=1, fillcolor=colour, opacity=0.16, layer="below",
                               line=dict(width=1, color=theme.rgba(colour, 0.7)), name=f"band:{k}",
                               visible=k == selected))
    return shapes


def _panel_of(column: str) -> tuple[int, bool] | None:
    """(panel index, on its right axis) of the panel that draws ``column``; None if no panel does."""
    for i, panel in enumerate(PANELS):
        for s in panel.series:
            if s.column == column:
                return i, s.right
    return None


def lld_spiral(events: pd.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(shapes, annotations): each LLD episode shaded on the panel of L, darker at each stage, labelled
    ① stagnation / ② decay / ③ collapse at its start."""
    where = _panel_of("logp_old_mean_correct")
    if where is None or events.empty:
        return [], []
    cell = GRID["cells"][where[0]]
    shapes, notes = [], []
    for ev in episodes(events):
        if ev["detector"] != "lld" or ev["phase"] not in LLD_STAGES:
            continue
        stage, name = LLD_STAGES[ev["phase"]]
        colour = theme.detector_colour("lld")
        shapes.append(dict(type="rect", xref=cell["x"], yref=f"{cell['y']} domain", x0=ev["step_start"] - 0.5,
                           x1=ev["step_end"] + 0.5, y0=0, y1=1, fillcolor=colour, opacity=0.08 + 0.08 * stage,
                           line=dict(width=0), layer="below", name=f"lld:{ev['phase']}"))
        notes.append(dict(text=f"{'①②③'[stage - 1]} {name}", xref=cell["x"], yref=f"{cell['y']} domain",
                          x=ev["step_start"] - 0.5, y=1, xanchor="left", yanchor="top", showarrow=False,
                          font=dict(size=10, color=colour)))
    return shapes, notes


def threshold_shapes(events: pd.DataFrame) -> list[dict[str, Any]]:
    """Each episode's threshold as a dashed segment over its steps on the panel (and axis) of its metric, the first
    of each detector and metric labelled."""
    shapes, labelled = [], set()
    for ev in ordered(events).itertuples():
        where = _panel_of(str(ev.metric))
        if where is None or ev.detector in TREND_DETECTORS or ev.threshold is None \
                or not np.isfinite(float(ev.threshold)):
            continue
        i, right = where
        cell = GRID["cells"][i]
        yref = GRID["right_axis"][PANELS[i].key] if right else cell["y"]
        text = f"{ev.detector} {float(ev.threshold):.3g}" if (ev.detector, ev.metric) not in labelled else ""
        labelled.add((ev.detector, ev.metric))  # one label per detector and metric: the first episode's
        shapes.append(dict(type="line", xref=cell["x"], yref=yref, x0=ev.step_start - 0.5, x1=ev.step_end + 0.5,
                           y0=float(ev.threshold), y1=float(ev.threshold), name=f"threshold:{ev.detector}:{ev.metric}",
                           line=dict(color=theme.detector_colour(ev.detector), width=1.5, dash="dash"),
                           label=dict(text=text, textposition="start",
                                      font=dict(size=9, color=theme.detector_colour(ev.detector)))))
    return shapes
