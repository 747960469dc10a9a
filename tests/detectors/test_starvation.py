"""Signal starvation on zero_std_group_frac (level = median of the last 5 points)."""

from __future__ import annotations

import pytest

from collapsewatch.alerts import event_message
from collapsewatch.detectors import DetectorConfig

from .series import GATE_30, feed, rows, spans

ONLY = DetectorConfig(enabled=("starvation",), severity=GATE_30)


def test_warning_then_critical_and_the_kind_of_groups():
    # 0.3 until 50, 0.85 until 80, then 1.0; all wrong. Level ≥ 0.8 from 52 (median of 0.3, 0.3, 0.85, 0.85, 0.85)
    # → opens at 52 (warning): the level is the confirmation (confirm_steps = 1).
    # Critical needs the mean of the last 20 points ≥ 0.95: with n points of 1.0 after 80 (step 79 + n) the
    # mean is 0.85 + 0.15 n / 20 — 0.9475 at n = 13 (step 92), 0.955 at n = 14 (step 93): critical from 93,
    # although the 5-point level reached 1.0 at 82. The reward fell from 0.5 to 0 at 50, far from its
    # best, so the severity gate lets critical through (a reward at 0 all along would be "at its best").
    frac = lambda s: 0.3 if s < 50 else (0.85 if s < 80 else 1.0)  # noqa: E731
    stream, suite = feed(rows(100, zero_std_group_frac=frac, correct_frac=0.0,
                              reward_mean=lambda s: 0.5 if s < 50 else 0.0), ONLY)
    assert spans(suite.episodes(), "starvation") == [("starvation", 52, 99, "critical")]
    sev = {e.step_end: e.severity for e in stream}
    assert sev[82] == sev[92] == "warning" and sev[93] == "critical"
    assert suite.episodes()[0].evidence["groups"] == "all-wrong"


def test_all_correct_groups_are_named_and_healthy_levels_do_not_flag():
    # 97 % of groups all-equal with 99 % of responses correct: the task is solved, not the policy lost → an
    # info episode (it would be critical by the level alone: the 20-point mean 0.97 ≥ 0.95). The level holds
    # from step 0, but is read from the run's third point on (a level of 3 points, ⌈5 / 2⌉) → opens at 2.
    _, suite = feed(rows(40, zero_std_group_frac=0.97, correct_frac=0.99), ONLY)
    assert suite.episodes()[0].evidence["groups"] == "all-correct"
    assert spans(suite.episodes(), "starvation") == [("starvation", 2, 39, "info")]
    # the same level with no correct response after the run had earned is the policy lost: correct_frac 0.4 and
    # 30 % all-equal groups until step 20, then 0.0 and 97 %. The z level is 0.97 from 22 (3 of 5 points), where the
    # correct_frac level is 0 → all-wrong; its best level 0.4 is above the floor 0 by ≥ max(0.05, 0.25 · 0.4) = 0.1:
    # earned, so no cold start → warning from 22. The rule's critical (20-point mean of z 0.97 ≥ 0.95 at step 39)
    # needs a reward fall to stand, and no reward is logged here, so the severity gate keeps a warning.
    _, suite = feed(rows(40, zero_std_group_frac=lambda s: 0.3 if s < 20 else 0.97,
                         correct_frac=lambda s: 0.4 if s < 20 else 0.0), ONLY)
    assert spans(suite.episodes(), "starvation") == [("starvation", 22, 39, "warning")]
    assert suite.episodes()[0].evidence["severity_gate"]["lowered_from"] == "critical"
    assert suite.episodes()[0].evidence["cold_start"] is False
    _, suite = feed(rows(100, zero_std_group_frac=lambda s: 0.95 if s % 10 == 0 else 0.4), ONLY)
    assert suite.episodes() == []


def test_a_short_run_of_starved_steps_is_a_warning_not_critical():
    # The corpus's false critical: 4 groups per step, so a few steps in a row with every group all-equal are
    # ordinary. 0.5 everywhere but steps 40–46 at 1.0: the 5-point level is 1.0 at 42–48 (≥ 0.8: opens at 42,
    # warning); the 20-point mean never exceeds (7 · 1.0 + 13 · 0.5) / 20 = 0.675.
    _, suite = feed(rows(80, zero_std_group_frac=lambda s: 1.0 if 40 <= s <= 46 else 0.5, correct_frac=0.0,
                         reward_mean=lambda s: 0.5 if s < 40 else 0.0), ONLY)
    assert [(p, sev) for p, _, _, sev in spans(suite.episodes(), "starvation")] == [("starvation", "warning")]


