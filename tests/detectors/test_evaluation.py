"""Evaluation-score fall: an evaluation point below the best one by the reward-drop margin and by 3 × the noise of
the points before it; read only at the steps that log ``eval_score``; a warning, never critical."""

from __future__ import annotations

import math

import pytest

from collapsewatch.detectors import DetectorConfig, EvaluationConfig
from collapsewatch.detectors.history import History, normalise
from collapsewatch.detectors.signals import binomial_noise, level_fall, reward_fall

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("evaluation",))
KINDS = {"eval_score": "num", "eval_size": "num", "reward_mean": "num"}


def history(points: dict[int, float], key: str) -> History:
    h = History(200)
    for step, v in points.items():
        h.push(normalise({"step": step, key: v}, KINDS))
    return h


def every_tenth(values: list[float]):
    """eval_score at steps 0, 10, 20 … (values in order), NULL between."""
    return lambda s: values[s // 10] if s % 10 == 0 else None


def test_a_fall_past_the_margin_is_flagged_at_the_evaluation_that_shows_it():
    # points 0.60, 0.62, 0.58, 0.61, then 0.30 at step 40. Noise of the four before it: differences 0.02, −0.04,
    # 0.03, median 0.02, absolute deviations 0, 0.06, 0.01 → MAD 0.01 → σ = 1.4826 · 0.01 / √2 = 0.010483.
    # Bar: max(0.05, 0.25 × best 0.62 = 0.155, 3σ = 0.0314) = 0.155; 0.62 − 0.30 = 0.32 ≥ 0.155 → flagged at 40
    # (confirm_steps 1). Steps 41–49 log no score: not read, the episode stays open; 0.31 at 50 holds it.
    scores = [0.60, 0.62, 0.58, 0.61, 0.30, 0.31]
    stream, suite = feed(rows(51, eval_score=every_tenth(scores), reward_mean=0.5), ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 40, 50, "warning")]
    first = stream[0]
    assert first.step_end == 40 and first.metric == "eval_score" and first.value == pytest.approx(0.30)
    assert first.threshold == pytest.approx(0.62 - 0.155)
    assert first.evidence["eval_best"] == pytest.approx(0.62) and first.evidence["drop_needed"] == pytest.approx(0.155)
    assert first.evidence["level_noise"] == pytest.approx(1.4826 * 0.01 / math.sqrt(2), rel=1e-5)  # stored: 6 digits
    # at 50 the points before it include the fall: differences 0.02, −0.04, 0.03, −0.31, median −0.01, absolute
    # deviations 0.03, 0.03, 0.04, 0.30 → MAD 0.035; 3σ = 0.110 < 0.155: the margin still decides
    assert suite.episodes()[0].evidence["level_noise"] == pytest.approx(1.4826 * 0.035 / math.sqrt(2), rel=1e-5)


def test_a_dip_inside_the_margin_is_quiet():
    # 0.62 − 0.50 = 0.12 < the 0.155 bar (25 % of the best): not fallen
    scores = [0.60, 0.62, 0.58, 0.61, 0.50, 0.55]
    _, suite = feed(rows(51, eval_score=every_tenth(scores)), ONLY)
    assert spans(suite.episodes(), "evaluation") == []


def test_a_noisy_score_needs_three_of_its_noises():
    # 0.50 0.55 0.60 0.50 0.58 0.48 0.59 0.49: the dips (≤ 0.12) stay inside 25 % of the best 0.60 = 0.15. Then 0.42
    # at step 80: differences before it .05 .05 −.10 .08 −.10 .11 −.10, median .05, absolute deviations 0 0 .15 .03
    # .15 .06 .15 → MAD .06 → σ = 1.4826 · .06 / √2 = .0629, 3σ = .1887 > the margin: 0.60 − 0.42 = 0.18 is inside
    # the score's own noise, quiet; 0.35 (0.25 below) is past it → flagged at 80
    scores = [0.50, 0.55, 0.60, 0.50, 0.58, 0.48, 0.59, 0.49]
    _, suite = feed(rows(81, eval_score=every_tenth([*scores, 0.42])), ONLY)
    assert spans(suite.episodes(), "evaluation") == []
    _, suite = feed(rows(81, eval_score=every_tenth([*scores, 0.35])), ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 80, 80, "warning")]
    assert suite.episodes()[0].evidence["drop_needed"] == pytest.approx(3 * 1.4826 * 0.06 / math.sqrt(2), rel=1e-5)


