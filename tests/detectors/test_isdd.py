"""ISDD: built series whose drift, confirmations, recovery and on-policy cases are derived by hand.

Defaults used below: level = median of the last 5 points; median rule needs level < 0.9 and a
significantly negative Theil–Sen slope over 20 steps; tail rule p05 level < 0.1 or lt_0_1 level > 0.05;
a phase opens on the 3rd consecutive step its rule holds and closes after 5 steps without.
"""

from __future__ import annotations

from dataclasses import replace

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ISDD_ONLY = DetectorConfig(enabled=("isdd",))


def p50_falling_from(start: int, rate: float):
    return lambda s: 1.0 if s < start else 1.0 - rate * (s - start)


def test_median_drift_enters_when_level_crosses_and_lasts_to_the_end():
    # p50 = 1 − 0.005 (t − 100) from t = 100: p50 < 0.9 for t > 120. For a falling series the median of the
    # last 5 points is p50(t − 2), so level < 0.9 from t = 123; the 20-step window [104, 123] is one exact
    # line (slope −0.005, CI degenerate) → falling. Holds at 123, 124, 125 → episode starts at 125.
    data = rows(200, ratio_p50_pos=p50_falling_from(100, 0.005), ratio_p05_pos=0.85, ratio_lt_0_1_frac_pos=0.0,
                clip_low_frac=0.01, clip_low_frac_pos=0.4, entropy_mean=0.5, reward_mean=0.6)
    stream, suite = feed(data, ISDD_ONLY)
    assert spans(suite.episodes(), "isdd") == [("drift", 125, 199, "warning")]  # no confirmation: warning
    last = suite.episodes()[0]
    assert last.metric == "ratio_p50_pos" and last.threshold == 0.9
    assert last.value == 1.0 - 0.005 * (199 - 2 - 100)  # level at step_end = p50(197)
    assert last.evidence["clip_low_frac"] == 0.01 and "clip" in last.evidence["clip_note"]
    assert [e.step_end for e in stream] == list(range(125, 200))  # one update per step, same episode


def reward_from(start: int):
    """0.6 until ``start``, then −0.025/step."""
    return lambda s: 0.6 if s < start else max(0.0, 0.6 - 0.025 * (s - start))


def ent(s: int) -> float:
    """0.5, rising +0.01/step over [100, 130] to 0.8, flat to 135, then falling −0.012/step."""
    return 0.5 + 0.01 * min(max(s - 100, 0), 30) - 0.012 * max(s - 135, 0)


def test_reward_drop_alone_is_recorded_but_stays_warning():
    # Same drift; reward 0.6 until 140, then −0.025/step. Reward level (median of 5) = r(t − 2), running
    # max 0.6; drop needed max(0.05, 0.25 · 0.6) = 0.15 → 0.025 (t − 142) ≥ 0.15 → t ≥ 148. Entropy is flat
    # (no rise then fall): a critical needs both confirmations for critical, so the episode stays a warning.
    data = rows(200, ratio_p50_pos=p50_falling_from(100, 0.005), ratio_p05_pos=0.85, entropy_mean=0.5,
                reward_mean=reward_from(140))
    stream, suite = feed(data, ISDD_ONLY)
    assert {e.severity for e in stream} == {"warning"}
    (ep,) = suite.episodes()
    assert (ep.step_start, ep.step_end, ep.severity) == (125, 199, "warning")
    assert ep.evidence["confirmations"] == ["reward_drop"]
    assert "critical needs both" in ep.message


def test_entropy_rise_then_fall_alone_stays_warning():
    # Over the 80-point window the entropy level peaks at 0.8 > 1.1 · 0.5 and has fallen ≥ 10 % from it once
    # e(t − 2) = 0.8 − 0.012 (t − 137) ≤ 0.72 → t ≥ 143.7 → 144. Reward flat at 0.6: no drop, still warning.
    data = rows(160, ratio_p50_pos=p50_falling_from(100, 0.005), ratio_p05_pos=0.85, entropy_mean=ent,
                reward_mean=0.6)
    stream, suite = feed(data, ISDD_ONLY)
    assert {e.severity for e in stream} == {"warning"}
    assert suite.episodes()[0].evidence["confirmations"] == ["entropy_rise_then_fall"]
    assert min(e.step_end for e in stream if e.evidence["confirmations"]) == 144


def test_entropy_rise_fall_and_reward_drop_together_make_it_critical():
    # Both confirmations: rise-fall holds from 144, the reward drop from 148 (derived above) → critical by the
    # rule at 148. The severity gate keeps a critical only once the fall is sustained: each of the last 5 reward
    # levels r(t − 2) = 0.6 − 0.025 (t − 142) ≥ 0.15 below the best 0.6, i.e. the oldest of them, at t − 4, is
    # ≥ 148 → t ≥ 152. Steps 148–151 are lowered to warning; critical from 152. (The gate's sustain_steps, the
    # fall's duration, is off here: test_severity.py has it; this test is about the rule's two confirmations.)
    data = rows(160, ratio_p50_pos=p50_falling_from(100, 0.005), ratio_p05_pos=0.85, entropy_mean=ent,
                reward_mean=reward_from(140))
    stream, suite = feed(data, replace(ISDD_ONLY, severity=replace(ISDD_ONLY.severity, sustain_steps=0)))
    severity = {e.step_end: e.severity for e in stream}
    assert severity[147] == severity[151] == "warning" and severity[152] == "critical"
    assert [e.evidence.get("severity_gate", {}).get("lowered_from") for e in stream if e.step_end == 151] == ["critical"]
    assert suite.episodes()[0].evidence["confirmations"] == ["entropy_rise_then_fall", "reward_drop"]