def _kind(**columns):
    _, suite = feed(rows(40, **columns), ONLY)
    [ep] = suite.episodes()
    return ep.evidence["groups"], ep.severity


def test_solved_or_starved_from_the_rewards_range_without_a_correctness_column():
    # z = 0.9 of groups all-equal, no correct_frac. lo = 0 (rewards never negative).
    # reward 0.9, std 0.3: hi = max(0.9, 0.9 + 0.3² / 0.9 = 1.0) = 1.0 (Bhatia–Davis), p = 0.9; the share of
    # all-equal groups at the top is ≥ (p − (1 − z)) / z = 0.8 / 0.9 = 0.89 ≥ 0.5 → all-correct, info.
    assert _kind(zero_std_group_frac=0.9, reward_mean=0.9, reward_std=0.3) == ("all-correct", "info")
    # reward 0.05, std 0.2: hi = 0.05 + 0.04 / 0.05 = 0.85, p = 0.05 / 0.85 = 0.059; that share is ≤ p / z = 0.065
    # < 0.5 → all-wrong, a warning (the 20-point mean 0.9 < critical_frac 0.95: not critical)
    assert _kind(zero_std_group_frac=0.9, reward_mean=0.05, reward_std=0.2) == ("all-wrong", "warning")
    # reward 0.5, std 0.5, z = 0.85: hi = 0.5 + 0.25 / 0.5 = 1.0, p = 0.5; the share lies in
    # [(0.5 − 0.15) / 0.85, 0.5 / 0.85] = [0.41, 0.59], which straddles 0.5 → cannot tell, info
    assert _kind(zero_std_group_frac=0.85, reward_mean=0.5, reward_std=0.5) == ("cannot tell", "info")
    # no reward and no correctness at all: cannot tell, info
    assert _kind(zero_std_group_frac=0.9) == ("cannot tell", "info")
    # a reward at 0 with no range (nothing ever earned): all-wrong, and a cold start (next test) → info
    assert _kind(zero_std_group_frac=0.9, reward_mean=0.0) == ("all-wrong", "info")


def test_a_reward_level_near_the_top_of_its_observed_range_is_solved():
    # no reward_std: the range is the levels' own, [0, 1.0] here (1.0 for steps 0–9, then 0.95). At step 39 the
    # level is 0.95, p = 0.95, z = 0.9: share ≥ (0.95 − 0.1) / 0.9 = 0.94 → all-correct, info
    assert _kind(zero_std_group_frac=0.9, reward_mean=lambda s: 1.0 if s < 10 else 0.95) == ("all-correct", "info")