def test_a_collapse_before_the_second_evaluation_is_flagged_at_it():
    # a warm-started policy: 0.95 at step 0, 0.50 at 10 (two points: no noise, 0 below 3 points) → bar
    # max(0.05, 0.2375) = 0.2375 ≤ 0.45: flagged at step 10, the first point that shows it
    _, suite = feed(rows(11, eval_score=every_tenth([0.95, 0.50])), ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 10, 10, "warning")]


def test_the_fall_does_not_widen_its_own_bar():
    # 0.95, 0.95, 0.50: over all three points the differences 0, −0.45 have MAD 0.225 → σ 0.236, 3σ 0.708 > 0.45
    # and the fall would hide itself; over the points before it (0.95, 0.95: fewer than 3) σ is 0 → flagged at 20
    h = history({0: 0.95, 10: 0.95, 20: 0.50}, "eval_score")
    cfg = DetectorConfig()
    assert level_fall(h, cfg, "eval_score", 1, 1, noise_before=True)[0] is True
    assert level_fall(h, cfg, "eval_score", 1, 1)[0] is False


def test_two_points_to_sustain_wait_for_the_second():
    # sustain_points 2: 0.30 at 40 alone is not enough; with 0.31 at 50 both are fallen → flagged at 50
    cfg = DetectorConfig(enabled=("evaluation",), evaluation=EvaluationConfig(sustain_points=2))
    scores = [0.60, 0.62, 0.58, 0.61, 0.30, 0.31]
    _, suite = feed(rows(51, eval_score=every_tenth(scores)), cfg)
    assert spans(suite.episodes(), "evaluation") == [("fall", 50, 50, "warning")]
    with pytest.raises(ValueError, match="sustain_points"):
        EvaluationConfig(sustain_points=0)


def test_it_stays_a_warning_while_the_reward_collapses_too():
    # the reward falls 0.6 → 0.05 at step 20 and stays: the severity gate would keep a proposed critical; this
    # detector proposes a warning only (one evaluation set can be small), so the episode is a warning. It ends at
    # 70, the last step that logged a score (steps 71–79 are not read)
    data = rows(80, eval_score=every_tenth([0.6, 0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]),
                reward_mean=lambda s: 0.6 if s < 20 else 0.05)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 20, 70, "warning")]


def test_reward_fall_is_level_fall_over_the_reward():
    # the severity gate's rule is the same function with 5-point levels: equal verdicts and evidence on one history.
    # 0.8 to step 29, 0.1 from 30: the first fallen 5-point level ends at 32 (median of 28–32 = 0.1), so at 79 the
    # fall has lasted 79 − 32 + 1 = 48 ≥ 30 steps
    h = history({s: 0.8 if s < 30 else 0.1 for s in range(80)}, "reward_mean")
    cfg = DetectorConfig()
    fired, ev = reward_fall(h, cfg, 5, 30)
    assert (fired, ev) == level_fall(h, cfg, "reward_mean", 5, 5, 30, name="reward")
    assert fired is True and ev["reward_best"] == 0.8 and ev["reward_now"] == 0.1


def test_binomial_noise():
    # √(p(1 − p)/n): p 0.3 on 20 examples → √(0.21 / 20) = √0.0105 = 0.102470; p 0.5 on 32 → √(0.25 / 32) = 0.088388
    assert binomial_noise(0.3, 20) == pytest.approx(0.1024695, rel=1e-6)
    assert binomial_noise(0.5, 32) == pytest.approx(0.0883883, rel=1e-6)
    # a share of 0 or 1 has none; no size, or a value that is no share: no bound
    assert binomial_noise(1.0, 20) == binomial_noise(0.0, 20) == 0.0
    assert binomial_noise(0.3, 0) == binomial_noise(0.3, float("nan")) == binomial_noise(1.5, 20) == 0.0


