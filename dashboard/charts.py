"""Figures of the compare and SQL pages (pure: DataFrames in, figures out)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from collapsewatch.catalogue import by_name

from . import theme
from .series import GL_THRESHOLD, downsample, finite_xy, trailing_mean

PANEL_PX = 210


def compare_figure(df: pd.DataFrame, runs: list[str], metrics: list[str], smooth: int = 1) -> go.Figure:
    """One panel per metric (stacked, one step axis), one colour per run (the same in every panel). With
    ``smooth`` > 1 each run is its trailing mean over ``smooth`` steps, drawn over the faint raw series."""
    if not runs or not metrics:
        return go.Figure(layout=theme.message_figure_layout("pick runs and metrics to compare", 360))
    n = len(metrics)
    gap = 0.06 if n > 1 else 0.0
    h = (1 - gap * (n - 1)) / n
    layout = theme.base_layout(60 + PANEL_PX * n, hovermode="x unified", margin=dict(l=60, r=16, t=40, b=30))
    info = by_name("step")
    traces = []
    annotations = []
    for i, metric in enumerate(metrics):
        top = 1 - i * (h + gap)
        suffix = "" if i == 0 else str(i + 1)
        layout[f"xaxis{suffix}"] = theme.axis(anchor=f"y{suffix}", matches="x" if i else None,
                                              showticklabels=i == n - 1)
        layout[f"yaxis{suffix}"] = theme.axis(domain=[max(0.0, round(top - h, 6)), min(1.0, round(top, 6))],
                                              anchor=f"x{suffix}", nticks=5)
        unit = f" ({info[metric].unit})" if metric in info and info[metric].unit else ""
        label = f" · {smooth}-step trailing mean" if smooth > 1 else ""
        annotations.append(dict(text=f"<b>{metric}</b>{unit}{label}", xref="paper", yref="paper", x=0, y=top,
                                xanchor="left", yanchor="bottom", showarrow=False, font=dict(size=11)))
        for j, run in enumerate(runs):
            x, y = finite_xy(df[df["run"] == run], metric)
            colour = theme.CYCLE[j % len(theme.CYCLE)]
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
    layout["annotations"] = annotations
    layout["legend"] = dict(orientation="h", x=1, xanchor="right", y=1, yanchor="bottom", font=dict(size=11),
                            bgcolor="rgba(0,0,0,0)")
    return go.Figure(data=traces, layout=layout)


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
