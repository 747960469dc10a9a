"""The pooled L and the choice of L source (detectors/likelihood.py), on hand-derived numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from collapsewatch.detectors import DetectorConfig
from collapsewatch.detectors.likelihood import pooled_level, weighted_trend

from .series import feed, rows, spans


def test_pooled_level_and_its_standard_error():
    # steps L̄ = [-1, -2] with 3 and 1 correct tokens, a third step with none (weight 0: left out):
    # L = (3·(-1) + 1·(-2)) / 4 = -1.25; SE² = 2/1 · (3²·0.25² + 1²·0.75²) / 4² = 2 · 1.125 / 16 → SE 0.375
    level, se = pooled_level(np.array([-1.0, -2.0, -9.0]), np.array([3.0, 1.0, 0.0]))
    assert level == pytest.approx(-1.25) and se == pytest.approx(0.375)
    assert pooled_level(np.array([-1.0]), np.array([2.0])) == (-1.0, None)  # one step: no SE
    assert math.isnan(pooled_level(np.array([-1.0]), np.array([0.0]))[0])


def test_weighted_slope_and_its_cluster_robust_interval():
    # x = 0, 1, 2; y = 0, 2, 1; w = 1, 1, 2: x̄ = 5/4, ȳ = 1, Sxx = 1.5625 + 0.0625 + 2·0.5625 = 2.75,
    # Sxy = 1.25 − 0.25 + 0 = 1 → slope 1/2.75. Residuals −0.54545, 1.09091, −0.27273;
    # var = 3/1 · (1·1.5625·0.29752 + 1·0.0625·1.19008 + 4·0.5625·0.07438) / 2.75² = 0.28031, t(0.975, 1) = 12.706
    t = weighted_trend(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 2.0, 1.0, 5.0]), np.array([1.0, 1.0, 2.0, 0.0]),
                       0.95)
    assert t.slope == pytest.approx(1 / 2.75) and t.n == 3
    half = stats.t.ppf(0.975, 1) * math.sqrt(0.280309)
    assert (t.low, t.high) == pytest.approx((1 / 2.75 - half, 1 / 2.75 + half), rel=1e-4)
    # an exact line: zero residuals, a zero-width interval; < 3 weighted points: no slope
    line = weighted_trend(np.arange(5.0), 2 - 0.5 * np.arange(5.0), np.array([1.0, 3, 0, 2, 1]), 0.95)
    assert (line.slope, line.low, line.high) == pytest.approx((-0.5, -0.5, -0.5))
    assert math.isnan(weighted_trend(np.arange(3.0), np.zeros(3), np.array([1.0, 0, 1]), 0.95).slope)


ONLY = DetectorConfig(enabled=("lld",))


def _decay(s: int) -> float:
    return -0.2 if s < 60 else -0.2 - 0.01 * (s - 60)


def test_lld_reads_the_pooled_L_on_steps_with_few_correct_responses():
    # Half the steps have no correct response (L NULL, 0 tokens), the others 1–3 responses' worth of tokens; the
    # token means fall 0.01/step from step 60 (an exact line). The plain batch L with the same values has only
    # 15 points in the last 30 steps … the pooled rule sees the same decay, its evidence says so.
    data = rows(120, reward_mean=0.3, model_tokens_correct=lambda s: 0.0 if s % 2 else 10.0 * (1 + s % 3),
                logp_old_token_mean_correct=lambda s: None if s % 2 else _decay(s),
                logp_old_mean_correct=lambda s: None if s % 2 else _decay(s))
    _, suite = feed(data, ONLY)
    eps = [e for e in suite.episodes() if e.detector == "lld"]
    assert eps and eps[0].phase == "steady_decay" and eps[0].evidence["L_source"] == "pooled"
    assert eps[0].metric == "logp_old_token_mean_correct" and eps[0].evidence["L_pooled_se"] is not None


def test_lld_prefers_the_sentinel_L_once_it_has_six_points():
    # sentinel L every 10 steps, flat at -0.3 (no decay), while the batch L decays: the sentinel wins from its
    # 6th point (step 50) on, so the batch decay is never flagged; before it the pooled L is read.
    data = rows(120, reward_mean=0.3, model_tokens_correct=20.0, logp_old_token_mean_correct=_decay,
                sentinel_logp_correct_mean=lambda s: -0.3 if s % 10 == 0 else None)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "lld") == []
    # the sentinel decaying 0.02 per 10 steps from step 40 on: decay on the sentinel L (12-point window)
    data = rows(200, reward_mean=0.3, model_tokens_correct=20.0, logp_old_token_mean_correct=-0.2,
                sentinel_logp_correct_mean=lambda s: (-0.3 if s < 40 else -0.3 - 0.002 * (s - 40)) if s % 10 == 0
                else None)
    _, suite = feed(data, ONLY)
    eps = suite.episodes()
    assert eps and eps[0].evidence["L_source"] == "sentinel" and eps[0].metric == "sentinel_logp_correct_mean"
    assert eps[0].phase == "steady_decay"


def test_pooled_columns_equal_pooled_level_over_each_trailing_window():
    import pandas as pd

    from collapsewatch.detectors.likelihood import pooled_columns

    df = pd.DataFrame({"step": range(6), "logp_old_token_mean_correct": [-1.0, None, -2.0, -1.5, None, -0.5],
                       "model_tokens_correct": [3.0, 0.0, 1.0, 2.0, 0.0, 4.0]})
    out = pooled_columns(df, window=3)
    # row 0: one step with tokens → no SE, NaN; row 2: steps 0–2 = the hand-derived case above: -1.25 ± 1.96·0.375
    assert math.isnan(out["L_pooled"][0])
    assert (out["L_pooled"][2], out["L_pooled_hi"][2] - out["L_pooled"][2]) == pytest.approx((-1.25, 1.96 * 0.375))
    for i in range(2, 6):  # the rolling sums agree with the direct formula on every window
        w = df.iloc[max(0, i - 2): i + 1]
        level, se = pooled_level(w["logp_old_token_mean_correct"].fillna(0).to_numpy(),
                                 w["model_tokens_correct"].to_numpy())
        assert out["L_pooled"][i] == pytest.approx(level) and out["L_pooled_lo"][i] == pytest.approx(level - 1.96 * se)
