"""Token drill-down, pure parts: token texts, per-token colours and hover text, and the step × position
heatmap figure. No Dash imports; the tokens page turns ``token_cells`` into spans.

Colours: ratio and displacement (log_ratio) are diverging — orange-red where the token's likelihood went
down (r < 1), blue where it went up — and entropy is sequential (amber, brighter = more uncertain).
Tool-observation tokens (mask 0) get no metric colour: they are not trained on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import theme

METRICS = {"ratio": "ratio r", "log_ratio": "displacement (log_ratio)", "entropy": "entropy"}
RATIO_SPAN = 1.0      # |r − 1| that gets the strongest colour
LOG_RATIO_SPAN = 1.0  # |log_ratio| (nats) that gets the strongest colour
ENTROPY_SPAN = 4.0    # entropy (nats) that gets the strongest colour
UP, DOWN, HOT = "#4fa3f7", "#ff7043", "#ffca28"


def token_texts(token_ids: Sequence[Any], decode: Callable[[list[int]], list[str]] | None) -> list[str]:
    """One display string per token: decoded text when a decoder is given, else ``[id]``."""
    ids = [None if pd.isna(t) else int(t) for t in token_ids]
    if decode is None:
        return ["[?]" if t is None else f"[{t}]" for t in ids]
    known = [t for t in ids if t is not None]
    decoded = iter(decode(known))
    return ["[?]" if t is None else next(decoded) for t in ids]


def visible(text: str) -> str:
    """Whitespace that would vanish on screen made visible (newline ↵ kept as a line break, tab →)."""
    if text == "":
        return "∅"
    return text.replace("\t", "→").replace("\r", "").replace("\n", "↵\n")


def scale(metric: str, value: float | None) -> float:
    """Signed strength in [−1, 1] of a value: < 0 likelihood down, > 0 up (entropy: [0, 1])."""
    if value is None or not math.isfinite(value):
        return 0.0
    if metric == "ratio":
        return float(np.clip((value - 1.0) / RATIO_SPAN, -1, 1))
    if metric == "log_ratio":
        return float(np.clip(value / LOG_RATIO_SPAN, -1, 1))
    if metric == "entropy":
        return float(np.clip(value / ENTROPY_SPAN, 0, 1))
    raise ValueError(f"unknown token metric {metric!r}")


def colour(metric: str, value: float | None) -> str:
    s = scale(metric, value)
    if metric == "entropy":
        return theme.rgba(HOT, 0.08 + 0.72 * s)
    return theme.rgba(UP if s > 0 else DOWN, 0.06 + 0.79 * abs(s))


def token_cells(tokens: pd.DataFrame, metric: str, texts: list[str]) -> list[dict[str, Any]]:
    """Per token: ``text``, ``background``, ``observation`` (mask 0) and ``tip`` (hover lines)."""
    cols = {c: tokens[c].to_numpy(dtype=float, na_value=np.nan) if c in tokens else np.full(len(tokens), np.nan)
            for c in ("token_id", "turn_id", "ratio", "log_ratio", "entropy", "advantage", "logp", "logp_old")}
    values = cols[metric] if metric in cols else np.full(len(tokens), np.nan)
    cells = []
    for i, (pos, mask, text) in enumerate(zip(tokens["pos"].tolist(), tokens["mask"].tolist(), texts, strict=True)):
        head = f"pos {pos} · id {_fmt(cols['token_id'][i], '.0f')} · turn {_fmt(cols['turn_id'][i], '.0f')}"
        if not mask:
            cells.append({"text": visible(text), "observation": True, "background": None,
                          "tip": f"{head}\ntool observation (mask 0, not trained on)"})
            continue
        tip = (f"{head}\nratio {_fmt(cols['ratio'][i])}   log_ratio {_fmt(cols['log_ratio'][i], '+.4f')}"
               f"\nentropy {_fmt(cols['entropy'][i])}   A {_fmt(cols['advantage'][i], '+.3f')}"
               f"\nlogp {_fmt(cols['logp'][i])}   logp_old {_fmt(cols['logp_old'][i])}")
        cells.append({"text": visible(text), "observation": False, "tip": tip,
                      "background": colour(metric, float(values[i]))})
    return cells


def _fmt(v: float, spec: str = ".4g") -> str:
    return "—" if not math.isfinite(v) else format(v, spec)


def bins(steps: Sequence[int], max_pos: int, max_rows: int = 160, max_cols: int = 256) -> tuple[int, int]:
    """(step_bin, pos_bin) widths so the heatmap has at most ``max_rows`` × ``max_cols`` cells."""
    span = (max(steps) - min(steps) + 1) if len(steps) else 1
    return max(1, -(-span // max_rows)), max(1, -(-(max_pos + 1) // max_cols))


def heatmap_figure(grid: pd.DataFrame, metric: str, step: int | None = None, step_bin: int = 1) -> go.Figure:
    """Step × position heatmap of ``grid`` rows (step, pos, value): steps down, positions across."""
    if grid.empty:
        return go.Figure(layout=theme.message_figure_layout("no token rows stored for this run", 320))
    z = grid.pivot(index="step", columns="pos", values="value").sort_index()
    if metric == "entropy":
        cs, zmin, zmax, zmid = "Inferno", 0.0, float(np.nanpercentile(z.to_numpy(), 99)), None
    else:
        centre = 1.0 if metric == "ratio" else 0.0
        dev = float(np.nanpercentile(np.abs(z.to_numpy() - centre), 99)) or 0.1
        cs = [[0, DOWN], [0.5, "#1b2130"], [1, UP]]
        zmin, zmax, zmid = centre - dev, centre + dev, centre
    label = {"ratio": "geo-mean r", "log_ratio": "mean log_ratio", "entropy": "mean entropy"}[metric]
    fig = go.Figure(go.Heatmap(
        x=z.columns.to_numpy(), y=z.index.to_numpy(), z=z.to_numpy(), colorscale=cs, zmin=zmin, zmax=zmax,
        zmid=zmid, colorbar=dict(title=dict(text=label, side="right"), thickness=10, len=0.9),
        hovertemplate=f"step %{{y}} · pos %{{x}}<br>{label} %{{z:.4g}}<extra></extra>", hoverongaps=False))
    height = int(np.clip(24 + 3 * len(z), 300, 560))
    fig.update_layout(theme.base_layout(height, margin=dict(l=56, r=16, t=30, b=36)),
                      xaxis=theme.axis(title=dict(text="position", font=dict(size=10))),
                      yaxis=theme.axis(title=dict(text="step", font=dict(size=10)), autorange="reversed"),
                      title=dict(text=f"<b>{METRICS[metric]}</b> by step × position (model tokens, "
                                      f"{step_bin}-step bins)", x=0.01, y=0.98, font=dict(size=12)))
    if step is not None:
        fig.update_layout(shapes=[step_marker(step, step_bin)])
    return fig


def step_marker(step: int, step_bin: int = 1) -> dict[str, Any]:
    """Outline of the heatmap row (step bin) holding ``step``."""
    lo = (step // step_bin) * step_bin
    return dict(type="rect", xref="x domain", yref="y", x0=0, x1=1, y0=lo - 0.5 * step_bin, y1=lo + 0.5 * step_bin,
                line=dict(color="#ffffff", width=1.5), fillcolor="rgba(0,0,0,0)")
