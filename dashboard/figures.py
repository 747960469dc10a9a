"""Run overview figure: a grid of step-series panels sharing one step axis (the panels and their grid are in
``panels``; the phase timeline, episode bands, LLD spiral and thresholds in ``timeline``). Pure: DataFrames in,
figures out.

Smoothed by default: each line is its trailing mean, drawn over a faint copy of its raw values, so smoothing
never hides a spike. The trace layout depends only on ``PANELS`` (never on the data or the smoothing), so a live
view can extend trace *i* with new steps and replace the decorations without rebuilding the figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collapsewatch.detectors.likelihood import POOLED_COLUMNS, pooled_columns
from collapsewatch.detectors.signals import binomial_noises

from . import theme
from .panels import GRID, MARGIN, PANELS, X_TITLE, X_TITLE_PX, Panel, Series, grid_for, log_ticks
from .series import GL_THRESHOLD, SAME_AS, downsample, finite_xy, smoothed_tail, trailing_mean
from .timeline import band_shapes, lld_spiral, threshold_shapes

DEFAULT_SMOOTH = 16
"""Trailing-mean window (steps) of the overview and compare pages unless the URL says otherwise."""
RAW_PREFIX = "raw:"
DERIVED_INPUTS = ("logp_old_token_mean_correct", "model_tokens_correct", "eval_size")
"""Step columns the derived series (:data:`DERIVED`, computed here, not stored) are made from."""
EVAL_BAND = ("eval_lo", "eval_hi")
"""The evaluation score ± 1.96 × the sampling noise of a share on its set (``signals.binomial_noises``), where the
log says the set's size (``eval_size``): a dip inside the band is what that many questions give by chance."""
DERIVED = (*POOLED_COLUMNS, *EVAL_BAND)
COLUMNS: tuple[str, ...] = tuple(s.column for p in PANELS for s in p.series if s.column not in DERIVED) + \
    ("on_policy", *DERIVED_INPUTS)
TRACE_COLUMNS: tuple[str, ...] = tuple(k for p in PANELS for s in p.series
                                       for k in ((RAW_PREFIX + s.column, s.column) if s.role == "line" else
                                                 (s.column,)))
MARKS_PREFIX = "marks:"
TRACE_COLUMNS += tuple(MARKS_PREFIX + p.key for p in PANELS if p.log_y)
"""What each trace index draws: a column (smoothed), ``raw:column`` (its faint raw copy under a line), or
``marks:panel`` (markers along a log panel's bottom: exact zeros, which a log axis cannot draw, and on-policy
steps, where ratio metrics are NULL — so neither is an unexplained gap)."""
NOT_APPLICABLE = "on-policy: ratio metrics not applicable"
NO_MISMATCH = "no train–inference mismatch: no rollout log-probs, or identical engines"
MISMATCH_NOISE = 1e-4
"""|is_log_ratio| mean (nats) below which the mismatch panel says there is none instead of plotting float noise."""


def _layout(ticks: dict[str, list[float]] | None = None, grid: dict[str, Any] = GRID) -> dict[str, Any]:
    """Axes of the panel ``grid``; ``ticks``: tick values of each log panel (by key), covering its data."""
    lay = theme.base_layout(grid["height"], showlegend=False, hovermode="x unified",
                            margin=dict(MARGIN, t=10, b=30 + X_TITLE_PX))
    # a plain-dict figure goes to plotly.js as is, and plotly.js knows no template names: every colour is
    # set explicitly instead
    lay.pop("template")
    for panel, cell in zip(PANELS, grid["cells"], strict=True):
        xa, ya = "xaxis" + cell["x"][1:], "yaxis" + cell["y"][1:]
        lay[xa] = theme.axis(**{**dict(domain=cell["xd"], anchor=cell["y"], showticklabels=cell["bottom"]),
                                **({"title": theme.axis_title(X_TITLE)} if cell["bottom"] else {}),
                                **({"matches": "x"} if cell["x"] != "x" else {}), **_gone(cell)})
        extra: dict[str, Any] = {"rangemode": "nonnegative"} if panel.nonnegative else {}
        if panel.log_y:
            vals = (ticks or {}).get(panel.key) or log_ticks(0.1, 10)
            extra = dict(type="log", tickvals=vals, ticktext=[f"{v:g}" for v in vals])
        lay[ya] = theme.axis(**{**dict(domain=cell["yd"], anchor=cell["x"], nticks=5,
                                       title=theme.axis_title(panel.y_title)), **extra, **_gone(cell)})
        if panel.key in grid["right_axis"]:
            ra = "yaxis" + grid["right_axis"][panel.key][1:]
            fixed = (dict(range=list(panel.right_range), autorange=False, tickvals=[0.0, 0.5, 1.0])
                     if panel.right_range else {})
            lay[ra] = theme.axis(**{**dict(overlaying=cell["y"], side="right", anchor=cell["x"], showgrid=False,
                                           nticks=4, tickformat=panel.right_format,
                                           title=theme.axis_title(panel.right_title)), **fixed, **_gone(cell)})
    return lay