def test_a_cold_start_is_info_until_the_run_has_earned():
    # A base model that solves nothing yet: reward 0.0 for steps 0–9, 0.004 at 10–14, then 0.3 from 15; 90 % of
    # groups all-equal until 20, then 30 %. Levels (median of 5) of the reward: 0 up to step 11, 0.004 at 12–16,
    # 0.3 from 17. At 2–16 the best level (≤ 0.004) is above the floor 0 by less than max(0.05, 0.25 · best) = 0.05:
    # nothing earned → the all-wrong groups are a cold start, info. From 17 the best 0.3 clears 0.05: earned — but the
    # groups no longer read all-wrong there: at 17–21 (z level still 0.9) the reward level 0.3 is the top of the range
    # its levels have shown (no reward_std: hi = 0.3), p = 1 → "solved", info. No warning anywhere.
    stream, suite = feed(rows(40, zero_std_group_frac=lambda s: 0.9 if s < 20 else 0.3,
                              reward_mean=lambda s: 0.0 if s < 10 else (0.004 if s < 15 else 0.3)), ONLY)
    assert all(e.severity == "info" for e in suite.episodes())
    at = {e.step_end: e.evidence for e in stream if e.detector == "starvation"}
    assert (at[2]["groups"], at[2]["cold_start"]) == ("all-wrong", True)
    assert (at[16]["groups"], at[16]["cold_start"]) == ("all-wrong", True)
    assert at[17]["groups"] == "all-correct"
    # the message and the detect table's sentence both say why it is info (one wording, starvation.reading)
    cold = next(e for e in stream if e.detector == "starvation" and e.step_end == 16)
    assert cold.message.endswith("(mostly all-wrong; nothing earned yet: a cold start, not a collapse)")
    assert "(no GRPO signal; mostly all-wrong; nothing earned yet: a cold start)" in event_message(cold)
    # the same run after it had earned (reward 0.3 for steps 0–19, then 0.0 with 90 % all-equal groups): starved,
    # a warning from 22 (z level 0.9 once 20–22 are in it; reward level 0 < z / 2 of its range → all-wrong)
    _, suite = feed(rows(40, zero_std_group_frac=lambda s: 0.3 if s < 20 else 0.9,
                         reward_mean=lambda s: 0.3 if s < 20 else 0.0), ONLY)
    assert [(e.step_start, e.severity, e.evidence["cold_start"]) for e in suite.episodes()] == [(22, "warning", False)]


def test_without_a_zero_std_share_correct_frac_at_0_or_1_gives_its_lower_bound():
    # No zero_std_group_frac logged. correct_frac 0.3 (reward 0.3) for steps 0–9, then 0.0 (reward 0.0): a step
    # whose every response is wrong has only all-equal groups (share 1); the others are read as 0 (not known). The
    # lower bound's 5-point level: at 11 the points 7–11 are 0, 0, 0, 1, 1 → 0; at 12 (8–12: 0, 0, 1, 1, 1) → 1 ≥
    # warn_frac 0.8 → opens at 12. Groups from correct_frac's level (0 < 0.5): all-wrong; the best reward level 0.3
    # is above the floor 0 by ≥ max(0.05, 0.25 · 0.3) = 0.075: earned, no cold start → a warning. Critical needs the
    # 20-point mean ≥ 0.95 (at 28, points 9–28: 19/20 = 0.95), and then the severity gate: the reward has been below
    # its best for 18 steps at 28 (from 10), 19 at 29 — fewer than the 30 a critical needs → a warning to the end.
    _, suite = feed(rows(30, correct_frac=lambda s: 0.3 if s < 10 else 0.0,
                         reward_mean=lambda s: 0.3 if s < 10 else 0.0), ONLY)
    (ep,) = [e for e in suite.episodes() if e.detector == "starvation"]
    assert (ep.step_start, ep.step_end, ep.severity) == (12, 29, "warning")
    assert ep.evidence["zero_std_from"] == "correct_frac"
    assert ep.evidence["groups"] == "all-wrong" and ep.evidence["zero_std_group_frac_level"] == 1.0
    # correct_frac strictly between 0 and 1 tells nothing of the share: nothing fires
    _, quiet = feed(rows(30, correct_frac=0.02, reward_mean=0.02), ONLY)
    assert spans(quiet.episodes(), "starvation") == []
    # a logged share wins over the bound: 0.1 logged with correct_frac 0 → no starvation
    _, logged = feed(rows(30, zero_std_group_frac=0.1, correct_frac=0.0, reward_mean=0.0), ONLY)
    assert spans(logged.episodes(), "starvation") == []


