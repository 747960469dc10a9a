"""Entropy collapse and blow-up on step functions (level = median of the last 5 points)."""

from __future__ import annotations

import dataclasses

import pytest

from collapsewatch.detectors import DetectorConfig
from collapsewatch.detectors.config import EntropyConfig
from collapsewatch.detectors.entropy import _tokens

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("entropy",))


def test_collapse_to_near_zero():
    # 0.5 until 100, then 0.01: the level is 0.01 once 3 of the last 5 points are (t = 102); the bar is
    # max(collapse_abs 0.01, 0.1 · peak 0.5) = 0.05 → holds from 102, opens at 104 (3rd hold). At t = 199 the
    # history holds 100 points of each: median 0.255, the 0.5 levels count as a blow-up (≥ 1.5 × 0.255) and
    # leave the normal peak, which becomes 0.01: the bar is max(0.01, 0.001) = 0.01 and 0.01 is not below it,
    # so the episode's last step is 198.
    _, suite = feed(rows(200, entropy_mean=lambda s: 0.5 if s < 100 else 0.01), ONLY)
    assert spans(suite.episodes(), "entropy") == [("collapse", 104, 198, "warning")]
    assert suite.episodes()[0].threshold == 0.05


def test_an_entropy_collapse_while_the_reward_holds_is_info_where_no_correctness_is_logged():
    # test_collapse_to_near_zero's fall (0.5 until 100, then 0.01; the episode 104–198) beside a reward. The severity
    # reads signals.reward_drop over 5-point levels: the latest level against the highest of the last 150 steps, a
    # drop when it is lower by max(reward_drop_min 0.05, reward_drop_frac 0.25 × |best|) = 0.15 for a best of 0.6.
    # (A reward at the top of its range reads as a task it solves — _solved, the test before this one — info too.)
    fall = {"entropy_mean": lambda s: 0.5 if s < 100 else 0.01}
    # (1) reward 0.6 until 90, then 0.5: not solved (position (0.5 − 0) / (0.6 − 0) = 0.83 < solved_correct 0.95),
    # and no drop (0.1 < 0.15) → a converging policy, info at every step
    _, held = feed(rows(200, **fall, reward_mean=lambda s: 0.6 if s < 90 else 0.5), ONLY)
    assert spans(held.episodes(), "entropy") == [("collapse", 104, 198, "info")]
    assert held.episodes()[0].evidence["reward_dropped"] is False
    assert held.episodes()[0].evidence["solved"] == ""
    assert "the reward holds (level 0.5, its best 0.6)" in held.episodes()[0].message
    # (2) reward 0.6 until 90, then 0.3: at 104 the level is 0.3, the best 0.6 (steps 0–89, inside 150 steps):
    # drop 0.3 ≥ 0.15 → warning
    _, drops = feed(rows(200, **fall, reward_mean=lambda s: 0.6 if s < 90 else 0.3), ONLY)
    assert spans(drops.episodes(), "entropy") == [("collapse", 104, 198, "warning")]
    assert drops.episodes()[0].evidence["reward_dropped"] is True
    # (3) the holding reward of (1) with correct_frac logged at 0.6 (level < solved_correct 0.95): correctness tells a
    # plateau short of solved — a deterministic policy wrong on 40 % of its answers — so a warning, reward or not
    _, plateau = feed(rows(200, **fall, reward_mean=lambda s: 0.6 if s < 90 else 0.5, correct_frac=0.6), ONLY)
    assert spans(plateau.episodes(), "entropy") == [("collapse", 104, 198, "warning")]
    # (4) the early form (test_an_entropy_collapse_in_the_first_points…: flagged at step 6) with reward 0.6 for
    # steps 0–4, 0.5 after: at step 6 the reward has 7 points, fewer than the 2 × 5 a drop test needs — cannot tell
    # → warning (an episode keeps the worst severity it reached). The same shape 10 steps later (entropy 1.0 at
    # steps 0–9 first; start = the highest of the first 5 points, 1.0; median(0.3, 0.08, 0.05) = 0.08 ≤ 0.1 at 16):
    # 17 reward points, best level 0.6 (steps 0–4), now 0.5 → no drop, not solved → info
    values = [0.6, 1.0, 0.8, 0.5, 0.3, 0.08, 0.05, 0.04, 0.04, 0.04, 0.04, 0.04]
    reward = {"reward_mean": lambda s: 0.6 if s < 5 else 0.5}
    _, early = feed(rows(12, entropy_mean=values, **reward), ONLY)
    assert spans(early.episodes(), "entropy") == [("collapse", 6, 11, "warning")]
    _, known = feed(rows(22, entropy_mean=[1.0] * 10 + values, **reward), ONLY)
    assert spans(known.episodes(), "entropy") == [("collapse", 16, 21, "info")]