def test_a_dip_on_a_small_set_is_sampling_when_the_log_says_its_size():
    # shaider-like: 7 of 20 problems right (0.35), then 5 of 20 (0.25) at step 10. Two points: no spread to take noise
    # from, so without a size the margin decides: max(0.05, 0.25 × 0.35 = 0.0875) = 0.0875 ≤ 0.10 → a warning.
    # With eval_size 20 the noise is at least √(0.35 · 0.65 / 20) = 0.106654 (p̄: the mean of the points before the
    # tested one, 0.35), the bar 3 × that = 0.319962 > 0.10: quiet
    data = rows(11, eval_score=every_tenth([0.35, 0.25]))
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 10, 10, "warning")]
    sized = rows(11, eval_score=every_tenth([0.35, 0.25]), eval_size=lambda s: 20.0 if s % 10 == 0 else None)
    _, suite = feed(sized, ONLY)
    assert spans(suite.episodes(), "evaluation") == []
    # a collapse to 0 of 20 (0.35 below) passes the same bar: flagged, the floor in its evidence
    sized = rows(11, eval_score=every_tenth([0.35, 0.0]), eval_size=lambda s: 20.0 if s % 10 == 0 else None)
    stream, suite = feed(sized, ONLY)
    assert spans(suite.episodes(), "evaluation") == [("fall", 10, 10, "warning")]
    assert stream[0].evidence["noise_floor"] == pytest.approx(0.1066536, rel=1e-5)
    assert stream[0].evidence["drop_needed"] == pytest.approx(3 * 0.1066536, rel=1e-5)
    assert stream[0].evidence["set_size"] == 20.0
    assert stream[0].message == ("evaluation score 0, below its best 0.35 by ≥ 0.32 on the last 1 evaluation(s); a set "
                                 "of 20 examples varies by ±0.107 alone")


def test_the_floor_holds_only_for_a_share_of_a_known_set():
    # the same dip on 2,000 examples: floor √(0.35 · 0.65 / 2000) = 0.010665, 3 × = 0.032 < the margin 0.0875 →
    # the margin decides, as without a size: a warning
    h = history({0: 0.35, 10: 0.25}, "eval_score")
    h2 = History(200)
    for step, v in {0: 0.35, 10: 0.25}.items():
        h2.push(normalise({"step": step, "eval_score": v, "eval_size": 2000.0}, KINDS))
    cfg = DetectorConfig()
    assert level_fall(h, cfg, "eval_score", 1, 1, noise_before=True, size_key="eval_size")[0] is True
    fired, ev = level_fall(h2, cfg, "eval_score", 1, 1, noise_before=True, size_key="eval_size")
    assert fired is True and ev["drop_needed"] == pytest.approx(0.0875) and ev["noise_floor"] == pytest.approx(
        0.0106654, rel=1e-5)
    # a score outside [0, 1] (a reward of 3.5 falling to 2.0) is no share: no floor, the margin 0.875 decides → fired
    h3 = History(200)
    for step, v in {0: 3.5, 10: 2.0}.items():
        h3.push(normalise({"step": step, "eval_score": v, "eval_size": 20.0}, KINDS))
    fired, ev = level_fall(h3, cfg, "eval_score", 1, 1, noise_before=True, size_key="eval_size")
    assert fired is True and "noise_floor" not in ev and ev["drop_needed"] == pytest.approx(0.875)


def test_the_sentence_names_the_set_where_its_size_set_the_bar():
    from collapsewatch.detectors.evaluation import _sentence
    ev = {"eval_now": 0.0, "eval_best": 0.35, "drop_needed": 0.31996, "sustain_levels": 1}
    assert _sentence("fall", ev, 10) == ("the evaluation score fell to 0 from its best 0.35 (by ≥ 0.32 on 1 "
                                         "evaluation(s))")
    assert _sentence("fall", {**ev, "noise_floor": 0.1066536, "set_size": 20.0}, 10) == (
        "the evaluation score fell to 0 from its best 0.35 (by ≥ 0.32 on 1 evaluation(s); a set of 20 examples "
        "varies by ±0.107 alone)")