def _gone(cell: dict[str, Any]) -> dict[str, Any]:
    """Axis settings of a collapsed panel: not drawn (it keeps its id, so traces and patches keep their address)."""
    return {"visible": False, "showgrid": False, "zeroline": False} if cell.get("hidden") else {}


FLAT_RATIO = 0.1
"""A ratio panel whose p05, median and p95 stay within 1 ± this on every step is collapsed: nothing an ISDD rule
looks at happens there (its median bar is 0.9, its tail bar 0.1), and a healthy run's mini-batches barely move
the policy."""
NOT_RECORDED = "not recorded for this run"


def collapsed(summary: dict[str, Any] | None) -> dict[str, str]:
    """Panels collapsed to a line under the grid (key → why): nothing recorded, not applicable (on-policy ratio
    panels), no train–inference mismatch, or ratios flat at 1."""
    if not summary or summary["rows"] == 0:
        return {}
    out = {}
    for panel in PANELS:
        note = _panel_note(panel, summary)
        sign = panel.key.removeprefix("ratio_") if panel.key in ("ratio_pos", "ratio_neg") else None
        dev = (summary.get("ratio_dev") or {}).get(sign) if sign else None
        if note in (NOT_APPLICABLE, NO_MISMATCH, NOT_RECORDED):
            out[panel.key] = note
        elif dev is not None and dev <= FLAT_RATIO:
            out[panel.key] = f"flat at 1 (p05–p95 within ±{FLAT_RATIO:.0%} on every step)"
    return out


def _on_hidden(item: dict[str, Any], ids: set[str]) -> bool:
    return str(item.get("yref", "")).split(" ")[0] in ids


def _trace(panel: Panel, s: Series, cell: dict[str, Any], x: np.ndarray, y: np.ndarray,
           raw: bool = False) -> dict[str, Any]:
    colour = theme.metric_colour(s.column)
    # plain lists, not typed arrays: a live view extends these arrays in the browser with a Patch
    t: dict[str, Any] = dict(type="scattergl" if len(x) > GL_THRESHOLD else "scatter", x=x.tolist(), y=y.tolist(),
                             name=s.label, xaxis=cell["x"], mode="lines",
                             yaxis=GRID["right_axis"][panel.key] if s.right else cell["y"])
    if raw:
        return dict(t, name=f"{s.label} (raw)", line=dict(width=1, color=colour, dash=s.dash), opacity=0.28,
                    hoverinfo="skip")
    if s.role == "lower":
        return dict(t, line=dict(width=0, color=colour), hoverinfo="skip")
    if s.role == "upper":
        return dict(t, line=dict(width=0, color=colour), fill="tonexty", fillcolor=theme.rgba(colour, 0.22),
                    hoverinfo="skip")
    return dict(t, line=dict(width=1.6, color=colour, dash=s.dash),
                hovertemplate=f"{s.label}: %{{y:.4g}}<extra></extra>")


MARKS_KEY = {True: "× on-policy step or exactly 0", False: "× exactly 0 (a log axis cannot draw it)"}


def _same(summary: dict[str, Any] | None) -> set[str]:
    """Series not drawn because they equal another on every step (``SAME_AS``; ``summarise`` finds them)."""
    return set((summary or {}).get("same") or [])


def _title(panel: Panel, smooth: int, summary: dict[str, Any] | None = None) -> str:
    keys = []
    same = _same(summary)
    for s in panel.series:
        if s.role == "lower" or s.column in same:
            continue
        mark = "▮" if s.role == "upper" else {"solid": "━", "dot": "┈", "dash": "╌", "dashdot": "╍"}[s.dash]
        label = s.label + "".join(f" = {o.label}" for o in panel.series if SAME_AS.get(o.column) == s.column
                                  and o.column in same)
        keys.append(f"<span style='color:{theme.metric_colour(s.column)}'>{mark} {label}</span>")
    if panel.log_y:
        keys.append(f"<span style='color:{theme.MUTED}'>{MARKS_KEY[panel.ratio_metric]}</span>")
    how = f"   <span style='color:{theme.MUTED}'>{smooth}-step mean over raw, every panel</span>" if smooth > 1 else ""
    return f"<b>{panel.title}</b>   " + "  ".join(keys) + how