def test_blowup_until_the_history_median_catches_up():
    # 0.5 until 100, then 1.5: the bar is 1.5 × the median over the history (≤ 200 rows). The level 1.5 ≥ 0.75
    # from 102 → opens at 104. Rows 0…180 hold 100 points at 0.5 and 81 at 1.5: the median is still 0.5,
    # so the episode lasts to the end (at 200 rows with ≥ 100 at 1.5 it would close). No entropy_mean_correct,
    # reward or L: the rule cannot tell exploration from collapse, and nothing shows harm → info.
    _, suite = feed(rows(181, entropy_mean=lambda s: 0.5 if s < 100 else 1.5), ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "info")]


def test_blowup_without_correct_entropy_is_a_warning_only_once_the_reward_drops():
    # The same blow-up, no entropy_mean_correct, reward 0.6 until 50 then 0.4. The drop test reads 20-point
    # levels: at 104 the first level (steps 0-19) is 0.6, the last 0.4 → drop 0.2 ≥ max(0.05, 0.25 · 0.6) = 0.15
    # → warning (it stays up to 180: the window 31-180 still holds the level ending at 50, 0.6). The same run
    # with a reward that holds at 0.6: info, as above.
    blow = {"entropy_mean": lambda s: 0.5 if s < 100 else 1.5}
    _, suite = feed(rows(181, **blow, reward_mean=lambda s: 0.6 if s < 50 else 0.4), ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "warning")]
    assert suite.episodes()[0].evidence["reward_dropped"] is True
    _, suite = feed(rows(181, **blow, reward_mean=0.6), ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "info")]


BLOWUP = {"entropy_mean": lambda s: 0.5 if s < 100 else 1.5}  # the blow-up above: opens at 104


def test_blowup_in_wrong_answers_while_reward_climbs_is_info():
    # Issue 24's run: mean entropy 0.35 → 1.72 while the reward climbs to 0.80 and the correct responses stay
    # sharp. entropy_mean_correct 0.2 throughout (level 0.2 < 1.5 × median 0.2), reward rising 0.3 → 0.66: no
    # reward drop, no L → the blow-up is the incorrect responses' → info, never critical.
    data = rows(181, **BLOWUP, entropy_mean_correct=0.2, reward_mean=lambda s: 0.3 + 0.002 * s)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "info")]
    assert suite.episodes()[0].evidence["policy_degrades"] == []


# The reward falls from 0.6 to 0.4 at step 50 and stays there: every 5-point level from step 52 is 0.2 below the
# best 0.6 ≥ the margin max(0.05, 0.25 · 0.6) = 0.15, so from step 56 the last 5 levels are all down — the severity
# gate's sustained fall — and a critical the entropy rule gives from 104 on stays critical.
REWARD_FELL = {"reward_mean": lambda s: 0.6 if s < 50 else 0.4}


def test_blowup_of_the_correct_responses_too_is_critical():
    # correct responses' entropy 0.2 → 0.6 at step 100 (level 0.6 ≥ 1.5 × median 0.2 from 102 on)
    data = rows(181, **BLOWUP, **REWARD_FELL, entropy_mean_correct=lambda s: 0.2 if s < 100 else 0.6)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "critical")]
    assert suite.episodes()[0].evidence["policy_degrades"] == ["correct responses' entropy blown up too"]


