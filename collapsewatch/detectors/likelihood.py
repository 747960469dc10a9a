"""Which L the LLD rules read, and the pooled L: one home for the LLD detector and the entropy rule alike.

Sources, first that applies (the evidence names it as ``L_source``):

* ``sentinel`` — ``sentinel_logp_correct_mean`` (I: ``sentinel_logp_incorrect_mean``), fixed known-correct
  responses scored every k steps (``collapsewatch.sentinels``): no sampling noise, so few points suffice; windows
  are ``lld.sentinel_window`` points (the LLD windows count points of the column they read, as everywhere);
* ``pooled`` — the batch L pooled over steps, token-weighted: step s contributes its correct responses'
  Σ logp_old / Σ tokens, L̄_s = ``logp_old_token_mean_correct``, with weight N_s = ``model_tokens_correct``, so a
  step with 1–3 correct responses counts by its tokens instead of as a full point, and a step with none drops out.
  Over the window's m steps with N_s > 0::

      L_pool = Σ N_s L̄_s / Σ N_s
      SE²    = m / (m − 1) · Σ N_s² (L̄_s − L_pool)² / (Σ N_s)²      (ratio estimator, steps as clusters)

  and the slope is the N-weighted least-squares slope of L̄_s on s, its CI from the same cluster-robust
  (sandwich) variance with a t quantile on m − 2 degrees of freedom;
* ``batch`` — ``logp_old_mean_correct`` with Theil–Sen slopes (stores without the token statistics: ingested or
  older runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .history import History, Series, Trend

SOURCES = ("sentinel", "pooled", "batch")
COLUMNS = {  # source -> (L column, I column, weight column of L, weight column of I)
    "sentinel": ("sentinel_logp_correct_mean", "sentinel_logp_incorrect_mean", None, None),
    "pooled": ("logp_old_token_mean_correct", "logp_old_token_mean_incorrect", "model_tokens_correct",
               "model_tokens_incorrect"),
    "batch": ("logp_old_mean_correct", "logp_old_mean_incorrect", None, None),
}
INPUTS = tuple(c for cols in COLUMNS.values() for c in cols if c is not None)


def pooled_level(values: np.ndarray, weights: np.ndarray) -> tuple[float, float | None]:
    """(L_pool, SE) of the module docstring over points with weight > 0; SE None with fewer than 2 such points."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    if len(v) == 0:
        return float("nan"), None
    level = float((w * v).sum() / w.sum())
    m = len(v)
    if m < 2:
        return level, None
    se2 = m / (m - 1) * float((w**2 * (v - level) ** 2).sum()) / float(w.sum()) ** 2
    return level, float(np.sqrt(se2))


def weighted_trend(steps: np.ndarray, values: np.ndarray, weights: np.ndarray, confidence: float) -> Trend:
    """Weighted least-squares slope of values on steps with a cluster-robust CI (module docstring)."""
    keep = weights > 0
    x, y, w = steps[keep].astype(float), values[keep], weights[keep]
    m = len(x)
    if m < 3:
        return Trend(float("nan"), float("-inf"), float("inf"), m)
    xm, ym = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
    sxx = float((w * (x - xm) ** 2).sum())
    if sxx == 0:
        return Trend(float("nan"), float("-inf"), float("inf"), m)
    slope = float((w * (x - xm) * (y - ym)).sum() / sxx)
    resid = y - ym - slope * (x - xm)
    var = m / (m - 2) * float((w**2 * (x - xm) ** 2 * resid**2).sum()) / sxx**2  # HC1 sandwich, one point a cluster
    from scipy import stats  # (here: a command that reads kept verdicts never imports scipy)

    half = float(stats.t.ppf(0.5 + confidence / 2, m - 2)) * float(np.sqrt(var))
    return Trend(slope, slope - half, slope + half, m)


