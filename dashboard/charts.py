"""Figures of the compare, sweep and SQL pages (pure: DataFrames in, figures out)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from collapsewatch.catalogue import by_name

from . import theme
from .series import GL_THRESHOLD, downsample, finite_xy, trailing_mean
from .sweep import MISSING, NO_STEPS, SAME_BY_NATURE, VERDICTS, Sweep, flatten

PANEL_PX = 210
SWEEP_LABEL_ANGLE = -30
"""The sweep chart's axis titles, tilted: Plotly centres each over its axis, and level titles longer than the
axes' spacing run into each other (``max_response_tokens`` over ``mini_batches`` with the sample runs' 14 axes)."""
SWEEP_PLOT_PX = 300
"""Height of the sweep chart's axes; the margins above and beside them grow with the titles."""


def _sweep_margin(labels: list[str]) -> dict[str, int]:
    """Margins that hold the tilted axis titles. Plotly starts each title on its axis, 25 px above the axes, and
    tilts it up to the right: one of n characters (about 7 px each at 12 px) rises 7n·sin 30° + 12 px (its own
    height) and reaches 7n·cos 30° right of its axis, so the last title needs that much room on the right."""
    width = [7 * len(label) for label in labels]
    return dict(t=25 + int(0.5 * max(width)) + 12 + 6, l=70, r=max(70, int(0.87 * width[-1]) + 10), b=24)


def run_colours(all_runs: list[str]) -> dict[str, str]:
    """A colour per run from its place among every run of the store in start order (oldest first): a run keeps
    its colour whatever else is selected, and a new run does not shift the others'."""
    return {run: theme.CYCLE[i % len(theme.CYCLE)] for i, run in enumerate(all_runs)}