def test_blowup_with_a_reward_drop_alone_is_a_warning():
    # correct entropy sharp, L not recorded, the reward falls 0.6 → 0.4 at step 50. The drop test reads 20-point
    # levels (severity_smooth_steps) over the last 150 points: at step 104 the window is steps 0-104, its first
    # level (steps 0-19) is 0.6, the last 0.4: drop 0.2 ≥ max(0.05, 0.25 × 0.6) = 0.15; at step 180 the window is
    # 31-180 and the level ending at 50 (nineteen 0.6, one 0.4) is still 0.6. A reward drop alone is a warning
    # (the noisy rewards of the natural corpus's learning run): the policy's own quantities hold.
    data = rows(181, **BLOWUP, entropy_mean_correct=0.2, reward_mean=lambda s: 0.6 if s < 50 else 0.4)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "warning")]
    ev = suite.episodes()[0].evidence
    assert (ev["policy_degrades"], ev["reward_dropped"], ev["reward"]["drop"]) == ([], True, pytest.approx(0.2))


def test_a_five_point_reward_dip_is_not_a_drop():
    # one bad stretch of 8 points (0.6 → 0.2 at steps 120-127) inside the blow-up: a 5-point median falls to 0.2
    # (drop 0.4 ≥ 0.15), the 20-point median never does (at most 8 of 20 points are 0.2) → no drop, info
    data = rows(181, **BLOWUP, entropy_mean_correct=0.2, reward_mean=lambda s: 0.2 if 120 <= s < 128 else 0.6)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "info")]
    smooth5 = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(severity_smooth_steps=5))
    _, suite5 = feed(data, smooth5)  # the old 5-point level: a warning (a critical before this change)
    assert spans(suite5.episodes(), "entropy") == [("blowup", 104, 180, "warning")]


def test_blowup_with_pooled_L_falling_is_critical():
    # correct entropy sharp, reward fell and stayed down; the pooled L (20 correct tokens a step) falls
    # 0.01 nats/token per step from step 80: over the 30-point window the change is −0.3 ≤ −0.05 (exact line: CI 0)
    data = rows(181, **BLOWUP, **REWARD_FELL, entropy_mean_correct=0.2, model_tokens_correct=20.0,
                logp_old_token_mean_correct=lambda s: -0.1 if s < 80 else -0.1 - 0.01 * (s - 80))
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "critical")]
    assert suite.episodes()[0].evidence["policy_degrades"] == ["L (pooled) falling"]


def test_healthy_decline_and_a_one_step_spike_do_not_flag():
    # entropy 1.0 → 0.4 linearly (never below 0.1 · peak), one step at 3.0: the 5-point median ignores it
    data = rows(200, entropy_mean=lambda s: 3.0 if s == 150 else 1.0 - 0.003 * s)
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []


def test_too_few_points_give_no_verdict():
    _, suite = feed(rows(19, entropy_mean=0.001), ONLY)  # min_points 20
    assert suite.episodes() == []


def test_an_entropy_collapse_in_the_first_points_is_flagged_before_the_history_fills():
    # 12 points, fewer than min_points (20): only the early rule reads the collapse. The start is the highest of the
    # first smooth_steps (5) points, 1.0, so the bar is collapse_frac 0.1 × 1.0 = 0.1. The level is the median of the
    # last early_points (3) points: 0.8 (t=2), 0.8, 0.5, 0.3 (t=5), then median(0.3, 0.08, 0.05) = 0.08 ≤ 0.1 at t=6:
    # flagged there (immediate: the median of 3 is its confirmation) and held to the last point.
    values = [0.6, 1.0, 0.8, 0.5, 0.3, 0.08, 0.05, 0.04, 0.04, 0.04, 0.04, 0.04]
    _, suite = feed(rows(12, entropy_mean=values), ONLY)
    assert spans(suite.episodes(), "entropy") == [("collapse", 6, 11, "warning")]
    assert suite.episodes()[0].threshold == pytest.approx(0.1)
    # on a task it solves (correct_frac 1.0) the same fall is a converged policy: info
    _, solved = feed(rows(12, entropy_mean=values, correct_frac=1.0), ONLY)
    assert spans(solved.episodes(), "entropy") == [("collapse", 6, 11, "info")]
    # a run that starts that low is not falling (bar 0.1 × 0.04); one low point among high ones is no level
    # (median(1.0, 1.0, 0.05) = 1.0); early_points 0 turns the rule off
    assert feed(rows(12, entropy_mean=0.04), ONLY)[1].episodes() == []
    assert feed(rows(12, entropy_mean=[1.0, 1.0, 1.0, 0.05] + [1.0] * 8), ONLY)[1].episodes() == []
    off = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(early_points=0))
    assert feed(rows(12, entropy_mean=values), off)[1].episodes() == []
    with pytest.raises(ValueError, match="early_points"):
        EntropyConfig(early_points=-1)


