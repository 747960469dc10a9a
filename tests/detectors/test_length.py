"""Length blow-up (truncated_frac) and repetition (repeat_frac_max), level = median of 5."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("length",))


def test_blowup_and_repetition_open_from_their_own_steps():
    # truncated 0.02 → 0.5 at 50 (warning; ≥ 0.7 at 90 → critical); repeat 0.2 → 0.7 at 60
    data = rows(120, truncated_frac=lambda s: 0.02 if s < 50 else (0.5 if s < 90 else 0.8),
                repeat_frac_max=lambda s: 0.2 if s < 60 else 0.7, response_length_mean=200.0)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 119, "critical"), ("repetition", 64, 119, "warning")]
    assert suite.episodes()[0].evidence["response_length_level"] == 200.0


def test_one_degenerate_batch_is_not_repetition():
    _, suite = feed(rows(50, repeat_frac_max=lambda s: 0.95 if s in (20, 21) else 0.3), ONLY)
    assert suite.episodes() == []


def test_collapse_when_responses_shrink_and_the_reward_does_not_rise():
    # length 50 for steps 0–59, then 4 tokens; reward flat 0.5. The level (median of the last 5) is 4 once 3 of
    # the last 5 steps are ≥ 60, i.e. from s = 62; the running level (median of the earlier points) is still 50
    # (most earlier points are 50 until step 124), and 4 ≤ 0.25 × 50 = 12.5 → holds from 62, confirmed on the
    # 3rd consecutive hold (confirm_steps): the episode starts at 64 and stays open to the end.
    data = rows(120, response_length_mean=lambda s: 50.0 if s < 60 else 4.0, reward_mean=0.5)
    _, suite = feed(data, ONLY)
    [ep] = suite.episodes()
    assert (ep.phase, ep.step_start, ep.step_end, ep.severity) == ("collapse", 64, 119, "warning")
    assert (ep.evidence["response_length_level"], ep.evidence["response_length_running"]) == (4.0, 50.0)


def test_shorter_answers_that_earn_more_are_not_a_collapse():
    # same length drop, but the reward rises 0.3 → 0.8 with it: level 0.8 ≥ running 0.3 + 0.05 → no collapse
    data = rows(120, response_length_mean=lambda s: 50.0 if s < 60 else 4.0,
                reward_mean=lambda s: 0.3 if s < 60 else 0.8)
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []


def test_a_gradual_shortening_and_too_few_points_do_not_flag():
    # 200 → 130 tokens over 120 steps (verl's GSM8K reference runs shorten like this): level ≥ 0.65 × running
    _, suite = feed(rows(120, response_length_mean=lambda s: 200.0 - 70.0 * s / 119, reward_mean=0.5), ONLY)
    assert suite.episodes() == []
    # 15 points (< collapse_min_points 20) of a collapse: no verdict yet
    _, suite = feed(rows(15, response_length_mean=lambda s: 50.0 if s < 8 else 2.0), ONLY)
    assert suite.episodes() == []


def test_no_reward_column_lets_the_length_decide():
    _, suite = feed(rows(90, response_length_mean=lambda s: 40.0 if s < 60 else 3.0), ONLY)
    assert spans(suite.episodes(), "length") == [("collapse", 64, 89, "warning")]
