"""The run overview's panels and their grid, defined once: which series each panel draws, and where each panel
sits (axis ids, paper domains, margins). The overview figure (``figures``) and the phase timeline
(``timeline``) are both laid out from ``GRID`` and ``MARGIN``, so a step lands at the same pixel in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


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
    nonnegative: bool = False  # fractions: the axis never goes below 0
    y_title: str = ""          # the left axis's title: what is measured, in which unit
    right_title: str = ""      # the right axis's title


def _fan(sign: str) -> tuple[Series, ...]:
    return (Series(f"ratio_p05_{sign}", "p05", "lower"), Series(f"ratio_p95_{sign}", "p05–p95", "upper"),
            Series(f"ratio_p50_{sign}", "median"))


PANELS: tuple[Panel, ...] = (
    Panel("reward", "reward", (Series("reward_mean", "mean"), Series("correct_frac", "correct", dash="dot"),
                               Series("zero_std_group_frac", "zero-std groups", dash="dash"),
                               Series("eval_lo", "evaluation", "lower"),  # ± 1.96 of its set's sampling noise
                               Series("eval_hi", "evaluation ± 1.96 SE", "upper"),  # SE: of a share on its set
                               Series("eval_score", "evaluation", dash="dashdot")),  # at the steps that evaluated
          y_title="reward · share"),
    Panel("entropy", "entropy (nats)", (Series("entropy_p05", "p05", "lower"),
                                        Series("entropy_p95", "p05–p95", "upper"),
                                        Series("entropy_mean", "mean")), y_title="nats/token"),
    Panel("ratio_pos", "ratio r, A>0 tokens (dotted: per turn, w_k)",
          (*_fan("pos"), Series("turn_ratio_p05_pos", "turn p05", dash="dot"),
           Series("turn_ratio_p50_pos", "turn median", dash="dot")), ratio_metric=True, log_y=True, ref_y=1.0,
          y_title="ratio π_θ/π_old"),
    Panel("ratio_neg", "ratio r, A<0 tokens", _fan("neg"), ratio_metric=True, log_y=True, ref_y=1.0,
          y_title="ratio π_θ/π_old"),
    Panel("clip", "clip & low-ratio fractions", (
        Series("clip_low_frac", "clip low (A<0)"), Series("clip_high_frac", "clip high (A>0)"),
        Series("clip_region_frac", "clip region"),  # what verl / OpenRLHF log (an ingested run)
        Series("clip_low_frac_pos", "A>0 r<1−ε (unclipped)", dash="dot"),
        Series("ratio_lt_0_1_frac_pos", "A>0 r<0.1", dash="dash")), ratio_metric=True, nonnegative=True,
          y_title="share of tokens"),
    Panel("likelihood", "L: logp_old mean", (  # the key names the band and the dotted sentinels
        Series("L_pooled_lo", "pooled L", "lower"), Series("L_pooled_hi", "pooled L ± 1.96 SE", "upper"),
        Series("logp_old_mean_correct", "correct"), Series("logp_old_mean_incorrect", "incorrect"),
        Series("sentinel_logp_correct_mean", "sentinel correct", dash="dot"),
        Series("sentinel_logp_incorrect_mean", "sentinel incorrect", dash="dot")), y_title="logp, nats/token"),
    Panel("displacement", "displacement mean (logp − logp_old)", (
        Series("displacement_mean_correct", "correct"), Series("displacement_mean_incorrect", "incorrect")),
          ratio_metric=True, ref_y=0.0, y_title="Δ logp, nats/token"),
    Panel("grad", "grad norm (pre-clip)", (Series("grad_norm", "grad norm"),), log_y=True, y_title="L2 norm"),
    Panel("length", "response length", (Series("response_length_mean", "mean tokens"),
                                        Series("truncated_frac", "truncated", dash="dot", right=True),
                                        Series("repeat_frac_max", "repeated token", dash="dash", right=True)),
          right_format=".0%", right_range=(0.0, 1.02), y_title="tokens", right_title="share"),
    Panel("mismatch", "train–inference mismatch", (Series("is_log_ratio_abs_mean", "|is_log_ratio| mean"),
                                                   Series("is_ess", "IS ESS", dash="dot", right=True)),
          right_format=".1f", right_range=(0.0, 1.02),  # ESS / n ∈ (0, 1]: a healthy run sits on 1
          y_title="nats/token", right_title="ESS / n"),
    Panel("kl", "KL to the reference policy (nats)", (Series("kl_ref_mean", "mean k3"),), log_y=True,
          y_title="nats"),
    # kl_ref_mean: the built-in trainer's, or an ingested run's logged KL (TRL `kl`, verl `actor/kl_loss`, …)
    Panel("tools", "tool calls per response", (Series("tool_calls_mean", "mean"),), nonnegative=True,
          y_title="calls"),
    # tool_calls_mean: an agent's valid searches (the built-in trainer), or a logged tool-call count (Search-R1's
    # env/number_of_valid_search, TRL's tools/call_frequency …); collapsed where the run logs none
)

N_COLS = 2
PANEL_PX, GAP_PX = 158, 34
MARGIN = dict(l=150, r=48)
"""Left and right margins (px) of the overview and of the timeline above it: the timeline's row labels fit in the
left one, and equal margins put a step at the same x in both figures."""


NOTE_PX = 40
"""Room under the grid for the line naming the collapsed panels (below the bottom row's tick labels)."""
X_TITLE = "step"
"""The step axis's title, under each panel that shows its tick labels (the bottom one of its column)."""
X_TITLE_PX = 16
"""Extra room under the grid for that title."""
COL_GAP = 0.045
"""Space on each side of the middle, as a fraction of the plot width, between the two panel columns: room for a
right-hand axis of the left column and the tick labels and title of the right column's left axis."""


@lru_cache(maxsize=64)
def grid_for(hidden: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Axis ids and paper domains of the panels, in N_COLS columns (pixels → fractions). Panels in ``hidden`` (keys)
    are collapsed: the others close up in order, and a collapsed panel keeps its axis ids and column (so traces,
    patches and shapes keep their addresses) on a sliver at the bottom, its axes hidden."""
    shown = [i for i, p in enumerate(PANELS) if p.key not in hidden]
    n_rows = max(1, -(-len(shown) // N_COLS))
    note = NOTE_PX + X_TITLE_PX if len(shown) < len(PANELS) else 0  # under the step axis's title
    height = n_rows * PANEL_PX + (n_rows - 1) * GAP_PX + 20 + note  # + room for the top row's titles
    frac = 1.0 / height
    cells: list[dict[str, Any]] = [{} for _ in PANELS]
    for i in range(len(PANELS)):
        col = shown.index(i) % N_COLS if i in shown else i % N_COLS
        x0 = col / N_COLS + (COL_GAP if col else 0.0)
        x1 = (col + 1) / N_COLS - (0.0 if col else COL_GAP)
        sx = "" if i == 0 else str(i + 1)
        if i in shown:
            row = shown.index(i) // N_COLS
            y1 = 1 - 20 * frac - row * (PANEL_PX + GAP_PX) * frac
            yd = [max(0.0, y1 - PANEL_PX * frac), y1]
            bottom = row == n_rows - 1 or shown.index(i) + N_COLS >= len(shown)
        else:
            yd, bottom = [0.0, 0.5 * frac], False
        cells[i] = {"x": f"x{sx}", "y": f"y{sx}", "xd": [x0, x1], "yd": yd, "bottom": bottom,
                    "hidden": i not in shown}
    return {"height": height + 40 + X_TITLE_PX, "cells": cells,
            "right_axis": {p.key: f"y{len(PANELS) + 1 + j}" for j, p in enumerate(q for q in PANELS if q.right_format)}}


GRID = grid_for()


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log axis over data in [lo, hi] (lo > 0): 1-1.5-2-3-5-7 steps within one decade's span,
    1-2-5 over at most 2.5 decades, decades over at most 8, every other decade beyond — always reaching past both
    ends of the data."""
    if not (lo > 0 and hi >= lo and math.isfinite(lo) and math.isfinite(hi)):
        return [0.1, 0.2, 0.5, 1, 2, 5, 10]
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    b = max(b, a + 1)
    if hi / lo < 10:
        return [m * 10.0 ** e for e in range(a, b + 1) for m in (1, 1.5, 2, 3, 5, 7) if m * 10.0 ** e <= 10.0 ** b]
    if b - a <= 2.5:
        return [m * 10.0 ** e for e in range(a, b + 1) for m in (1, 2, 5) if m * 10.0 ** e <= 10.0 ** b]
    step = 1 if b - a <= 8 else 2
    return [10.0 ** e for e in range(a, b + 1, step)] + ([10.0 ** b] if (b - a) % step else [])