def test_return_to_normal_after_a_blowup_is_not_a_collapse():
    # 0.3 (normal), a blow-up to 5.0 for steps 60–99, then back to 0.3. A peak taken over every level would put the
    # collapse bar at 0.1 · 5.0 = 0.5 > 0.3 and flag the recovery; the normal peak excludes levels ≥ 1.5 × median
    # (median 0.3 → levels ≥ 0.45), so the bar stays max(0.05, 0.1 · 0.3) = 0.05 and only the blow-up is flagged.
    data = rows(160, entropy_mean=lambda s: 5.0 if 60 <= s < 100 else 0.3)
    _, suite = feed(data, ONLY)
    assert sorted(p for p, *_ in spans(suite.episodes(), "entropy")) == ["blowup", "diffuse"]  # 5 nats: diffuse too


def test_diffuse_output_needs_no_history_and_two_points():
    # entropy 0.7 for steps 0–5, then 9.0 (over the ceiling 2.0 nats) from 6 on: the last 2 points are both over
    # it from step 7 (6 and 7) → a warning that opens at 7, immediate (no confirm_steps, no min_points: the
    # history holds 8 points). The blow-up rule (min_points 20) says nothing before step 19.
    data = rows(12, entropy_mean=lambda s: 0.7 if s < 6 else 9.0)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "entropy") == [("diffuse", 7, 11, "warning")]
    ev = suite.episodes()[0]
    assert ev.threshold == 2.0 and ev.value == 9.0
    # at step 11 the last 5 points (7–11) are all 9.0: over the bar on 5 of 5; e^9 = 8103.08
    assert ev.message == ("diffuse output: entropy over 2 nats on 5 of the last 5 points (up to 9: as random as a "
                          "uniform pick among 8,103 tokens per position; now 9)")
    # one point over the bar is a spike, not output: 0.7 everywhere but step 6 (9.0) → nothing
    assert feed(rows(12, entropy_mean=lambda s: 9.0 if s == 6 else 0.7), ONLY)[1].episodes() == []
    # at the ceiling is not over it: 0.7 then 2.0 from step 6 → nothing; 2.01 → diffuse from step 7 as above
    assert feed(rows(12, entropy_mean=lambda s: 0.7 if s < 6 else 2.0), ONLY)[1].episodes() == []
    at = rows(12, entropy_mean=lambda s: 0.7 if s < 6 else 2.01)
    assert spans(feed(at, ONLY)[1].episodes(), "entropy") == [("diffuse", 7, 11, "warning")]


def test_an_open_diffuse_episode_holds_over_a_point_or_two_under_the_bar():
    # 0.7 until 5, 9.0 at 6 and 7 (opens at 7), 0.7 at 8, 9.0 at 9, then 0.7. Once open it holds while any of the
    # last 5 points is over 2.0: at 13 the window 9–13 still holds step 9; from 14 on none → 5 misses (14–18) end it,
    # its last step 13. One episode, not two: without the hold it would end at 7 (8 and 9 each have a point under the
    # bar among their last 2) and 9 alone (one point) would not reopen it.
    data = rows(31, entropy_mean=lambda s: 9.0 if s in (6, 7, 9) else 0.7)
    assert spans(feed(data, ONLY)[1].episodes(), "entropy") == [("diffuse", 7, 13, "warning")]


def test_a_run_that_starts_diffuse_is_judged_against_its_start():
    # entropy 3.0 from step 0 (a tiny model, a high temperature): the start (median of the first 5 points) is 3.0,
    # the bar max(2.0, 1.5 · 3.0) = 4.5 → nothing at 3.0; a rise to 5.0 from step 10 is over it from step 11.
    assert feed(rows(12, entropy_mean=3.0), ONLY)[1].episodes() == []
    data = rows(14, entropy_mean=lambda s: 3.0 if s < 10 else 5.0)
    episodes = feed(data, ONLY)[1].episodes()
    assert spans(episodes, "entropy") == [("diffuse", 11, 13, "warning")] and episodes[0].threshold == 4.5