@dataclass(frozen=True)
class WeightedSeries(Series):
    """A Series whose points carry weights (the pooled L): level = pooled mean, trend = weighted slope."""

    weights: np.ndarray = field(default_factory=lambda: np.empty(0))

    def level(self, k: int) -> float:
        return pooled_level(self.values[-k:], self.weights[-k:])[0]

    def trend(self, confidence: float) -> Trend:
        return weighted_trend(self.steps, self.values, self.weights, confidence)

    def tail(self, n: int) -> WeightedSeries:
        cut = max(len(self) - n, 0)
        return WeightedSeries(self.steps[cut:], self.values[cut:], self.weights[cut:])

    def head(self, n: int) -> WeightedSeries:
        keep = max(len(self) - n, 0)
        return WeightedSeries(self.steps[:keep], self.values[:keep], self.weights[:keep])


def _weighted(h: History, column: str, weight_column: str, n: int) -> WeightedSeries:
    s = h.series(column, n)
    w = h.series(weight_column, 2 * n + 10)  # aligned by step: every step with a value has its token count
    by_step = dict(zip(w.steps.tolist(), w.values.tolist(), strict=True))
    weights = np.asarray([by_step.get(st, 0.0) for st in s.steps.tolist()], dtype=float)
    return WeightedSeries(s.steps, s.values, weights)


def source(h: History, sentinel_min_points: int) -> str:
    """The source the rules read at this step (module docstring): sentinel once it has enough points, pooled when
    the step carries the token statistics, batch otherwise."""
    if len(h.series(COLUMNS["sentinel"][0], sentinel_min_points)) >= sentinel_min_points:
        return "sentinel"
    if h.row.num("model_tokens_correct") is not None or h.row.num("model_tokens_incorrect") is not None:
        return "pooled"
    return "batch"


def series(h: History, src: str, which: str, n: int) -> Series:
    """The last ``n`` points of L (``which`` = "correct") or I ("incorrect") from ``src``."""
    correct, incorrect, w_correct, w_incorrect = COLUMNS[src]
    column, weight = (correct, w_correct) if which == "correct" else (incorrect, w_incorrect)
    return _weighted(h, column, weight, n) if weight is not None else h.series(column, n)


POOLED_COLUMNS = ("L_pooled", "L_pooled_lo", "L_pooled_hi")
"""Columns :func:`pooled_columns` adds: the pooled L over the trailing window and its ±1.96 SE band."""


def pooled_columns(steps, window: int = 30, z: float = 1.96):
    """``steps`` (a DataFrame sorted by step, with ``logp_old_token_mean_correct`` and ``model_tokens_correct``)
    with :data:`POOLED_COLUMNS` added: at each row, :func:`pooled_level` over that row and the ``window`` − 1 rows
    before it, vectorised through rolling sums (Σ N²(L̄ − L)² = Σ N²L̄² − 2L Σ N²L̄ + L² Σ N²). NaN where fewer
    than 2 steps of the window have correct tokens (no SE) or the columns are absent."""
    import pandas as pd

    out = steps.copy()
    if "logp_old_token_mean_correct" not in out or "model_tokens_correct" not in out:
        for c in POOLED_COLUMNS:
            out[c] = np.nan
        return out
    v = pd.to_numeric(out["logp_old_token_mean_correct"], errors="coerce")
    n = pd.to_numeric(out["model_tokens_correct"], errors="coerce").where(v.notna(), 0.0).fillna(0.0)
    v = v.fillna(0.0)
    roll = lambda s: s.rolling(window, min_periods=1).sum()  # noqa: E731
    sw, swv, m = roll(n), roll(n * v), roll((n > 0).astype(float))
    sw2, sw2v, sw2v2 = roll(n**2), roll(n**2 * v), roll(n**2 * v**2)
    level = swv / sw.where(sw > 0)
    se2 = m / (m - 1).where(m > 1) * (sw2v2 - 2 * level * sw2v + level**2 * sw2).clip(lower=0) / sw**2
    se = np.sqrt(se2)
    out["L_pooled"] = level.where(m > 1)
    out["L_pooled_lo"], out["L_pooled_hi"] = out["L_pooled"] - z * se, out["L_pooled"] + z * se
    return out