def compare_figure(df: pd.DataFrame, runs: list[str], metrics: list[str], smooth: int = 1,
                   colours: dict[str, str] | None = None, offsets: dict[str, int] | None = None,
                   events: pd.DataFrame | None = None, log_metrics: list[str] | None = None,
                   unaligned: dict[str, str] | None = None) -> go.Figure:
    """One panel per metric (stacked, one step axis), one colour per run (``colours``, the same in every panel).
    With ``smooth`` > 1 each run is its trailing mean over ``smooth`` steps, drawn over the faint raw series.
    ``offsets``: step subtracted from each run's steps (align at an event); ``events`` (run, step_start,
    severity): a dashed line at each critical episode's start, in the run's colour (warnings and infos would
    bury the panels); ``log_metrics``: panels on a log y axis; ``unaligned``: run → the alignment point it lacks —
    such a run is not drawn (drawn from its step 0 it would sit against another run's event), and the chart says
    so above the panels."""
    if not runs or not metrics:
        return go.Figure(layout=theme.message_figure_layout("pick runs and metrics to compare", 360))
    colours = colours or run_colours(runs)
    offsets = offsets or {}
    n = len(metrics)
    gap = 0.06 if n > 1 else 0.0
    h = (1 - gap * (n - 1)) / n
    layout = theme.base_layout(60 + PANEL_PX * n, hovermode="x unified", margin=dict(l=60, r=16, t=40, b=30))
    info = by_name("step")
    traces, annotations, shapes = [], [], []
    for i, metric in enumerate(metrics):
        top = 1 - i * (h + gap)
        suffix = "" if i == 0 else str(i + 1)
        layout[f"xaxis{suffix}"] = theme.axis(anchor=f"y{suffix}", matches="x" if i else None,
                                              showticklabels=i == n - 1)
        layout[f"yaxis{suffix}"] = theme.axis(domain=[max(0.0, round(top - h, 6)), min(1.0, round(top, 6))],
                                              anchor=f"x{suffix}", nticks=5,
                                              **({"type": "log"} if metric in (log_metrics or []) else {}))
        unit = f" ({info[metric].unit})" if metric in info and info[metric].unit else ""
        label = f" · {smooth}-step trailing mean" if smooth > 1 else ""
        annotations.append(dict(text=f"<b>{metric}</b>{unit}{label}", xref="paper", yref="paper", x=0, y=top,
                                xanchor="left", yanchor="bottom", showarrow=False, font=dict(size=11)))
        for run in runs:
            if run in (unaligned or {}):
                continue
            x, y = finite_xy(df[df["run"] == run], metric)
            x = x - offsets.get(run, 0)
            colour = colours.get(run, theme.CYCLE[0])
            axes = dict(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
            if smooth > 1:  # the raw series stays visible (faint), so smoothing never hides a spike
                rx, ry = downsample(x, y)
                kind = go.Scattergl if len(rx) > GL_THRESHOLD else go.Scatter
                traces.append(kind(x=rx, y=ry, name=f"{run} (raw)", legendgroup=run, showlegend=False,
                                   mode="lines", line=dict(color=colour, width=1), opacity=0.25, hoverinfo="skip",
                                   **axes))
            x, y = downsample(x, trailing_mean(x, y, smooth))
            kind = go.Scattergl if len(x) > GL_THRESHOLD else go.Scatter
            traces.append(kind(x=x, y=y, name=run, legendgroup=run, showlegend=i == 0, mode="lines",
                               line=dict(color=colour, width=1.6), hovertemplate=f"{run}: %{{y:.4g}}<extra></extra>",
                               **axes))
    for ev in (events if events is not None else pd.DataFrame()).itertuples():
        if ev.run in runs and ev.severity == "critical":
            x0 = int(ev.step_start) - offsets.get(ev.run, 0)
            shapes.append(dict(type="line", xref="x", yref="paper", x0=x0, x1=x0, y0=0, y1=1, layer="below",
                               line=dict(color=colours.get(ev.run, theme.MUTED), width=1, dash="dash"),
                               name=f"event:{ev.run}:{ev.detector}:{ev.phase}"))
    if unaligned:
        annotations.append(dict(text="not drawn: " + "; ".join(f"{r} (no {what})" for r, what in unaligned.items()),
                                xref="paper", yref="paper", x=0, y=1, yshift=22, xanchor="left", yanchor="bottom",
                                showarrow=False, font=dict(size=11, color=theme.SEVERITY_COLOURS["warning"]),
                                name="unaligned"))
    layout["annotations"] = annotations
    layout["shapes"] = shapes
    layout["legend"] = dict(orientation="h", x=1, xanchor="right", y=1, yanchor="bottom", font=dict(size=11),
                            bgcolor="rgba(0,0,0,0)")
    if any(offsets.values()):
        layout[f"xaxis{'' if n == 1 else n}"]["title"] = dict(text="steps from the alignment point", font=dict(size=10))
    return go.Figure(data=traces, layout=layout)


def config_diff(configs: dict[str, dict]) -> pd.DataFrame:
    """The config keys (nested keys dotted, ``sweep.flatten``) whose values differ between runs: one row per key, one
    column per run (missing = '—'); empty when fewer than two runs or no difference."""
    flat = {run: {k: str(v) for k, v in flatten(cfg or {}).items() if k not in SAME_BY_NATURE}
            for run, cfg in configs.items()}
    if len(flat) < 2:
        return pd.DataFrame(columns=["key", *flat])
    keys = sorted(set().union(*flat.values()))
    rows = [{"key": k, **{run: f.get(k, "—") for run, f in flat.items()}} for k in keys
            if len({repr(f.get(k, "—")) for f in flat.values()}) > 1]
    return pd.DataFrame(rows, columns=["key", *flat])


def verdict_colourscale() -> list[list]:
    """A stepped colour scale over the verdict codes 0, 1, 2 (``sweep.VERDICTS``): each code its theme colour."""
    n, scale = len(VERDICTS), []
    for i, v in enumerate(VERDICTS):
        colour = theme.VERDICT_COLOURS[v]
        scale += [[i / n, colour], [(i + 1) / n, colour]]
    return scale


def _ticks(values: list[float], extra: tuple[float, str] | None = None) -> dict:
    """tickvals/ticktext for a parcoords axis: each distinct value when there are few, else five even steps."""
    distinct = sorted(set(values))
    if len(distinct) > 8:
        lo, hi = distinct[0], distinct[-1]
        distinct = [lo + (hi - lo) * i / 4 for i in range(5)]
    vals, text = list(distinct), [f"{v:.4g}" for v in distinct]
    if extra is not None:
        vals.append(extra[0])
        text.append(extra[1])
    return dict(tickvals=vals, ticktext=text)


def sweep_figure(sw: Sweep) -> dict:
    """Parallel coordinates of a sweep's configured runs: one axis per config axis (numbers on a linear scale,
    categories one tick each), then the collapse step ("none" above the last step for a run that never collapsed)
    and the verdict; each run a line in its verdict's colour (``theme.VERDICT_COLOURS``). A plain figure dict, as
    the overview's: validating a ``go.Figure`` of 1,000 runs took over a second."""
    runs = sw.frame[sw.frame["has_config"] & (sw.frame["verdict"] != NO_STEPS)]  # no step: nothing to place
    dims = []
    for axis in sw.axes:
        if axis.numeric:
            values = runs[axis.name].astype(float).tolist()
            dims.append(dict(label=axis.name, values=values, **_ticks(values)))
        else:
            cats = list(axis.values)
            code = {c: i for i, c in enumerate(cats)}
            dims.append(dict(label=axis.name, values=[code.get(v, code.get(MISSING, 0)) for v in runs[axis.name]],
                             tickvals=list(range(len(cats))), ticktext=cats))
    steps = runs["collapse_step"]
    top = max([*steps.dropna().tolist(), *runs["last_step"].dropna().tolist(), 0])
    none_at = top + max(1, round(0.08 * top))  # never collapsed: above every step the runs reached
    collapse = [float(v) if pd.notna(v) else float(none_at) for v in steps]
    dims.append(dict(label="collapse step", values=collapse, range=[0, none_at],
                     **_ticks([c for c in collapse if c != none_at] or [0.0], (none_at, "none"))))
    codes = [VERDICTS.index(v) if v in VERDICTS else 0 for v in runs["verdict"]]
    dims.append(dict(label="verdict", values=codes, range=[0, len(VERDICTS) - 1],
                     tickvals=list(range(len(VERDICTS))), ticktext=list(VERDICTS)))
    line = dict(color=codes, colorscale=verdict_colourscale(), cmin=-0.5, cmax=len(VERDICTS) - 0.5, showscale=False)
    trace = dict(type="parcoords", dimensions=dims, line=line, labelfont=dict(size=12, color=theme.TEXT),
                 labelangle=SWEEP_LABEL_ANGLE, tickfont=dict(size=10, color=theme.MUTED),
                 rangefont=dict(size=9, color=theme.MUTED))
    margin = _sweep_margin([d["label"] for d in dims])
    return {"data": [trace], "layout": theme.base_layout(SWEEP_PLOT_PX + margin["t"] + margin["b"], margin=margin)}


def numeric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]