def test_diffuse_output_settings():
    off = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(ceiling=0))  # 0 turns it off
    assert feed(rows(12, entropy_mean=9.0), off)[1].episodes() == []
    three = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(ceiling_points=3))  # points 4, 5, 6 → 6
    data = rows(12, entropy_mean=lambda s: 0.7 if s < 4 else 9.0)
    assert spans(feed(data, three)[1].episodes(), "entropy") == [("diffuse", 6, 11, "warning")]
    with pytest.raises(ValueError, match="entropy.ceiling_points"):
        EntropyConfig(ceiling_points=0)
    with pytest.raises(ValueError, match="entropy.ceiling must be ≥ 0"):
        EntropyConfig(ceiling=-1.0)


def test_near_zero_entropy_on_a_task_it_solves_is_a_converged_policy():
    # entropy 0.5 until step 5, then 1e-4 (< degenerate_floor 1e-3). With correct_frac 1.0 (level 1.0 ≥
    # solved_correct 0.95) the policy is converged: degenerate at info, opening at 5 (immediate). The collapse: before
    # min_points (20) points the early rule reads the median of the last 3 points, median(0.5, 1e-4, 1e-4) = 1e-4 at
    # t = 6, ≤ 0.1 × 0.5 (the highest of the first 5 points before the window, 0–3) → flagged at 6 (immediate); the
    # regular rule (bar max(0.01, 0.1 · 0.5) = 0.05) holds it from 19 on → one episode, info.
    solved = rows(30, entropy_mean=lambda s: 0.5 if s < 5 else 1e-4, reward_mean=1.0, correct_frac=1.0)
    assert spans(feed(solved, ONLY)[1].episodes(), "entropy") == [("degenerate", 5, 29, "info"),
                                                                   ("collapse", 6, 29, "info")]
    # the same entropy with correct_frac 0.9 (< 0.95: a task not solved, exploration gone): degenerate output,
    # critical; the collapse a warning
    wrong = rows(30, entropy_mean=lambda s: 0.5 if s < 5 else 1e-4, reward_mean=0.9, correct_frac=0.9)
    assert spans(feed(wrong, ONLY)[1].episodes(), "entropy") == [("degenerate", 5, 29, "critical"),
                                                                  ("collapse", 6, 29, "warning")]
    # no correctness column: the reward's place in its range tells (next test). A constant reward 1.0 reads as the
    # top of its range [min(0, 1.0), 1.0] = [0, 1], as the starvation rule reads all-correct groups: info; a constant
    # reward at its floor (0.0: range 0 < drop_needed 0.05) tells nothing: critical
    top = rows(30, entropy_mean=lambda s: 0.5 if s < 5 else 1e-4, reward_mean=1.0)
    assert spans(feed(top, ONLY)[1].episodes(), "entropy")[0] == ("degenerate", 5, 29, "info")
    floor = rows(30, entropy_mean=lambda s: 0.5 if s < 5 else 1e-4, reward_mean=0.0)
    assert spans(feed(floor, ONLY)[1].episodes(), "entropy")[0] == ("degenerate", 5, 29, "critical")


