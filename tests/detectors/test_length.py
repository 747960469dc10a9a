"""Length blow-up (truncated_frac) and repetition (repeat_frac_max), level = median of 5."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import GATE_30, feed, rows, spans

ONLY = DetectorConfig(enabled=("length",), severity=GATE_30)


def test_blowup_and_repetition_open_from_their_own_steps():
    # truncated 0.02 → 0.5 at 50 → 0.8 at 90; the start (median of the first 5 points) is 0.02. Level (median of
    # 5) 0.5 from 52 ≥ 0.02 + 0.3 → warning, opens at 54 (3rd hold). The rule's critical needs the level ≥ 0.7
    # (from 92) and the mean of the last 20 points ≥ 0.7: with n points at 0.8 and 20 − n at 0.5 that is
    # 0.5 + 0.015 n ≥ 0.7 → n ≥ 14 → step 103. Repeat 0.2 → 0.7 at 60: repetition opens at 64.
    # No reward column: nothing shows harm, so the severity gate keeps the blow-up a warning.
    trunc = lambda s: 0.02 if s < 50 else (0.5 if s < 90 else 0.8)  # noqa: E731
    data = rows(120, truncated_frac=trunc, repeat_frac_max=lambda s: 0.2 if s < 60 else 0.7, response_length_mean=200.0)
    stream, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 119, "warning"), ("repetition", 64, 119, "warning")]
    assert suite.episodes()[0].evidence["response_length_level"] == 200.0
    assert suite.episodes()[0].evidence["truncated_frac_start"] == 0.02
    # The reward falls 0.6 → 0.2 at 90 and stays: levels 0.4 below the best from 92 (≥ max(0.05, 0.25 · 0.6) =
    # 0.15), over 5 levels from 96, and the fall has lasted GATE_30.sustain_steps 30 steps at 92 + 29 = 121 — so
    # the rule's critical (from 103) stands from 121.
    stream, suite = feed(rows(130, truncated_frac=trunc, response_length_mean=200.0,
                              reward_mean=lambda s: 0.6 if s < 90 else 0.2), ONLY)
    severity = {e.step_end: e.severity for e in stream if e.phase == "blowup"}
    assert severity[103] == severity[120] == "warning" and severity[121] == "critical"


def test_a_blowup_that_recovers_stays_a_warning():
    # truncated 0.02 → 0.8 for steps 50–61, then 0.02 again; reward 0.6 → 0.2 at 50 and stays (harm shown). The
    # level reaches 0.8 (≥ 0.7) at 52–63, but the mean of the last 20 points is at most 12 · 0.8 / 20 + 8 · 0.02 / 20
    # = 0.488 < 0.7: the rule never says critical, so the episode (opens 54, last holding step 63) is a warning.
    data = rows(100, truncated_frac=lambda s: 0.8 if 50 <= s < 62 else 0.02, response_length_mean=200.0,
                reward_mean=lambda s: 0.6 if s < 50 else 0.2)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 63, "warning")]


def test_truncation_from_the_start_is_a_budget_finding_not_a_blowup():
    # 95 % of responses truncated from step 0 (a 128-token cap, say): level 0.95 and start 0.95, both ≥ 0.3 →
    # budget (info), opens at 2 (3rd hold: steps 0, 1, 2); level − start = 0 < 0.3 → never a blow-up, whatever
    # the reward does (it falls 0.6 → 0.2 at 50 here).
    data = rows(100, truncated_frac=0.95, response_length_mean=128.0, reward_mean=lambda s: 0.6 if s < 50 else 0.2)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("budget", 2, 99, "info")]
    # budget at 0.4 from the start, then rising to 0.8 at 40: 0.8 − 0.4 = 0.4 ≥ 0.3 → a blow-up on top (level
    # 0.8 from 42, opens at 44), and the budget stays (level and start both ≥ 0.3)
    data = rows(100, truncated_frac=lambda s: 0.4 if s < 40 else 0.8, response_length_mean=128.0)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("budget", 2, 99, "info"), ("blowup", 44, 99, "warning")]


def test_a_long_blowup_stays_a_blowup_after_the_window_moves_on():
    # truncated 0.02 for steps 0–49, then 0.8 to step 399. The start is the median of the run's first 5 points,
    # 0.02, kept after the 200-point window has moved past them (from step 200 the window holds only 0.8s):
    # level 0.8 − 0.02 ≥ 0.3 → the blow-up (opens 54) lasts to the end, never turns into a "budget".
    data = rows(400, truncated_frac=lambda s: 0.02 if s < 50 else 0.8, response_length_mean=200.0)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 399, "warning")]
    assert suite.episodes()[0].evidence["truncated_frac_start"] == 0.02


def test_degenerate_output_needs_no_history():
    # responses of 1 token from logged point 3 (steps 0–2: 60 tokens): the latest value ≤ 2 holds from 3 and opens
    # there (an immediate finding: no confirm_steps, no 20-point history needed) — and it is critical
    # with the reward still at its best (degenerate output is harm by itself: severity.exempt)
    data = rows(12, response_length_mean=lambda s: 60.0 if s < 3 else 1.0, reward_mean=0.5)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("degenerate", 3, 11, "critical")]
    # 2.5 tokens is not degenerate (> 2), but it is an abrupt collapse (2.5 ≤ 0.1 × 60 = 6): a warning, confirmed
    # like any rule that one noisy step can meet (holds from 3, opens at 5: confirm_steps 3)
    _, suite = feed(rows(12, response_length_mean=lambda s: 60.0 if s < 3 else 2.5, reward_mean=0.5), ONLY)
    assert spans(suite.episodes(), "length") == [("collapse", 5, 11, "warning")]


def test_degenerate_output_from_the_first_point_is_a_run_that_never_started():
    # responses of 1 token at every point from the first (an all-equal group each step, no update: a template or
    # stop-token problem): flagged at step 0 (no history needed) but no point was ever > 2 tokens (History.highest
    # 1.0 ≤ degenerate_tokens 2) → a warning that says the run never started, not critical
    _, suite = feed(rows(12, response_length_mean=1.0, reward_mean=0.1), ONLY)
    (ep,) = suite.episodes()
    assert (ep.phase, ep.step_start, ep.step_end, ep.severity) == ("degenerate", 0, 11, "warning")
    assert ep.evidence["since_start"] is True and "never started" in ep.message
    # it starts learning at step 12 (30 tokens): the episode closes there; a fall back to 1 token at 20 follows
    # longer responses (highest 30 > 2) → a collapse into it, critical at once
    data = rows(30, response_length_mean=lambda s: 1.0 if s < 12 or s >= 20 else 30.0, reward_mean=0.1)
    _, suite = feed(data, ONLY)
    assert [(e.phase, e.step_start, e.severity) for e in suite.episodes()] == [
        ("degenerate", 0, "warning"), ("degenerate", 20, "critical")]


def test_an_abrupt_collapse_needs_no_history_and_no_reward_fall():
    # 53 tokens at step 0, then 2.6 (what trl-dapo-vl3b logged: 53.4 → 2.6), the reward *rising* 1.75 → 3.6: the
    # start is the longest of the first 5 points, 53; 2.6 ≤ 0.1 × 53 = 5.3 and > 2 (not degenerate) → the abrupt
    # collapse holds from step 1 and opens at 3 (confirm_steps 3: within 2 points of the collapse), a warning
    data = rows(12, response_length_mean=lambda s: 53.0 if s < 1 else 2.6, reward_mean=lambda s: 1.75 if s < 1 else 3.6)
    _, suite = feed(data, ONLY)
    [ep] = suite.episodes()
    assert (ep.phase, ep.step_start, ep.step_end, ep.severity) == ("collapse", 3, 11, "warning")
    assert (ep.evidence["response_length_now"], ep.evidence["response_length_start"]) == (2.6, 53.0)
    # 60 → 7 tokens: 7 > 0.1 × 60 = 6, and 12 points are too few for the gradual rule → nothing
    _, suite = feed(rows(12, response_length_mean=lambda s: 60.0 if s < 3 else 7.0, reward_mean=0.5), ONLY)
    assert suite.episodes() == []


def test_one_short_step_of_a_noisy_run_is_not_an_abrupt_collapse():
    # what a MiniMind GRPO log shows (8 completions a step): lengths near 210 tokens, the longest of the first 5
    # points 297 (→ bar 29.7), and single steps of 10–29 tokens. One such step (20 tokens at step 30) holds the rule
    # once: 1 < confirm_steps 3 → nothing; three in a row (40–42) open the warning at 42. It extends to 44 by the
    # gradual rule: the 5-point level at 43 (points 39–43: 210, 20, 20, 20, 210) and 44 (20, 20, 20, 210, 210) is 20
    # ≤ 0.25 × the running level 210, reward flat; at 45 the level is 210 again
    data = rows(60, response_length_mean=lambda s: 297.0 if s == 2 else 20.0 if s in (30, 40, 41, 42) else 210.0,
                reward_mean=0.5)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("collapse", 42, 44, "warning")]


def test_an_abrupt_collapse_that_ends_a_descent_opens_at_once():
    # what garg-no_baseline logged (lengths 441 → 160 → … → 59, 52, 39): the start is the longest of the first 5
    # points, 440 → the bar is 0.1 × 440 = 44 and the descent bar collapse_approach × 44 = 88. Lengths 440 for
    # steps 0–4, 120 for 5–9, then 59 (10), 52 (11), 39 (12) and 30 after. At 12, 39 ≤ 44 and the confirm_steps − 1
    # = 2 points before (59, 52) are ≤ 88: the end of a descent, not one short step → the warning opens at 12, the
    # first point below the bar (before: at 14, confirm_steps 3). The gradual rule has too few points (< 20) to say
    # anything before.
    lengths = {10: 59.0, 11: 52.0, 12: 39.0}
    data = rows(18, response_length_mean=lambda s: 440.0 if s < 5 else 120.0 if s < 10 else lengths.get(s, 30.0),
                reward_mean=0.5)
    _, suite = feed(data, ONLY)
    [ep] = suite.episodes()
    assert (ep.phase, ep.step_start, ep.step_end, ep.severity) == ("collapse", 12, 17, "warning")
    # the same fall in one step from 120 (> 88: no descent) opens after confirm_steps, at 14
    data = rows(18, response_length_mean=lambda s: 440.0 if s < 5 else 120.0 if s < 12 else 39.0 if s == 12 else 30.0,
                reward_mean=0.5)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("collapse", 14, 17, "warning")]


def test_one_degenerate_batch_is_not_repetition():
    _, suite = feed(rows(50, repeat_frac_max=lambda s: 0.95 if s in (20, 21) else 0.3), ONLY)
    assert suite.episodes() == []


def test_collapse_when_responses_shrink_and_the_reward_does_not_rise():
    # length 50 for steps 0–59, then 10 tokens (> 0.1 × 50 = 5: not abrupt); reward flat 0.5. The level (median
    # of the last 5) is 10 once 3 of the last 5 steps are ≥ 60, i.e. from s = 62; the running level (median of the
    # earlier points) is still 50 (most earlier points are 50 until step 124), and 10 ≤ 0.25 × 50 = 12.5 → holds
    # from 62, confirmed on the 3rd consecutive hold (confirm_steps): the episode starts at 64, open to the end.
    data = rows(120, response_length_mean=lambda s: 50.0 if s < 60 else 10.0, reward_mean=0.5)
    _, suite = feed(data, ONLY)
    [ep] = suite.episodes()
    assert (ep.phase, ep.step_start, ep.step_end, ep.severity) == ("collapse", 64, 119, "warning")
    assert (ep.evidence["response_length_level"], ep.evidence["response_length_running"]) == (10.0, 50.0)


def test_shorter_answers_that_earn_more_are_not_a_collapse():
    # same length drop (50 → 10), but the reward rises 0.3 → 0.8 with it: level 0.8 ≥ running 0.3 + 0.05 → no
    # collapse (a tenfold shrink would be one whatever the reward: test_an_abrupt_collapse_needs_no_history…)
    data = rows(120, response_length_mean=lambda s: 50.0 if s < 60 else 10.0,
                reward_mean=lambda s: 0.3 if s < 60 else 0.8)
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []


def test_a_gradual_shortening_and_too_few_points_do_not_flag():
    # 200 → 130 tokens over 120 steps (verl's GSM8K reference runs shorten like this): level ≥ 0.65 × running
    _, suite = feed(rows(120, response_length_mean=lambda s: 200.0 - 70.0 * s / 119, reward_mean=0.5), ONLY)
    assert suite.episodes() == []
    # 15 points (< collapse_min_points 20) of a shrink to 8 tokens: no gradual verdict yet (8 > 0.1 × 50 = 5: not
    # abrupt; 8 > 2 tokens: not degenerate)
    _, suite = feed(rows(15, response_length_mean=lambda s: 50.0 if s < 8 else 8.0), ONLY)
    assert suite.episodes() == []


def test_no_reward_column_lets_the_length_decide():
    # 40 → 6 tokens (> 0.1 × 40 = 4: not abrupt; ≤ 0.25 × 40 = 10): level 6 from 62, opens at 64; no reward
    _, suite = feed(rows(90, response_length_mean=lambda s: 40.0 if s < 60 else 6.0), ONLY)
    assert spans(suite.episodes(), "length") == [("collapse", 64, 89, "warning")]


def test_a_blowup_while_the_reward_holds_is_growth_into_the_budget():
    # truncated 0.02 → 0.8 at 50 (a blow-up by the truncation rule from 52, opening at 54) with the reward flat at
    # 0.6: its level equals its best, 0 < max(0.05, 0.25 · 0.6) = 0.15 → the reward holds → info, to the end
    trunc = lambda s: 0.02 if s < 50 else 0.8  # noqa: E731
    data = rows(100, truncated_frac=trunc, response_length_mean=200.0, reward_mean=0.6)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 99, "info")]
    assert "while the reward has not stayed down" in suite.episodes()[0].message
    # the reward falls 0.6 → 0.4 at 70: its level (median of 5) is 0.4 from 72, 0.2 ≥ 0.15 below the best, and
    # the fall has stayed down once severity.sustain_levels = 5 levels in a row are below (72–76) → warning from
    # 76, info at 72–75. The truncation rule says critical from 67 (level 0.8 ≥ 0.7 and the mean of the last 20
    # points n · 0.8 + (20 − n) · 0.02 ≥ 14 → n ≥ 18); the severity gate lets it stand once 5 levels in a row are
    # below the best (72–76) and the fall has lasted 30 steps (72–101) → critical from 101.
    stream, _ = feed(rows(110, truncated_frac=trunc, response_length_mean=200.0,
                          reward_mean=lambda s: 0.6 if s < 70 else 0.4), ONLY)
    severity = {e.step_end: e.severity for e in stream if e.phase == "blowup"}
    assert [severity[s] for s in (71, 72, 75, 76, 100, 101)] == ["info", "info", "info", "warning", "warning",
                                                                 "critical"]


def test_a_reward_dip_beside_rising_truncation_is_no_fall():
    # truncated 0.02 → 0.8 at 50 (a blow-up from 52, opening at 54); the reward is 0.6 but 0.2 at steps 70–73.
    # Levels (median of 5): at 72 [.6 .6 .2 .2 .2] → 0.2, at 73 [.6 .2 .2 .2 .2] → 0.2, at 74 [.2 .2 .2 .2 .6] → 0.2,
    # at 75 [.2 .2 .2 .6 .6] → 0.2, at 76 [.2 .2 .6 .6 .6] → 0.6: four levels 0.4 ≥ 0.15 below the best 0.6, one
    # fewer than severity.sustain_levels = 5 → the reward never stayed down, the blow-up is info throughout (a
    # one-level test, before session 48, said warning at 72–75).
    dip = lambda s: 0.2 if 70 <= s <= 73 else 0.6  # noqa: E731
    data = rows(100, truncated_frac=lambda s: 0.02 if s < 50 else 0.8, response_length_mean=200.0, reward_mean=dip)
    stream, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "length") == [("blowup", 54, 99, "info")]
    at = {e.step_end: e for e in stream if e.phase == "blowup"}
    assert at[74].evidence["reward_now"] == 0.2 and at[74].evidence["reward_best"] == 0.6