def decorations(events: pd.DataFrame, summary: dict[str, Any], view: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything of the overview that depends on the events, the run summary and the view (``selected``
    episode, token ``budget``, ``smooth``): shapes (reference and budget lines, thresholds, the LLD spiral,
    hidden episode bands) and annotations (panel titles and notes)."""
    view = view or {}
    gone = collapsed(summary)
    grid = grid_for(frozenset(gone))
    shapes = [_ref_line(p, c, p.ref_y) for p, c in zip(PANELS, grid["cells"], strict=True) if p.ref_y is not None]
    if view.get("budget"):
        i = [p.key for p in PANELS].index("length")
        shapes.append(dict(_ref_line(PANELS[i], grid["cells"][i], float(view["budget"])), name="budget",
                           label=dict(text=f"token budget {view['budget']}", textposition="end",
                                      font=dict(size=9, color=theme.MUTED))))
    spiral, spiral_notes = lld_spiral(events)
    shapes += spiral + threshold_shapes(events) + band_shapes(events, view.get("selected"))
    shapes += onset_lines(view.get("onset"), grid)
    hidden_ids = {c["y"] for c in grid["cells"] if c["hidden"]} | {
        grid["right_axis"][k] for k in gone if k in grid["right_axis"]}
    shapes = [x for x in shapes if not _on_hidden(x, hidden_ids)]
    spiral_notes = [x for x in spiral_notes if not _on_hidden(x, hidden_ids)]
    notes = []
    if gone:
        titles = {p.key: p.title for p in PANELS}
        notes.append(dict(text="not drawn: " + " · ".join(f"<b>{titles[k]}</b> — {why}" for k, why in gone.items()),
                          xref="paper", yref="paper", x=0, y=0, xanchor="left", yanchor="bottom", showarrow=False,
                          font=dict(size=11, color=theme.MUTED), name="collapsed"))
    first = True
    for panel, cell in zip(PANELS, grid["cells"], strict=True):
        if cell["hidden"]:
            continue
        # the smoothing is said once, on the first panel: on every title it pushed long ones into the next column
        notes.append(dict(text=_title(panel, view.get("smooth", 1) if first else 1, summary), xref="paper", yref="paper",
                          x=cell["xd"][0],
                          y=cell["yd"][1], xanchor="left", yanchor="bottom", showarrow=False, font=dict(size=11)))
        first = False
        note = _panel_note(panel, summary)
        if note:
            notes.append(dict(text=note, xref=f"{cell['x']} domain", yref=f"{cell['y']} domain", x=0.5, y=0.5,
                              showarrow=False, font=dict(size=12, color=theme.MUTED), bgcolor=theme.PANEL))
    return {"shapes": shapes, "annotations": notes + spiral_notes}


def onset_lines(drill: Any, grid: dict[str, Any] = GRID) -> list[dict[str, Any]]:
    """A drill run's onset on every panel: a vertical line, labelled ``<kind> drill from <step>`` on each."""
    kind, onset = (drill or ("", None))[:2] if isinstance(drill, (list, tuple)) else ("", None)
    if not kind or onset is None:
        return []
    # labelled at its foot on each panel (the top is the panel's title line)
    return [dict(type="line", xref=cell["x"], yref=f"{cell['y']} domain", x0=onset, x1=onset, y0=0, y1=1,
                 name="onset", line=dict(color=theme.DRILL, width=1.5, dash="dashdot"),
                 label=dict(text=f"{kind} drill from {onset}", textposition="start", textangle=0, xanchor="left",
                            yanchor="bottom", padding=4, font=dict(size=9, color=theme.DRILL)))
            for cell in grid["cells"] if not cell.get("hidden")]


def _ref_line(panel: Panel, cell: dict[str, Any], y: float) -> dict[str, Any]:
    return dict(type="line", xref=f"{cell['x']} domain", yref=cell["y"], x0=0, x1=1, y0=y, y1=y,
                line=dict(color=theme.MUTED, width=1, dash="dot"), layer="below")


def _panel_note(panel: Panel, summary: dict[str, Any]) -> str | None:
    if summary["rows"] == 0:
        return "waiting for the first step"
    if panel.ratio_metric and summary["on_policy"]:
        return NOT_APPLICABLE
    if not any(s.column in summary["present"] for s in panel.series):
        return NOT_RECORDED
    if panel.key == "mismatch" and (summary.get("mismatch_max") or 0.0) < MISMATCH_NOISE:
        return NO_MISMATCH
    return None


def panel_ticks(traces: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Tick values of each log panel, covering the positive values of every trace drawn on it."""
    out = {}
    for panel, cell in zip(PANELS, GRID["cells"], strict=True):
        if not panel.log_y:
            continue
        ys = [np.asarray(t["y"], dtype=float) for t in traces if t["yaxis"] == cell["y"]]
        y = np.concatenate(ys) if ys else np.empty(0)
        y = y[y > 0]
        out[panel.key] = log_ticks(float(y.min()), float(y.max())) if len(y) else log_ticks(0.1, 10)
    return out


def _hidden(panel: Panel, summary: dict[str, Any]) -> bool:
    """A collapsed panel (``collapsed``): its traces stay (empty), so trace indices never move."""
    return panel.key in collapsed(summary)


def overview_figure(steps: pd.DataFrame, events: pd.DataFrame, summary: dict[str, Any],
                    smooth: int = 1, view: dict[str, Any] | None = None) -> dict[str, Any]:
    """The panel grid: one trace per entry of ``TRACE_COLUMNS``, in order. With ``smooth`` > 1 every series
    is its trailing mean over that many steps over its faint raw copy (the detectors still see raw values).
    ``view``: ``selected`` episode, token ``budget``, ``x_range`` (zoom, from the URL; ``fit_y``: fit each panel's y
    axis to it), drill ``onset`` ((kind, step): a line on every panel).

    Returned as the figure's plain dict (plotly's figure schema; ``go.Figure(fig)`` makes the object):
    building ``go.Figure`` and its ``to_plotly_json`` deep copy cost ≈ 230 ms for 26 series × 2,500 points,
    most of the page's 300 ms budget, while the dict is built and encoded in ≈ 25 ms."""
    view = dict(view or {}, smooth=smooth)
    steps = derived_columns(steps)
    deco = decorations(events, summary, view)
    grid = grid_for(frozenset(collapsed(summary)))
    traces: list[dict[str, Any]] = []
    for panel, cell in zip(PANELS, grid["cells"], strict=True):
        hide = _hidden(panel, summary)
        for s in panel.series:
            x, y = finite_xy(steps, s.column)
            if hide or s.column in _same(summary):
                x, y = x[:0], y[:0]
            if s.role == "line":
                rx, ry = downsample(x, y) if smooth > 1 else (x[:0], y[:0])
                traces.append(_trace(panel, s, cell, rx, ry, raw=True))
            x, y = downsample(x, trailing_mean(x, y, smooth))
            traces.append(_trace(panel, s, cell, x, y))
    ticks = panel_ticks(traces)
    for panel, cell in zip(PANELS, grid["cells"], strict=True):
        if panel.log_y:
            m = marks(steps, panel, summary) if not cell["hidden"] else ([], [])
            traces.append(_marks_trace(cell, *m, ticks[panel.key][0]))
    layout = _layout(ticks, grid)
    layout.update(shapes=deco["shapes"], annotations=deco["annotations"])
    if view.get("x_range"):
        layout["xaxis"]["range"] = list(view["x_range"])
        if view.get("fit_y"):  # a zoom from the URL (an episode's link); a live full view keeps autorange
            fit_y(layout, traces, view["x_range"])
    return {"data": traces, "layout": layout}


def derived_columns(steps: pd.DataFrame, z: float = 1.96) -> pd.DataFrame:
    """``steps`` with the series drawn but not stored (:data:`DERIVED`): the pooled L and its band
    (``likelihood.pooled_columns``) and the evaluation's band (:data:`EVAL_BAND`: at each score, the last size logged
    at or before it, as the detector reads it; NaN before any size, and throughout where a score is outside [0, 1])."""
    out = pooled_columns(steps)
    score = pd.to_numeric(out["eval_score"], errors="coerce") if "eval_score" in out else None
    size = pd.to_numeric(out["eval_size"], errors="coerce").ffill() if "eval_size" in out else None
    if score is None or size is None or not score.dropna().between(0, 1).all():  # a share, as the detector reads it
        out["eval_lo"] = out["eval_hi"] = np.nan
        return out
    half = z * binomial_noises(score.to_numpy(dtype=float, na_value=np.nan), size.to_numpy(dtype=float, na_value=np.nan))
    out["eval_lo"], out["eval_hi"] = score - half, score + half
    return out


def fit_y(layout: dict[str, Any], traces: list[dict[str, Any]], x_range: list[float], pad: float = 0.06) -> None:
    """Each panel's left y axis fitted to the values drawn inside ``x_range`` (a zoom on an episode shows its
    rise, not the whole run's scale): [lo − pad·span, hi + pad·span]; on log axes in log10 units."""
    lo_x, hi_x = x_range
    for panel, cell in zip(PANELS, GRID["cells"], strict=True):
        ys = []
        for t in traces:
            if t["yaxis"] != cell["y"] or t.get("mode") == "markers" or not len(t["x"]):
                continue
            x, y = np.asarray(t["x"], dtype=float), np.asarray(t["y"], dtype=float)
            ys.append(y[(x >= lo_x) & (x <= hi_x) & np.isfinite(y)])
        y = np.concatenate(ys) if ys else np.empty(0)
        if panel.log_y:
            y = np.log10(y[y > 0])
        if not len(y):
            continue
        lo, hi = float(y.min()), float(y.max())
        span = hi - lo or max(abs(hi) * 0.1, 1e-3)
        layout["yaxis" + cell["y"][1:]].update(range=[lo - pad * span, hi + pad * span], autorange=False)


def marks(steps: pd.DataFrame, panel: Panel, summary: dict[str, Any]) -> tuple[list[int], list[str]]:
    """(steps, hover text) of the markers of a log panel: a step where a drawn series is exactly 0, and (ratio
    panels of a run that is not wholly on-policy) a probed on-policy step."""
    if steps.empty:
        return [], []
    found: dict[int, list[str]] = {}
    for s in panel.series:
        if s.column in steps.columns:
            y = pd.to_numeric(steps[s.column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            for step in steps["step"].to_numpy()[y == 0]:
                found.setdefault(int(step), []).append(f"{s.column} exactly 0")
    if panel.ratio_metric and not summary.get("on_policy") and "on_policy" in steps.columns:
        probed = steps["has_metrics"].astype(bool) if "has_metrics" in steps.columns else True
        for step in steps.loc[steps["on_policy"].fillna(False).astype(bool) & probed, "step"]:
            found.setdefault(int(step), []).append("on-policy step: ratio metrics NULL")
    xs = sorted(found)
    return xs, [f"step {x}: " + ", ".join(found[x]) for x in xs]


def _marks_trace(cell: dict[str, Any], x: list[int], text: list[str], floor: float) -> dict[str, Any]:
    return dict(type="scatter", mode="markers", x=x, y=[floor] * len(x), text=text, xaxis=cell["x"], yaxis=cell["y"],
                name="zeros / on-policy", marker=dict(symbol="x-thin-open", size=7, color=theme.MUTED,
                                                      line=dict(width=1.5, color=theme.MUTED)),
                hovertemplate="%{text}<extra></extra>", meta={"floor": floor})


def extension(rows: pd.DataFrame, after: int = -1, smooth: int = 1, summary: dict[str, Any] | None = None,
              floors: dict[str, float] | None = None) -> dict[int, tuple[list[int], list[float]]]:
    """New points per trace index once the overview has drawn every step up to ``after``: {trace: (steps,
    values)}. ``rows`` is the run's history (only its tail is read); ``smooth`` as in ``overview_figure``;
    ``floors``: the y of each log panel's markers (its lowest tick, as drawn)."""
    hidden = {s.column for p in PANELS if summary is not None and _hidden(p, summary) for s in p.series}
    hidden |= _same(summary)
    rows = derived_columns(rows) if len(rows) else rows
    out = {}
    for i, key in enumerate(TRACE_COLUMNS):
        if key.startswith(MARKS_PREFIX):
            panel = next(p for p in PANELS if p.key == key.removeprefix(MARKS_PREFIX))
            tail = rows[rows["step"] > after] if len(rows) else rows
            if _hidden(panel, summary or {"rows": 0}):
                continue
            x, _ = marks(tail, panel, summary or {})
            if x and floors and panel.key in floors:
                out[i] = (x, [floors[panel.key]] * len(x))
            continue
        raw = key.startswith(RAW_PREFIX)
        column = key.removeprefix(RAW_PREFIX)
        if (raw and smooth <= 1) or column in hidden:
            continue
        x, y = smoothed_tail(rows, column, after, 1 if raw else smooth)
        if len(x):
            out[i] = (x.tolist(), y.tolist())
    return out