def test_without_correctness_a_reward_at_the_top_of_its_range_reads_as_solved():
    # One prompt × 8 answers a step (a TRL arithmetic run): reward 1.2 when all 8 are right, 0.2 otherwise. Steps 0–9
    # alternate 1.2 (even) / 0.2 (odd) at entropy 0.3; from step 10 entropy 1e-4 (< degenerate_floor 1e-3).
    # At 10: the reward's points spread 1.2 − 0.2 = 1.0 ≥ drop_needed(1.2) = max(0.05, 0.25 · 1.2) = 0.3, so the
    # reward tells; its range is [min(0, lowest level), highest level] = [0, 1.2] (the level of 6–10 is the median of
    # 1.2, 0.2, 1.2, 0.2, 1.2 = 1.2); position of the step's reward (1.2 − 0) / 1.2 = 1 ≥ solved_correct 0.95 →
    # converged, info. The collapse — early: median(0.3, 1e-4, 1e-4) = 1e-4 at 11 ≤ 0.1 × 0.3 (the first points
    # before the window 9–11), flagged at 11; the regular rule (bar max(0.01, 0.03)) holds it from 19 — reads the
    # reward level (1.2): info too.
    def reward(after):
        return lambda s: after if s >= 10 else (1.2 if s % 2 == 0 else 0.2)

    def entropy(s):
        return 0.3 if s < 10 else 1e-4

    sure_right = rows(30, entropy_mean=entropy, reward_mean=reward(1.2))
    assert spans(feed(sure_right, ONLY)[1].episodes(), "entropy") == [("degenerate", 10, 29, "info"),
                                                                       ("collapse", 11, 29, "info")]
    # sure and wrong: the same entropy with reward 0.2 from 10 → position 0.2 / 1.2 = 0.17 < 0.95 → degenerate
    # output, critical; the collapse a warning (reward level 0.2)
    sure_wrong = rows(30, entropy_mean=entropy, reward_mean=reward(0.2))
    assert spans(feed(sure_wrong, ONLY)[1].episodes(), "entropy") == [("degenerate", 10, 29, "critical"),
                                                                       ("collapse", 11, 29, "warning")]
    # a run that starts solved (1.2 on every step, the range [0, 1.2]) reads so from its first point; no reward at
    # all tells nothing: critical
    flat = rows(30, entropy_mean=entropy, reward_mean=1.2)
    assert spans(feed(flat, ONLY)[1].episodes(), "entropy")[0] == ("degenerate", 10, 29, "info")
    bare = rows(30, entropy_mean=entropy)
    assert spans(feed(bare, ONLY)[1].episodes(), "entropy")[0] == ("degenerate", 10, 29, "critical")
    # solved_reward off: only correct_frac tells → critical
    off = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(solved_reward=False))
    assert spans(feed(sure_right, off)[1].episodes(), "entropy")[0] == ("degenerate", 10, 29, "critical")
    # the step's own reward decides the degenerate point: 1e-4 on steps whose 8 answers were not all right (1.075,
    # position 0.896 < 0.95) is degenerate output — the episode opened at 10 as info is a warning at 11 (the median
    # of the last degenerate_points = 10 points, 2–11: eight 0.3 and two 1e-4, is 0.3, not under the floor) and
    # critical at 15 (points 6–15: four 0.3, six 1e-4 → the 5th and 6th smallest are 1e-4; at 14, five and five →
    # (1e-4 + 0.3) / 2 ≈ 0.15)
    one = rows(16, entropy_mean=entropy, reward_mean=lambda s: 1.075 if s >= 11 else reward(1.2)(s))
    (ep,) = [e for e in feed(one, ONLY)[1].episodes() if e.phase == "degenerate"]
    assert (ep.step_start, ep.severity, ep.evidence["reached"]) == (10, "critical", {"info": 10, "warning": 11,
                                                                                      "critical": 15})


