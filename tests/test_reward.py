"""The reward rule's noise-aware best (collapsewatch.reward.rule_best): the level less NOISE_Z (1.5) × its noise."""

from __future__ import annotations

import numpy as np
import pytest

from collapsewatch import reward
from collapsewatch.detectors.history import Series
from collapsewatch.reward import point_noise, reward_collapse, reward_level, rule_best

# a reward repeating .3 .1 .5 .2 .4: any ten points in a row hold each value twice → every 10-point level is .3;
# its differences repeat −.2 +.4 −.3 +.2 −.1
P = np.tile([.3, .1, .5, .2, .4], 12)


def test_the_rules_best_is_the_level_less_its_noise():
    r = np.array([.2, .6, .3, .5, .1, .4])
    floor, best = rule_best(np.arange(6), r, smooth=5)
    assert np.isnan(floor[:4]).all() and best[3] == -np.inf  # no level before the 5th point
    # 5th point: differences .4 −.3 .2 −.4, median −.05; |d + .05| = .45 .25 .35 .25 → median .30; point noise
    # 1.4826 · .30 / √2 = .314507; the level median(.2 .6 .3 .5 .1) = .3 is a median of 5, its noise
    # 1.2533 · .314507 / √5 = .176279 → floor .3 − 1.5 · .176279 = .035582
    assert floor[4] == pytest.approx(.035582, abs=1e-5)
    # 6th point: differences .4 −.3 .2 −.4 .3, median .2; |d − .2| = .2 .5 0 .6 .1 → median .2; noise .209671;
    # the level (last 5: .6 .3 .5 .1 .4) is .4 → floor .4 − 1.5 · 1.2533 · .209671 / √5 = .4 − .176279 = .223721
    assert floor[5] == pytest.approx(.223721, abs=1e-5) and best[5] == floor[5]
    assert reward_level(np.arange(6), r, smooth=5)[1][5] == pytest.approx(.4)  # the best as shown: the level's


def test_the_point_noise_is_the_detectors_estimator_over_the_last_50_differences():
    # parity with the detectors' own estimator (Series.noise), point by point, on the trailing NOISE_POINTS (50)
    # differences — the growing prefix before the 51st point
    r = np.random.default_rng(3).normal(.3, .15, 130)
    ours = point_noise(r)
    for i in range(len(r)):
        window = r[max(0, i - 50): i + 1]
        assert ours[i] == pytest.approx(Series(np.arange(len(window)), window).noise(), abs=1e-12), i


def test_a_flat_reward_has_no_noise_and_its_best_is_its_level():
    # every difference 0 → noise 0 → floor = level
    floor, best = rule_best(np.arange(20), np.full(20, .5))
    assert floor[4:].tolist() == [.5] * 16 and best[-1] == .5


def _p_floor_best() -> float:
    # P's highest floor is at its 7th point: .3 .1 .5 .2 .4 .3 .1 has differences −.2 .4 −.3 .2 −.1 −.2, median
    # −.15; |d + .15| = .05 .55 .15 .35 .05 .05 → median .1, noise 1.4826 · .1 / √2 = .104835 (few differences:
    # a low estimate), level .3 (median of seven) → .3 − 1.5 · 1.2533 · .104835 / √7 = .3 − .074493 = .225507.
    # From the 51st point every window holds ten of each difference: median −.1, |d + .1| = .1 .5 .2 .3 0 → .2,
    # noise .209671 → floor .3 − 1.5 · 1.2533 · .209671 / √10 = .175352
    floor, best = rule_best(np.arange(60), P)
    assert floor[6] == pytest.approx(.225507, abs=1e-5) and floor[59] == pytest.approx(.175352, abs=1e-5)
    assert best[-1] == floor[6]
    return float(best[-1])


def test_a_fall_to_zero_from_a_noisy_level_is_a_collapse_dated_against_the_best_less_noise():
    # P (steps 0-59), then 20 zeros (60-79). The level at step 60 + k holds k + 1 zeros and the last 9 − k of P:
    #   60: 0 .1 .1 .2 .2 .3 .4 .4 .5 .5 → .25;  61 → .25;  62 → (.2 + .2) / 2 = .2;
    #   63: 0 0 0 0 .1 .2 … → .15;
    #   64: five zeros, .1 .2 .3 .4 .5 → .05;  65 on: 0.
    # The rule's best .225507 (above): half of it .112754 — .15 at 63 is above, .05 at 64 is the fall, and every
    # later level (0) stays ≤ .75 · .225507 for 15 points ≥ SUSTAIN 10 → collapse at 64
    best = _p_floor_best()
    x = np.r_[P, np.zeros(20)]
    assert reward_level(np.arange(80), x)[0][60:66].tolist() == pytest.approx([.25, .25, .2, .15, .05, 0])
    assert .05 <= .5 * best < .15
    assert reward_collapse(np.arange(80), x) == 64


def test_the_plain_best_reads_a_noisy_swing_as_a_collapse_and_the_rules_best_does_not(monkeypatch):
    # P (level .3), then P / 2 (.15 .05 .25 .1 .2: level .15) for 60 points. A 10-point window holds each phase of
    # the pattern twice, each either v (P) or v / 2: never below the all-halves window, so no level is under .15.
    # The plain best is .3 (every level of P, the warm-up's included, is .3: medians of .3 .1 .5 .2 .4 repeated):
    # at step 68 the window (59-68) is .4 and nine halves: .05 .05 .1 .1 .15 .15 .2 .25 .25 .4 → .15 ≤ .5 · .3 and
    # no later level is above .225 → "collapsed" at 68 (at 67, .2 .4 and eight halves → .175: not yet). Against the
    # rule's best (.225507) the fall needs a level ≤ .112754, which never comes → no collapse: the level halved, by
    # 1.8 of its own noises (.083 for a 10-point median here), not to half of what the run stood at beyond noise.
    best = _p_floor_best()
    y = np.r_[P, P / 2]
    assert reward_level(np.arange(120), y)[0][60:].min() >= .15 > .5 * best
    assert reward_collapse(np.arange(120), y) is None
    monkeypatch.setattr(reward, "NOISE_Z", 0.0)  # the rule before the noise-aware best
    assert reward_collapse(np.arange(120), y) == 68


def test_shuffled_noise_rarely_reads_collapsed():
    # 100 series of 400 independent normal points (mean .3, sd .15: no trend by construction, like the natural
    # corpus's lr 3e-4 runs, mean ≈ .3, sd ≈ .17). Measured with this seed: the plain best read 12 of them
    # collapsed (its best is the luckiest of ~40 windows), the rule's best 1. A series with no trend is not a
    # collapse; the bound 3 leaves room for the estimator, not for the old rule's 12.
    rng = np.random.default_rng(0)
    series = [rng.normal(.3, .15, 400) for _ in range(100)]
    assert sum(reward_collapse(np.arange(400), r) is not None for r in series) <= 3