def sql_chart(df: pd.DataFrame, x: str | None, ys: list[str] | None, kind: str = "line") -> go.Figure:
    """Quick chart of a query result: ``ys`` against ``x`` as lines, markers or bars; a result with a ``run``
    column gets one series per run (colour = run, dash = column)."""
    if df.empty or not x or not ys or x not in df.columns:
        return go.Figure(layout=theme.message_figure_layout("pick an x and at least one numeric y column", 300))
    ys = [c for c in ys if c in df.columns]
    data = df.sort_values(x) if kind == "line" and pd.api.types.is_numeric_dtype(df[x]) else df
    groups = list(data.groupby("run", sort=False)) if "run" in data.columns and x != "run" else [(None, data)]
    traces = []
    for gi, (name, part) in enumerate(groups):
        for i, col in enumerate(ys):
            colour = theme.CYCLE[(gi if name is not None else i) % len(theme.CYCLE)]
            label = f"{name} · {col}" if name is not None else col
            y = pd.to_numeric(part[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            if kind == "bar":
                traces.append(go.Bar(x=part[x], y=y, name=label, marker_color=colour))
                continue
            cls = go.Scattergl if len(part) > GL_THRESHOLD else go.Scatter
            dash = ("solid", "dot", "dash", "dashdot")[i % 4] if name is not None else "solid"
            traces.append(cls(x=part[x], y=y, name=label, mode="lines" if kind == "line" else "markers",
                              line=dict(color=colour, width=1.6, dash=dash), marker=dict(color=colour, size=5)))
    return go.Figure(data=traces, layout=theme.base_layout(340, hovermode="x unified",
                                                           xaxis=theme.axis(title=dict(text=x)),
                                                           yaxis=theme.axis(), margin=dict(l=56, r=16, t=44, b=40)))