def test_lower_tail_alone_flags_while_the_median_stays_at_one():
    # p05 drops from 0.85 to 0.05 at t = 50: level < 0.1 once 3 of the last 5 are 0.05 → t = 52; opens at 54.
    data = rows(80, ratio_p50_pos=1.0, ratio_p05_pos=lambda s: 0.85 if s < 50 else 0.05)
    _, suite = feed(data, ISDD_ONLY)
    assert spans(suite.episodes(), "isdd") == [("drift", 54, 79, "warning")]
    assert suite.episodes()[0].metric == "ratio_p05_pos"


def test_a_drift_that_recovers_closes_and_can_be_re_entered():
    # p50: 1 until 50, −0.01/step to 0.8 at 70, flat to 90, +0.01/step back to 1.0 at 110, flat; the same
    # dip again from 150. Entry: level p50(t − 2) < 0.9 from t = 63; the 20-step window [44, 63] holds 13
    # falling points of 20, enough for a negative CI (checked: opens at 65 = 63 + 2). While open the rule
    # only needs level < 0.9: level(t) = p50(t − 2) ≥ 0.9 from t − 2 = 100, so the last holding step is 101.
    def dip(s: int) -> float:
        s = s - 100 if s >= 150 else s
        return 1.0 - 0.01 * min(max(s - 50, 0), 20) + 0.01 * min(max(s - 90, 0), 20)

    data = rows(250, ratio_p50_pos=dip, ratio_p05_pos=0.85, entropy_mean=0.5, reward_mean=0.6)
    _, suite = feed(data, ISDD_ONLY)
    assert spans(suite.episodes(), "isdd") == [("drift", 65, 101, "warning"), ("drift", 165, 201, "warning")]


def test_on_policy_run_with_ratio_identically_one_is_not_applicable():
    data = rows(100, on_policy=True, ratio_p50_pos=1.0, ratio_p05_pos=1.0, ratio_lt_0_1_frac_pos=0.0,
                entropy_mean=0.5, reward_mean=0.6)
    _, suite = feed(data)
    assert spans(suite.episodes(), "isdd") == []
    app = suite.applicability()["isdd"]
    assert app.status == "not_applicable" and "on-policy" in app.reason


def test_on_policy_steps_never_flag_even_with_fallen_ratios_and_null_ratios_are_not_applicable():
    # A mislabelled stream: ratios fallen but every step says on_policy → the steps are skipped.
    _, suite = feed(rows(60, on_policy=True, ratio_p50_pos=0.3, ratio_p05_pos=0.01), ISDD_ONLY)
    assert suite.episodes() == []
    _, suite = feed(rows(60, ratio_p50_pos=None, ratio_p05_pos=float("nan")), ISDD_ONLY)
    assert suite.episodes() == [] and suite.applicability()["isdd"].status == "not_applicable"


def test_on_policy_steps_interleaved_are_left_out_of_the_windows():
    # Every third step is on-policy with r ≡ 1; the off-policy steps carry the same drift as the first test.
    # Those 1.0 values must not dilute the median, and on-policy steps give no verdict (they neither break
    # the 3-step confirmation streak nor extend the episode). Level = median of the last 5 off-policy points:
    # t = 122 → {122, 121, 119, 118, 116} → p50(119) = 0.905 (no); t = 124 → p50(121) = 0.895 (1st hold);
    # t = 125 → p50(122) (2nd); 126 is on-policy; t = 127 → p50(124) (3rd) → opens at 127.
    on = lambda s: s % 3 == 0  # noqa: E731
    data = rows(200, on_policy=on, ratio_p50_pos=lambda s: 1.0 if on(s) else p50_falling_from(100, 0.005)(s),
                ratio_p05_pos=0.85)
    _, suite = feed(data, ISDD_ONLY)
    (ep,) = suite.episodes()
    assert (ep.step_start, ep.step_end) == (127, 199)  # 199 % 3 ≠ 0: off-policy
    assert suite.applicability()["isdd"].status == "applicable"


def test_per_turn_ratio_levels_are_in_the_evidence():
    # The lower-tail drift above, with the probe's per-turn A>0 ratios: turn p05 0.9 until 50 then 0.2, turn p50
    # 1.0. At the last step (79) the last 5 off-policy points are all after 50: levels 0.2 and 1.0. Without turn
    # columns (a run without turn ids) the evidence holds None. No rule reads them: the episode is the same.
    data = rows(80, ratio_p50_pos=1.0, ratio_p05_pos=lambda s: 0.85 if s < 50 else 0.05,
                turn_ratio_p05_pos=lambda s: 0.9 if s < 50 else 0.2, turn_ratio_p50_pos=1.0)
    _, suite = feed(data, ISDD_ONLY)
    ep = suite.episodes()[0]
    assert (ep.step_start, ep.step_end) == (54, 79)
    assert ep.evidence["turn_ratio_p05_pos_level"] == 0.2 and ep.evidence["turn_ratio_p50_pos_level"] == 1.0
    _, plain = feed(rows(80, ratio_p50_pos=1.0, ratio_p05_pos=lambda s: 0.85 if s < 50 else 0.05), ISDD_ONLY)
    assert plain.episodes()[0].evidence["turn_ratio_p05_pos_level"] is None