def test_one_group_a_step_reads_the_share_of_its_last_20_groups():
    # One prompt a step: the share is 0 or 1 at every point. 60 % of single groups all-equal (1 at steps ≡ 2, 3, 4
    # mod 5), correct_frac 0.2 (all-wrong groups, earned: 0.2 − 0 ≥ max(0.05, 0.25 · 0.2) = 0.05, no cold start).
    # The old 5-point median: any 5 points in a row hold 3 ones → median 1 ≥ 0.8 → a warning from step 4, all run.
    # Now: both 0 and 1 by step 2 → one group a step; the level is the mean of the last 20 points, read from 10
    # (step 9): 0.6 at every step from 9 (each 5 in a row hold 3 ones) → < 0.8: nothing.
    _, suite = feed(rows(100, zero_std_group_frac=lambda s: 1.0 if s % 5 >= 2 else 0.0, correct_frac=0.2), ONLY)
    assert spans(suite.episodes(), "starvation") == []
    # A starved one: 1 at even steps until 39 (50 %), then 1 at every step; correct_frac 0.3, then 0 from 40 (earned
    # before: no cold start; its 5-point level is 0 from 42 → all-wrong). At step t ≥ 40 the last 20 points are
    # t − 19 … t: t − 39 ones from 40, plus the even steps of t − 19 … 39. t = 50: 11 + 4 (32, 34, 36, 38) = 15 →
    # 0.75; t = 51: 12 + 4 = 16 → 0.8 ≥ warn_frac: opens at 51. Critical by the rule at 57 (18 + 1 (38) = 19 → 0.95
    # ≥ critical_frac), but no reward is logged, so the severity gate keeps a warning.
    frac = lambda s: (1.0 if s % 2 == 0 else 0.0) if s < 40 else 1.0  # noqa: E731
    stream, suite = feed(rows(80, zero_std_group_frac=frac, correct_frac=lambda s: 0.3 if s < 40 else 0.0), ONLY)
    assert spans(suite.episodes(), "starvation") == [("starvation", 51, 79, "warning")]
    first = next(e for e in stream if e.detector == "starvation")
    assert (first.step_end, first.value, first.window_steps) == (51, 0.8, 20)
    assert first.evidence["one_group_a_step"] is True and first.evidence["groups"] == "all-wrong"
    assert "(one group a step: 16 of the last 20)" in first.message
    # the same shares from a run whose share has been 1 at every point so far (no 0 yet: not known to be one group)
    # keep the 5-point median: 1.0 from step 0, correct_frac and reward 0.3 until step 4, then 0 → read from the
    # third point (step 2: level 1.0; correct_frac's level 0.3 < 0.5, all-wrong; the reward's best level 0.3 is
    # above its floor by ≥ 0.075: earned, no cold start) → a warning at once
    _, early = feed(rows(10, zero_std_group_frac=1.0, correct_frac=lambda s: 0.3 if s < 5 else 0.0,
                         reward_mean=lambda s: 0.3 if s < 5 else 0.0), ONLY)
    assert [(e.step_start, e.severity, e.evidence["one_group_a_step"]) for e in early.episodes()] == [
        (2, "warning", False)]


def _shares(values: list[float]):
    from collapsewatch.detectors.history import History, normalise

    h = History(200)
    for step, v in enumerate(values):
        h.push(normalise({"step": step, "zero_std_group_frac": v}, {"zero_std_group_frac": "num"}))
    return h


def test_how_many_groups_a_point_of_the_share_stands_for():
    import numpy as np

    from collapsewatch.detectors.signals import groups_a_step

    cfg = DetectorConfig()
    # 0 and 1 only: one group a step (session 32's rule)
    assert groups_a_step(_shares([0.0, 1.0, 1.0]), cfg) == 1
    # halves: two groups; thirds logged as float32 (1/3 → 0.33333334, × 3 off by 3e-8, within 1e-6): three
    assert groups_a_step(_shares([0.5, 1.0, 0.0]), cfg) == 2
    third, two = float(np.float32(1 / 3)), float(np.float32(2 / 3))
    assert groups_a_step(_shares([third, 1.0, two, 0.0]), cfg) == 3
    # quarters: ⌈20 / 4⌉ = 5 points is the 5-point level already → None (many groups: the rule as before); so is a
    # share of no grain (0.3: a multiple of 1/10 only) and one never strictly between 0 and 1 without both ends
    assert groups_a_step(_shares([0.25, 0.5, 1.0]), cfg) is None
    assert groups_a_step(_shares([0.3, 0.5]), cfg) is None
    assert groups_a_step(_shares([1.0, 1.0, 1.0]), cfg) is None
    # a half seen once among thirds is no multiple of 1/3: the least g both fit is 6 > 3 → None
    assert groups_a_step(_shares([third, 0.5, 1.0]), cfg) is None