def test_a_degenerate_point_among_normal_ones_is_a_warning_and_a_degenerate_start_a_warning_at_once():
    # entropy 0.05 (a sharp policy) with single points at 1e-4 (< degenerate_floor 1e-3) at steps 10 and 25: one
    # group answered the same way. The median of the last 10 points (9 × 0.05 and the 1e-4) is 0.05 ≥ the floor →
    # each opens a degenerate warning at once (immediate), none critical; the first ends after 10 misses (11–20,
    # exit_patience 10), so 25 opens a second one (a dip at 20, 9 misses on, would have extended the first).
    dips = rows(35, entropy_mean=lambda s: 1e-4 if s in (10, 25) else 0.05)
    assert [(p, a, sev) for p, a, _, sev in spans(feed(dips, ONLY)[1].episodes(), "entropy")] == [
        ("degenerate", 10, "warning"), ("degenerate", 25, "warning")]
    # a run degenerate from its first point: flagged at step 0, no history needed (issue 31's first-10 collapses),
    # but no point since the run's first was ≥ the floor (History.highest 1e-4 < 1e-3): a run that never started,
    # a warning that says so (severity.NEVER_STARTED), though the median of its last points is under the floor too
    start = rows(5, entropy_mean=1e-4)
    (ep,) = [e for e in feed(start, ONLY)[1].episodes() if e.phase == "degenerate"]
    assert (ep.step_start, ep.step_end, ep.severity, ep.evidence["since_start"]) == (0, 4, "warning", True)
    assert "never started" in ep.message
    # the same five points after two at 0.5: the run was out of it before → critical once the median of its last
    # points is under the floor (at step 5: 0.5, 0.5, 1e-4 ×4 → the 3rd and 4th of 6 sorted are 1e-4 → 1e-4;
    # at 4, 0.5 ×2 and 1e-4 ×3 → median 1e-4 too, so critical from its first degenerate point, step 2)
    fell = rows(7, entropy_mean=lambda s: 0.5 if s < 2 else 1e-4)
    (ep,) = [e for e in feed(fell, ONLY)[1].episodes() if e.phase == "degenerate"]
    assert (ep.step_start, ep.severity, ep.evidence["since_start"]) == (2, "critical", False)
    # degenerate_points 1: the point alone decides, critical at the dips (the earlier rule)
    one = DetectorConfig(enabled=("entropy",), entropy=EntropyConfig(degenerate_points=1))
    assert [sev for *_, sev in spans(feed(dips, one)[1].episodes(), "entropy")] == ["critical", "critical"]



def test_the_collapse_sentence_says_fell_only_below_the_peak():
    from collapsewatch.detectors.entropy import _sentence

    # a fall: level 0.05 of a peak 0.5 → 0.05 / 0.5 = 10 %
    assert _sentence("collapse", {"entropy_level": 0.05, "entropy_peak": 0.5}, 10) == (
        "entropy fell to 0.05 nats, 10% of its peak 0.5")
    # under the absolute floor with no higher level behind it (a run near 0.001 nats from its start whose level is
    # 0.00558 and whose highest ordinary level is 0.00153): not a fall to 365 % of the peak
    assert _sentence("collapse", {"entropy_level": 0.00558, "entropy_peak": 0.00153}, 10) == (
        "entropy at 0.00558 nats, low all along (its peak level 0.00153)")


def test_one_group_a_step_reads_its_entropy_over_single_points():
    # One prompt a step: the zero-std share is logged as 0 or 1 only (1 at even steps, 0 at odd) — signals.one_group,
    # the starvation rule's test. Against a share of several groups (0.25) the same entropy gives today's episodes.
    single = {"zero_std_group_frac": lambda s: 1.0 if s % 2 == 0 else 0.0}
    many = {"zero_std_group_frac": 0.25}
    # (1) blow-up: 0.1 everywhere but 0.4 at steps 40–42. The 5-point level is 0.4 at 42, 43 and 44 (three of the
    # five points) ≥ 1.5 × the median 0.1 → a blow-up confirmed at 44 (confirm_steps 3), info (no reward, no
    # correct-response entropy: cannot tell). One group a step: the level is the median of the last 20 points
    # (starvation.single_points), three of them 0.4 → 0.1, under the bar: no episode.
    blow = {"entropy_mean": lambda s: 0.4 if 40 <= s <= 42 else 0.1}
    assert spans(feed(rows(60, **blow, **many), ONLY)[1].episodes(), "entropy") == [("blowup", 44, 44, "info")]
    assert feed(rows(60, **blow, **single), ONLY)[1].episodes() == []
    # (2) a point under the degenerate floor (1e-4 < 1e-3 at steps 10 and 25, 0.05 elsewhere; the median of the last
    # 10 points 0.05 is not under it): a warning each today, info on one group a step (one group answered alike);
    # two episodes: 10 misses (11–20) end the first (exit_patience 10)
    dips = {"entropy_mean": lambda s: 1e-4 if s in (10, 25) else 0.05}
    assert [(p, a, sev) for p, a, _, sev in spans(feed(rows(35, **dips, **many), ONLY)[1].episodes(), "entropy")] == [
        ("degenerate", 10, "warning"), ("degenerate", 25, "warning")]
    got = feed(rows(35, **dips, **single), ONLY)[1].episodes()
    assert [(e.phase, e.step_start, e.severity) for e in got] == [("degenerate", 10, "info"), ("degenerate", 25, "info")]
    assert got[0].evidence["one_group_a_step"] is True and "one group answered alike" in got[0].message
    # ... and a sustained fall under it stays critical: 0.5 for steps 0–9, then 1e-4 — at step 14 the last 10 points
    # hold five 0.5 and five 1e-4 (median 0.25); at 15 six 1e-4 → median 1e-4 < the floor: critical from then
    fell = feed(rows(20, entropy_mean=lambda s: 0.5 if s < 10 else 1e-4, **single), ONLY)[1].episodes()
    (ep,) = [e for e in fell if e.phase == "degenerate"]
    assert (ep.step_start, ep.severity, ep.evidence["reached"]["critical"]) == (10, "critical", 15)
    # (3) the early collapse (fewer than 20 points): 1.0 for steps 0–4, 0.5 then, but 0.05 at steps 7–9. Today the
    # median of the last 3 points is first ≤ 0.1 × 1.0 at step 8 (0.5, 0.05, 0.05 → 0.05) and last at 10 (0.05,
    # 0.05, 0.5): a warning, steps 8–10. One group a step reads the median of
    # the last 10 (single_points // 2): at 14 (steps 5–14, three of them 0.05) it is 0.5; before 14 the window
    # reaches back into the first points it is judged against, or the history is short of 10: nothing.
    early = {"entropy_mean": [1.0] * 5 + [0.5, 0.5, 0.05, 0.05, 0.05] + [0.5] * 5}
    assert spans(feed(rows(15, **early, **many), ONLY)[1].episodes(), "entropy") == [("collapse", 8, 10, "warning")]
    assert feed(rows(15, **early, **single), ONLY)[1].episodes() == []


