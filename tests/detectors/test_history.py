"""Row normalisation (NULL / NaN / Inf / pandas types) and step-windowed series."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collapsewatch.detectors.history import (
    FIRST_POINTS,
    History,
    Series,
    column_kinds,
    diff_noise,
    median_noise,
    normalise,
)

KINDS = {"grad_norm": "num", "on_policy": "bool", "first_nonfinite": "text", "reward_mean": "num"}


def test_normalise_missing_values_and_types():
    r = normalise({"step": np.int64(7), "grad_norm": math.inf, "on_policy": 1.0, "first_nonfinite": "",
                   "reward_mean": pd.NA}, KINDS)
    assert r.step == 7
    assert r.values == {"on_policy": True}  # inf dropped but noted, '' and NA are missing
    assert r.nonfinite == {"grad_norm"}
    r = normalise({"step": 1, "grad_norm": np.float32(2.5), "on_policy": np.bool_(False), "reward_mean": np.nan,
                   "first_nonfinite": "logp", "unrelated": "x"}, KINDS)
    assert r.values == {"grad_norm": 2.5, "on_policy": False, "first_nonfinite": "logp"}


@pytest.mark.parametrize("step", [None, float("nan"), "3"])
def test_a_row_needs_a_step(step):
    with pytest.raises(ValueError, match="step"):
        normalise({"step": step}, KINDS)


def test_column_kinds_follow_the_catalogue():
    kinds = column_kinds()
    assert kinds["on_policy"] == "bool" and kinds["first_nonfinite"] == "text"
    assert kinds["ratio_p50_pos"] == "num" and kinds["grad_norm"] == "num"


def test_series_windows_count_logged_points_skipping_missing_and_on_policy():
    h = History(maxlen=100)
    for step in (0, 1, 2, 5, 6, 9):  # steps 3, 4, 7, 8 missing
        v = None if step == 6 else float(step)
        h.push(normalise({"step": step, "reward_mean": v, "on_policy": step == 5}, KINDS))
    s = h.series("reward_mean", 3)  # the last 3 points: steps 2, 5, 9 (6 is NULL, not a point)
    assert s.steps.tolist() == [2.0, 5.0, 9.0] and s.values.tolist() == [2.0, 5.0, 9.0]
    # off-policy: step 5 is skipped and not counted, so 3 points reach back to step 1
    assert h.series("reward_mean", 3, off_policy=True).steps.tolist() == [1.0, 2.0, 9.0]
    assert h.series("reward_mean", 100).level(3) == 5.0  # median of [2, 5, 9]
    assert s.tail(2).steps.tolist() == [5.0, 9.0] and s.head(2).steps.tolist() == [2.0]


def test_a_sparse_column_keeps_its_own_points():
    # grad_norm logged every 10th step beside a per-step column: a 4-row history still holds 4 grad points
    h = History(maxlen=4)
    for step in range(100):
        h.push(normalise({"step": step, "reward_mean": 1.0, "grad_norm": 2.0 if step % 10 == 0 else None}, KINDS))
    assert h.series("grad_norm", 10).steps.tolist() == [60.0, 70.0, 80.0, 90.0]
    assert h.series("reward_mean", 10).steps.tolist() == [96.0, 97.0, 98.0, 99.0]


def test_truncate_drops_rows_and_points_from_the_restart_step():
    h = History(maxlen=100)
    for step in range(10):
        h.push(normalise({"step": step, "reward_mean": float(step)}, KINDS))
    h.truncate(6)
    assert h.step == 5
    assert h.series("reward_mean", 100).values.tolist() == [0, 1, 2, 3, 4, 5]


def test_history_is_bounded():
    h = History(maxlen=20)
    for step in range(1000):
        h.push(normalise({"step": step, "reward_mean": 1.0, "grad_norm": 2.0}, KINDS))
    assert len(h) == 20
    assert len(h.series("reward_mean", 10_000)) == 20
    assert all(len(points) == 20 for points in h._points.values())  # the window
    assert all(len(points.steps) < 2 * 20 for points in h._points.values())  # what is stored: cut back at twice it


def test_a_truncate_after_the_window_moved_keeps_what_a_deque_keeps():
    # maxlen 20, steps 0..29 pushed: the window is 10..29 (0..9 pushed out); truncate(25) leaves 10..24 — 15
    # points, not 5..24: a point pushed out stays out, as in a deque(maxlen=20), whatever the lists still hold
    from collections import deque

    h, d = History(maxlen=20), deque(maxlen=20)
    for step in range(30):
        h.push(normalise({"step": step, "reward_mean": float(step)}, KINDS))
        d.append(float(step))
    h.truncate(25)
    while d and d[-1] >= 25:
        d.pop()
    assert h.series("reward_mean", 100).values.tolist() == list(d) == [float(s) for s in range(10, 25)]
    for step in range(25, 60):  # and on from there, point for point as the deque
        h.push(normalise({"step": step, "reward_mean": float(step)}, KINDS))
        d.append(float(step))
        assert h.series("reward_mean", 100).values.tolist() == list(d)


def test_first_keeps_the_runs_start_beyond_the_window_and_forgets_a_restart():
    # window 10, steps 0–99 with value = step: the window holds 90–99, first() still the run's 0, 1, 2 …;
    # FIRST_POINTS (20) bounds it: asking 50 gives steps 0–19
    h = History(maxlen=10)
    for step in range(100):
        h.push(normalise({"step": step, "reward_mean": float(step)}, KINDS))
    assert h.series("reward_mean", 100).values.tolist() == list(range(90, 100))
    assert h.first("reward_mean", 3).values.tolist() == [0, 1, 2]
    assert h.first("reward_mean", 50).steps.tolist() == list(range(FIRST_POINTS))
    assert len(h.first("grad_norm", 5)) == 0
    # a restart from step 2 drops the start's points from 2 on; the rows replayed after it take their place
    h.truncate(2)
    assert h.first("reward_mean", 5).values.tolist() == [0, 1]
    h.push(normalise({"step": 2, "reward_mean": 7.0}, KINDS))
    assert h.first("reward_mean", 5).values.tolist() == [0, 1, 7]


def test_highest_is_the_top_of_the_runs_start_and_its_window():
    # window 10: steps 0–49, value 9 at step 0 (kept among the first FIRST_POINTS points), 5 at step 45 (in the window
    # 40–49), 0 elsewhere → highest 9; no point of a column → None
    h = History(maxlen=10)
    for step in range(50):
        h.push(normalise({"step": step, "reward_mean": 9.0 if step == 0 else 5.0 if step == 45 else 0.0}, KINDS))
    assert h.highest("reward_mean") == 9.0 and h.highest("grad_norm") is None
    # a 3 at step 48 (the window only) is the top of a run whose start is 0; a 7 at step 30 sits between the start
    # (0–19) and the window (40–49): not kept, so the run reads highest 3 though it logged 7 (the documented limit);
    # a restart from step 0 drops every point
    h = History(maxlen=10)
    for step in range(50):
        h.push(normalise({"step": step, "reward_mean": 7.0 if step == 30 else 3.0 if step == 48 else 0.0}, KINDS))
    assert h.highest("reward_mean") == 3.0
    h.truncate(0)
    assert h.highest("reward_mean") is None


def test_trend_of_a_noise_free_line_is_exact():
    h = History(maxlen=100)
    for step in range(20):
        h.push(normalise({"step": step, "reward_mean": 1.0 - 0.01 * step}, KINDS))
    t = h.series("reward_mean", 20).trend(0.95)
    assert t.slope == pytest.approx(-0.01) and t.falling and not t.rising


def test_theil_sen_by_hand():
    # x = 0, 1, 2 and y = 0, 1, 3: the pairwise slopes are 1/1, 3/2, 2/1 -> sorted [1, 1.5, 2], median 1.5.
    # No ties: var = n (n-1) (2n+5) / 18 = 3*2*11/18 = 3.667, sigma = 1.915; confidence 0.9 -> z = ppf(0.05) = -1.645;
    # upper index min(round((3 + 1.645*1.915)/2) = round(3.07) = 3, 3-1) = 2; lower max(round((3 - 3.15)/2) - 1, 0) = 0
    from collapsewatch.detectors.history import theil_sen

    assert theil_sen(np.array([0.0, 1.0, 3.0]), np.array([0.0, 1.0, 2.0]), 0.9) == (1.5, 1.0, 2.0)
    # ties in y lower the variance: y = 1, 1, 1, 2 over x = 0..3 -> one group of t=3: 3*2*11 = 66 off n's 4*3*13 = 156
    # slopes (6 pairs): 0, 0, 0 (among the ones), 1/3, 1/2, 1 -> sorted [0, 0, 0, 1/3, 1/2, 1], median
    # (0 + 1/3) / 2 = 1/6; var = (156 - 66)/18 = 5, sigma 2.236; at 0.9: upper min(round((6 + 3.678)/2) = 5, 5) = 5,
    # lower max(round((6 - 3.678)/2) - 1, 0) = max(1 - 1, 0) = 0 -> (1/6, 0, 1)
    slope, low, high = theil_sen(np.array([1.0, 1.0, 1.0, 2.0]), np.arange(4.0), 0.9)
    assert (slope, low, high) == pytest.approx((1 / 6, 0.0, 1.0))


def test_theil_sen_is_scipys_theilslopes():
    # parity with the reference: random windows of the sizes the rules use, continuous and tied values, uneven steps
    from scipy import stats

    from collapsewatch.detectors.history import theil_sen

    rng = np.random.default_rng(0)
    for i in range(600):
        n = int(rng.integers(2, 80))
        x = np.sort(rng.choice(np.arange(400.0), size=n, replace=False))
        y = rng.normal(size=n) if i % 2 else rng.integers(0, 4, size=n).astype(float)  # odd: no ties; even: many
        confidence = (0.8, 0.9, 0.95, 0.99)[i % 4]
        want = stats.theilslopes(y, x, confidence)
        got = theil_sen(y, x, confidence)
        np.testing.assert_array_equal(got, (want.slope, want.low_slope, want.high_slope))


def test_median_is_numpys_to_the_bit():
    import warnings

    import numpy as np

    from collapsewatch.detectors.history import median

    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 5, 10, 49, 50, 51, 200):  # odd and even lengths: one middle value, or two averaged
        for _ in range(50):
            x = rng.lognormal(0.0, 3.0, n) * rng.choice([-1.0, 1.0], n)
            assert median(x) == float(np.median(x))
    with_nan = np.array([1.0, np.nan, 3.0])
    assert np.isnan(median(with_nan)) and np.isnan(np.median(with_nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on an empty mean
        assert np.isnan(median(np.array([])))


def test_diff_noise_is_the_normal_consistent_mad_of_the_differences_over_root_two():
    # differences .4 −.3 .2 −.4: median −.05; |d + .05| = .45 .25 .35 .25 → median .30; 1.4826 × .30 / √2 = .314507
    assert float(diff_noise(np.array([.4, -.3, .2, -.4]))) == pytest.approx(.314507, abs=1e-6)
    # along the last axis, row by row: a second row of equal differences has MAD 0
    rows = diff_noise(np.array([[.4, -.3, .2, -.4], [.1, .1, .1, .1]]))
    assert rows[0] == pytest.approx(.314507, abs=1e-6) and rows[1] == 0
    # Series.noise reads it on the series' differences (.2 .6 .3 .5 .1 → the differences above), 0 below 3 points
    assert Series(np.arange(5), np.array([.2, .6, .3, .5, .1])).noise() == pytest.approx(.314507, abs=1e-6)
    assert Series(np.arange(2), np.array([.2, .6])).noise() == 0


def test_median_noise_is_the_standard_error_of_a_median_and_one_points_own_noise():
    # a median of k normal points: 1.2533 σ / √k — k 4, σ .2: 1.2533 × .2 / 2 = .12533; one point: σ itself
    assert float(median_noise(.2, 4)) == pytest.approx(.12533)
    assert float(median_noise(.2, 1)) == pytest.approx(.2)
    assert median_noise(np.array([.2, .2]), np.array([1, 25])) == pytest.approx([.2, 1.2533 * .2 / 5])


def test_diff_noise_reads_a_short_series_on_a_list_to_the_bit_of_numpys():
    # the list path (1-D, fewer than 64 differences) and numpy's (the same differences as a row of a 2-D array) agree
    # bit for bit, at odd and even lengths (one middle value; two, halved), ties included
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 5, 17, 50, 63):
        for d in (rng.normal(0, .2, n), rng.integers(-2, 3, n) / 8):
            assert diff_noise(d).tobytes() == diff_noise(d[None, :])[0].tobytes(), n