def test_two_groups_a_step_read_the_share_of_their_last_20_groups():
    # Two prompts a step: shares 0.5, 1, 1, 1, 0 repeating (70 % of groups all-equal), correct_frac 0.2 (all-wrong,
    # earned: no cold start). The 5-point median: any 5 points in a row hold three 1s → 1 ≥ 0.8 → a warning all run.
    # Now: 0.5 at step 0 → two groups a step; the level is the mean of the last ⌈20 / 2⌉ = 10 points, read from 5
    # (step 4): 3.5/5 = 0.7, 4/6, 5/7, 6/8, 7/9 = 0.78 at step 8, then 7/10 = 0.7 at every step → < 0.8: nothing
    cycle = [0.5, 1.0, 1.0, 1.0, 0.0]
    _, suite = feed(rows(60, zero_std_group_frac=lambda s: cycle[s % 5], correct_frac=0.2), ONLY)
    assert spans(suite.episodes(), "starvation") == []
    # A starved one: 0.5 until step 19, then 1; correct_frac 0.3, then 0 from 20. For 20 ≤ t ≤ 29 the last 10 points
    # hold t − 19 ones and 29 − t halves: level (t − 19 + (29 − t)/2) / 10 = (t/2 − 4.5) / 10 ≥ 0.8 ⇔ t ≥ 25 → opens
    # at 25 at 0.8 (16 of the last 20 groups), a warning to the end (no reward logged: the gate keeps a warning).
    # The 5-point median would have opened at 22 (three 1s of 5): the level of 20 groups waits 3 steps longer.
    stream, suite = feed(rows(40, zero_std_group_frac=lambda s: 0.5 if s < 20 else 1.0,
                              correct_frac=lambda s: 0.3 if s < 20 else 0.0), ONLY)
    assert spans(suite.episodes(), "starvation") == [("starvation", 25, 39, "warning")]
    first = next(e for e in stream if e.detector == "starvation")
    assert (first.value, first.window_steps) == (0.8, 10)
    assert first.evidence["groups_a_step"] == 2 and first.evidence["one_group_a_step"] is False
    assert "(2 groups a step: 16 of the last 20)" in first.message


def test_few_groups_a_step_read_the_reward_over_the_same_groups_as_the_share():
    # One prompt a step (a reward of 1.2 = format 0.2 + correct 1.0): a mixed group (z 0, reward 0.8) at every step
    # ≡ 0 mod 5, an all-correct group (z 1, 1.2) at the others — but all-wrong, format only (z 1, 0.2) at 36–38.
    # At step 38 the share is the mean of steps 19–38: 16 of 20 all-equal = 0.8 ≥ warn_frac. The range: lo = 0
    # (min(0, lowest 5-point median 0.2)), hi = 1.2 (the highest 5-point median).
    # The reward over those same 20 groups: 4 mixed (20, 25, 30, 35) × 0.8 + 3 × 0.2 + 13 × 1.2 = 3.2 + 0.6 + 15.6
    # = 19.4 → mean 0.97, position p = 0.97 / 1.2 = 0.8083; all-correct share ≥ (p − (1 − 0.8)) / 0.8 = 0.760 ≥ 0.5:
    # all-correct — info. A 5-point median (steps 34–38: 1.2, 0.8, 0.2, 0.2, 0.2 → 0.2, p = 0.1667) read beside the
    # 20-group share gives ≤ 0.1667 / 0.8 = 0.208 < 0.5: "all-wrong", a warning on a solved run's three format-only
    # steps — the bound holds only for a position and a share of the same groups.
    def reward(s: int) -> float:
        return 0.8 if s % 5 == 0 else 0.2 if s in (36, 37, 38) else 1.2

    _, suite = feed(rows(39, zero_std_group_frac=lambda s: 0.0 if s % 5 == 0 else 1.0, reward_mean=reward), ONLY)
    eps = [e for e in suite.episodes() if e.detector == "starvation"]
    assert {e.severity for e in eps} == {"info"}
    last = eps[-1]
    assert last.step_end == 38 and last.evidence["groups"] == "all-correct" and last.evidence["one_group_a_step"]
    assert last.evidence["reward_level"] == pytest.approx(0.97)
    assert last.evidence["solved_share_low"] == pytest.approx((0.97 / 1.2 - 0.2) / 0.8)