def test_one_group_a_step_with_more_single_points_than_min_points_waits_for_a_whole_level():
    # starvation.single_points 30 > entropy.min_points 20 on a run of one group a step: from its 20th point to its
    # 29th the history held no whole 30-point level, and the level's array was empty — `detect` died on "zero-size
    # array to reduction operation maximum" (a public run of one prompt a step, screened in session 54). Now those
    # points take the early form, as before min_points: entropy 0.5 for 40 steps, nothing fell → no episode.
    # Then 0.5 for steps 0–29 and 0.01 from 30: from the 30th point on the 30-point level is read — the median of
    # the last 30 points, at step 44 (15 of each) (0.5 + 0.01) / 2 = 0.255, at 45 (16 of 0.01) 0.01 ≤ 0.1 × the peak
    # level 0.5 = 0.05: holds from 45, confirmed at 47 (confirm_steps 3); no reward logged, nothing tells: a warning.
    single = {"zero_std_group_frac": lambda s: 1.0 if s % 2 == 0 else 0.0}
    cfg = dataclasses.replace(ONLY, starvation=dataclasses.replace(ONLY.starvation, single_points=30))
    assert feed(rows(40, entropy_mean=0.5, **single), cfg)[1].episodes() == []
    fell = feed(rows(60, entropy_mean=lambda s: 0.5 if s < 30 else 0.01, **single), cfg)[1].episodes()
    assert spans(fell, "entropy") == [("collapse", 47, 59, "warning")]


def test_a_huge_logged_entropy_is_written_as_a_power_of_ten():
    # an ingested run that logs 1,000 nats (a summed, not a per-token, entropy): e^1000 overflows a float (numpy
    # warned and the message read "inf"); e^1000 = 10^(1000 / ln 10) = 10^434.29 = 1.97 × 10^434 → "2e+434".
    # Below 20 nats the number itself: e^9 = 8,103.08 → "8,103"; e^20 = 4.85e8 → "4.9e+8".
    data = rows(12, entropy_mean=lambda s: 0.7 if s < 6 else 1000.0)
    (ev,) = feed(data, ONLY)[1].episodes()
    assert "as random as a uniform pick among 2e+434 tokens per position" in ev.message
    assert (_tokens(9.0), _tokens(20.0)) == ("8,103", "4.9e+8")
