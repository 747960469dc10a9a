"""Run overview figure: a timeline of detector phases over a grid of step-series panels sharing one
step axis, with every phase drawn as a shaded band across the panels. Pure: DataFrames in, figures out.

The trace layout depends only on ``PANELS`` (never on the data), so a live view can extend trace *i*
with new steps and replace the decorations (bands, timeline, panel notes) without rebuilding the figure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from . import theme
from .series import GL_THRESHOLD, downsample, finite_xy, smoothed_tail, trailing_mean


@dataclass(frozen=True)
class Series:
    column: str
    label: str
    role: str = "line"      # line | lower | upper (a p05–p95 band: lower edge, then upper edge filled to it)
    dash: str = "solid"
    right: bool = False     # drawn against the panel's right-hand y axis


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    series: tuple[Series, ...]
    ratio_metric: bool = False  # needs π_θ ≠ π_old: "not applicable" on an on-policy run
    log_y: bool = False
    ref_y: float | None = None
    right_format: str = ""     # tick format of the right-hand axis ("" = no right axis)
    right_range: tuple[float, float] | None = None  # fixed range of the right axis (shares: 0…1)


def _fan(sign: str) -> tuple[Series, ...]:
    return (Series(f"ratio_p05_{sign}", "p05", "lower"), Series(f"ratio_p95_{sign}", "p05–p95", "upper"),
            Series(f"ratio_p50_{sign}", "median"))


PANELS: tuple[Panel, ...] = (
    Panel("reward", "reward", (Series("reward_mean", "mean"), Series("correct_frac", "correct", dash="dot"),
                               Series("zero_std_group_frac", "zero-std groups", dash="dash"))),
    Panel("entropy", "entropy (nats)", (Series("entropy_p05", "p05", "lower"),
                                        Series("entropy_p95", "p05–p95", "upper"),
                                        Series("entropy_mean", "mean"))),
    Panel("ratio_pos", "ratio r, A>0 tokens", _fan("pos"), ratio_metric=True, log_y=True, ref_y=1.0),
    Panel("ratio_neg", "ratio r, A<0 tokens", _fan("neg"), ratio_metric=True, log_y=True, ref_y=1.0),
    Panel("clip", "clip & low-ratio fractions", (
        Series("clip_low_frac", "clip low (A<0)"), Series("clip_high_frac", "clip high (A>0)"),
        Series("clip_low_frac_pos", "A>0 r<1−ε (unclipped)", dash="dot"),
        Series("ratio_lt_0_1_frac_pos", "A>0 r<0.1", dash="dash")), ratio_metric=True),
    Panel("likelihood", "logp_old mean (likelihood under π_old)", (
        Series("logp_old_mean_correct", "correct"), Series("logp_old_mean_incorrect", "incorrect"))),
    Panel("displacement", "displacement mean (logp − logp_old)", (
        Series("displacement_mean_correct", "correct"), Series("displacement_mean_incorrect", "incorrect")),
          ratio_metric=True, ref_y=0.0),
    Panel("grad", "grad norm (pre-clip)", (Series("grad_norm", "grad norm"),), log_y=True),
    Panel("length", "response length", (Series("response_length_mean", "mean tokens"),
                                        Series("truncated_frac", "truncated", dash="dot", right=True)),
          right_format=".0%", right_range=(0.0, 1.02)),
    Panel("mismatch", "train–inference mismatch", (Series("is_log_ratio_abs_mean", "|is_log_ratio| mean"),
                                                   Series("is_ess", "IS ESS", dash="dot", right=True)),
          right_format=".1f", right_range=(0.0, 1.02)),  # ESS / n ∈ (0, 1]: a healthy run sits on 1
)

COLUMNS: tuple[str, ...] = tuple(s.column for p in PANELS for s in p.series) + ("on_policy",)
TRACE_COLUMNS: tuple[str | None, ...] = (None, *(s.column for p in PANELS for s in p.series))
"""Column drawn by each trace index; trace 0 is the phase timeline."""

N_COLS = 2
LOG_TICKS = (1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
TIMELINE_PX, PANEL_PX, GAP_PX = 118, 158, 34
NOT_APPLICABLE = "on-policy: ratio metrics not applicable"


def _grid() -> dict[str, Any]:
    """Axis ids and paper domains: timeline on top, panels in N_COLS columns below (pixels → fractions)."""
    n_rows = -(-len(PANELS) // N_COLS)
    height = TIMELINE_PX + GAP_PX + n_rows * PANEL_PX + (n_rows - 1) * GAP_PX
    frac = 1.0 / height
    top_of_grid = 1 - (TIMELINE_PX + GAP_PX) * frac
    cells = []
    for i in range(len(PANELS)):
        row, col = divmod(i, N_COLS)
        y1 = top_of_grid - row * (PANEL_PX + GAP_PX) * frac
        x0 = col / N_COLS + (0.03 if col else 0.0)
        x1 = (col + 1) / N_COLS - (0.0 if col else 0.03)
        cells.append({"x": f"x{i + 2}", "y": f"y{i + 2}", "xd": [x0, x1], "yd": [y1 - PANEL_PX * frac, y1],
                      "bottom": row == n_rows - 1 or i + N_COLS >= len(PANELS)})
    return {"height": height + 56, "cells": cells, "timeline_y": [1 - TIMELINE_PX * frac, 1.0],
            "grid_top": top_of_grid, "right_axis": {p.key: f"y{len(PANELS) + 2 + j}" for j, p in
                                                    enumerate(q for q in PANELS if q.right_format)}}


GRID = _grid()


def _layout() -> dict[str, Any]:
    lay = theme.base_layout(GRID["height"], showlegend=False, hovermode="x unified", bargap=0.25,
                            margin=dict(l=56, r=48, t=10, b=30))
    # a plain-dict figure goes to plotly.js as is, and plotly.js knows no template names: every colour is
    # set explicitly instead
    lay.pop("template")
    lay["xaxis"] = theme.axis(domain=[0, 1], anchor="y", title=None, showticklabels=True)
    lay["yaxis"] = theme.axis(domain=GRID["timeline_y"], anchor="x", autorange="reversed", showspikes=False,
                              tickfont=dict(size=10, color=theme.TEXT), automargin=True, type="category")
    for panel, cell in zip(PANELS, GRID["cells"], strict=True):
        xa, ya = "xaxis" + cell["x"][1:], "yaxis" + cell["y"][1:]
        lay[xa] = theme.axis(domain=cell["xd"], anchor=cell["y"], matches="x", showticklabels=cell["bottom"])
        log = dict(type="log", tickvals=LOG_TICKS, ticktext=[f"{v:g}" for v in LOG_TICKS]) if panel.log_y else {}
        lay[ya] = theme.axis(domain=cell["yd"], anchor=cell["x"], nticks=5, **log)
        if panel.key in GRID["right_axis"]:
            ra = "yaxis" + GRID["right_axis"][panel.key][1:]
            fixed = (dict(range=list(panel.right_range), autorange=False, tickvals=[0.0, 0.5, 1.0])
                     if panel.right_range else {})
            lay[ra] = theme.axis(overlaying=cell["y"], side="right", anchor=cell["x"], showgrid=False, nticks=4,
                                 tickformat=panel.right_format, **fixed)
    return lay


def _trace(panel: Panel, s: Series, cell: dict[str, Any], x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    colour = theme.metric_colour(s.column)
    # plain lists, not typed arrays: a live view extends these arrays in the browser with a Patch
    t: dict[str, Any] = dict(type="scattergl" if len(x) > GL_THRESHOLD else "scatter", x=x.tolist(), y=y.tolist(),
                             name=s.label, xaxis=cell["x"], mode="lines",
                             yaxis=GRID["right_axis"][panel.key] if s.right else cell["y"])
    if s.role == "lower":
        return dict(t, line=dict(width=0, color=colour), hoverinfo="skip")
    if s.role == "upper":
        return dict(t, line=dict(width=0, color=colour), fill="tonexty", fillcolor=theme.rgba(colour, 0.22),
                    hoverinfo="skip")
    return dict(t, line=dict(width=1.6, color=colour, dash=s.dash),
                hovertemplate=f"{s.label}: %{{y:.4g}}<extra></extra>")


def _title(panel: Panel) -> str:
    keys = []
    for s in panel.series:
        if s.role == "lower":
            continue
        mark = "▮" if s.role == "upper" else {"solid": "━", "dot": "┈", "dash": "╌"}[s.dash]
        keys.append(f"<span style='color:{theme.metric_colour(s.column)}'>{mark} {s.label}</span>")
    return f"<b>{panel.title}</b>   " + "  ".join(keys)


def decorations(events: pd.DataFrame, summary: dict[str, Any]) -> dict[str, Any]:
    """Everything of the overview that depends on the events and on the run summary: the timeline trace,
    the phase bands (shapes), and the panel titles and notes (annotations)."""
    shapes = [_ref_line(p, c) for p, c in zip(PANELS, GRID["cells"], strict=True) if p.ref_y is not None]
    for ev in events.itertuples():
        colour = theme.detector_colour(ev.detector)
        opacity = theme.SEVERITY_OPACITY.get(ev.severity, 0.1)
        for col in range(N_COLS):
            shapes.append(dict(type="rect", xref=GRID["cells"][col]["x"], yref="paper", x0=ev.step_start - 0.5,
                               x1=ev.step_end + 0.5, y0=0, y1=GRID["grid_top"], fillcolor=colour,
                               opacity=opacity, line=dict(width=0), layer="below",
                               name=f"phase:{ev.detector}:{ev.phase}"))
    notes = []
    for panel, cell in zip(PANELS, GRID["cells"], strict=True):
        notes.append(dict(text=_title(panel), xref="paper", yref="paper", x=cell["xd"][0], y=cell["yd"][1],
                          xanchor="left", yanchor="bottom", showarrow=False, font=dict(size=11)))
        note = _panel_note(panel, summary)
        if note:
            notes.append(dict(text=note, xref=f"{cell['x']} domain", yref=f"{cell['y']} domain", x=0.5, y=0.5,
                              showarrow=False, font=dict(size=12, color=theme.MUTED)))
    if events.empty:
        notes.append(dict(text="no detector phases flagged", xref="x domain", yref="y domain", x=0.5, y=0.5,
                          showarrow=False, font=dict(size=12, color=theme.MUTED)))
    return {"timeline": timeline_trace(events), "shapes": shapes, "annotations": notes}


def _ref_line(panel: Panel, cell: dict[str, Any]) -> dict[str, Any]:
    return dict(type="line", xref=f"{cell['x']} domain", yref=cell["y"], x0=0, x1=1, y0=panel.ref_y,
                y1=panel.ref_y, line=dict(color=theme.MUTED, width=1, dash="dot"), layer="below")


def _panel_note(panel: Panel, summary: dict[str, Any]) -> str | None:
    if summary["rows"] == 0:
        return "waiting for the first step"
    if panel.ratio_metric and summary["on_policy"]:
        return NOT_APPLICABLE
    if not any(s.column in summary["present"] for s in panel.series):
        return "not recorded for this run"
    return None


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


def timeline_trace(events: pd.DataFrame) -> dict[str, Any]:
    """One horizontal bar per phase episode (row = detector · phase), hover = message and evidence."""
    ev = events.reset_index(drop=True)
    labels = [f"{d} · {p}" for d, p in zip(ev["detector"], ev["phase"], strict=True)] if len(ev) else []
    colours = [theme.rgba(theme.detector_colour(d), 0.5 + 2 * theme.SEVERITY_OPACITY.get(s, 0.1))
               for d, s in zip(ev.get("detector", []), ev.get("severity", []), strict=True)]
    # plotly reads hover text as HTML: a message like "r<0.1" must not open a tag
    hover = [f"<b>{lab}</b> · {r.severity}<br>steps {r.step_start}–{r.step_end}<br>{escape(str(r.message))}<br>"
             + "<br>".join(escape(line) for line in evidence_lines(r.evidence))
             for lab, r in zip(labels, ev.itertuples(), strict=True)]
    return dict(type="bar", orientation="h", xaxis="x", yaxis="y", name="phases", y=labels,
                base=[int(s) - 0.5 for s in ev.get("step_start", [])],
                x=[int(e) - int(s) + 1 for s, e in zip(ev.get("step_start", []), ev.get("step_end", []), strict=True)],
                marker=dict(color=colours, line=dict(width=0)), hovertext=hover, hoverinfo="text",
                hoverlabel=dict(align="left"))


def overview_figure(steps: pd.DataFrame, events: pd.DataFrame, summary: dict[str, Any],
                    smooth: int = 1) -> dict[str, Any]:
    """The whole overview: timeline (trace 0) then one trace per ``Series`` of ``PANELS``, in order; with
    ``smooth`` > 1 every series is its trailing mean over that many steps (the detectors still see raw values).

    Returned as the figure's plain dict (plotly's figure schema; ``go.Figure(fig)`` makes the object):
    building ``go.Figure`` and its ``to_plotly_json`` deep copy cost ≈ 230 ms for 26 series × 2,500 points,
    most of the page's 300 ms budget, while the dict is built and encoded in ≈ 25 ms."""
    deco = decorations(events, summary)
    traces: list[dict[str, Any]] = [deco["timeline"]]
    for panel, cell in zip(PANELS, GRID["cells"], strict=True):
        for s in panel.series:
            x, y = finite_xy(steps, s.column)
            x, y = downsample(x, trailing_mean(x, y, smooth))
            traces.append(_trace(panel, s, cell, x, y))
    layout = _layout()
    layout.update(shapes=deco["shapes"], annotations=deco["annotations"])
    return {"data": traces, "layout": layout}


def extension(rows: pd.DataFrame, after: int = -1, smooth: int = 1) -> dict[int, tuple[list[int], list[float]]]:
    """New points per trace index once the overview has drawn every step up to ``after``: {trace: (steps,
    values)}. ``rows`` is the run's history (only its tail is read); ``smooth`` as in ``overview_figure``."""
    out = {}
    for i, column in enumerate(TRACE_COLUMNS):
        if column is None:
            continue
        x, y = smoothed_tail(rows, column, after, smooth)
        if len(x):
            out[i] = (x.tolist(), y.tolist())
    return out
