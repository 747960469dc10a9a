"""The shared severity gate: critical means harm — a sustained reward fall from its best, non-finite values or
degenerate output (docs/architecture.md, *Detectors*)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from collapsewatch.detectors import DetectorConfig, SeverityConfig
from collapsewatch.detectors.config import EntropyConfig

from .series import GATE_30, feed, rows, spans

ENTROPY = DetectorConfig(enabled=("entropy",), severity=GATE_30)


def blowup(s: int) -> float:
    """entropy 0.5 until 100, then 1.5: a blow-up (≥ 1.5 × the history median 0.5) opening at 104. Given to the
    correct responses' entropy too, the policy itself degrades: the entropy rule says critical before the gate."""
    return 0.5 if s < 100 else 1.5


def test_entropy_blowup_while_reward_still_rises_is_a_warning():
    # The issue-11 false alarm: reward rising 0.2 + 0.002 t the whole run, so its level (median of the last 5)
    # is its running best at every step: best − now = 0 < max(0.02, 0.1 · best). Critical is lowered.
    _, suite = feed(rows(150, entropy_mean=blowup, entropy_mean_correct=blowup, reward_mean=lambda s: 0.2 + 0.002 * s), ENTROPY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 149, "warning")]
    gate = suite.episodes()[0].evidence["severity_gate"]
    # at 149 the level is r(147) = 0.494, the best is the same point
    assert gate["reward_now"] == gate["reward_best"] == 0.494 and gate["lowered_from"] == "critical"


def test_entropy_blowup_after_the_reward_fell_stays_critical():
    # reward 0.6 until 90, then 0.3: at 104 the level 0.3 is 0.3 below the best 0.6 ≥ margin 0.06 → critical.
    _, suite = feed(rows(150, entropy_mean=blowup, entropy_mean_correct=blowup, reward_mean=lambda s: 0.6 if s < 90 else 0.3), ENTROPY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 149, "critical")]
    assert "severity_gate" not in suite.episodes()[0].evidence


def test_the_margin_is_configurable_and_the_gate_can_be_switched_off():
    # reward 0.6 until 90, then 0.5: 0.1 below the best. Default margin max(0.05, 0.25 · 0.6) = 0.15 > 0.1: a
    # 17 % dip is not harm → lowered. reward_drop_frac 0.1 → margin max(0.05, 0.06) = 0.06 ≤ 0.1 → critical.
    # Gate off: critical whatever the reward.
    data = rows(150, entropy_mean=blowup, entropy_mean_correct=blowup, reward_mean=lambda s: 0.6 if s < 90 else 0.5)
    sev = lambda cfg: spans(feed(data, cfg)[1].episodes(), "entropy")[0][3]  # noqa: E731
    assert sev(ENTROPY) == "warning"
    assert sev(replace(ENTROPY, signals=replace(ENTROPY.signals, reward_drop_frac=0.1))) == "critical"
    rising = rows(150, entropy_mean=blowup, entropy_mean_correct=blowup, reward_mean=lambda s: 0.2 + 0.002 * s)
    off = replace(ENTROPY, severity=SeverityConfig(enabled=False))
    assert spans(feed(rising, off)[1].episodes(), "entropy")[0][3] == "critical"
    assert DetectorConfig.from_dict({"severity": {"sustain_levels": 3, "exempt": []}}).severity.exempt == ()


def test_a_dip_must_last_sustain_levels_to_be_harm():
    # reward 0.6 except a dip to 0.3 (0.3 ≥ margin 0.15 below the best). A dip over points d … d + n − 1 makes
    # the 5-point level 0.3 at steps d + 2 … d + n + 1 (≥ 3 of the last 5 points are 0.3): n levels.
    # (The entropy rule's own critical needs the correct responses' 20-point level ≥ 1.5 × their median 0.5: with
    # t − 99 points at 1.5 among the last 20 the median is 1.0 ≥ 0.75 at t = 109 — info before that.)
    # 3 points (110–112): 3 low levels < sustain_levels 5 → never critical. 8 points (110–117): levels 112–119
    # low; at 116 the last five (112–116) are all low → critical. (sustain_steps 0 here: levels alone; the next
    # test adds the steps.)
    levels_only = replace(ENTROPY, severity=SeverityConfig(sustain_steps=0))

    def sev(n: int) -> str:
        data = rows(150, entropy_mean=blowup, entropy_mean_correct=blowup,
                    reward_mean=lambda s: 0.3 if 110 <= s < 110 + n else 0.6)
        stream, _ = feed(data, levels_only)
        return {e.step_end: e.severity for e in stream}

    assert "critical" not in sev(3).values()
    eight = sev(8)
    assert eight[115] == "warning" and eight[116] == "critical"
    assert replace(ENTROPY, severity=SeverityConfig(sustain_levels=3)).severity.sustain_levels == 3
    three = {e.step_end: e.severity for e in feed(rows(150, entropy_mean=blowup, entropy_mean_correct=blowup,
             reward_mean=lambda s: 0.3 if 110 <= s < 113 else 0.6), replace(ENTROPY, severity=SeverityConfig(
                 sustain_levels=3, sustain_steps=0)))[0]}
    # sustain_levels 3: the 3-point dip's levels 112–114 are all low at 114 → critical there
    assert three[113] == "warning" and three[114] == "critical"


def test_a_fall_must_also_last_sustain_steps():
    from collapsewatch.detectors.history import History, Row
    from collapsewatch.detectors.signals import reward_fall

    def fall(points: list[tuple[int, float]], cfg: DetectorConfig = DetectorConfig(severity=GATE_30)):
        # sustain_levels 5, sustain_steps 30 unless cfg says otherwise
        h = History(400)
        for s, r in points:
            h.push(Row(s, {"reward_mean": r}))
        return reward_fall(h, cfg, cfg.severity.sustain_levels, cfg.severity.sustain_steps)

    # Every step logged: 0.6, and 0.3 for steps 110–149. Differences all 0 but two → MAD 0, noise 0; the margin is
    # max(0.05, 0.25 × 0.6) = 0.15 ≤ the 0.3 fall. The 5-point level is low from the one ending at 112 (108–112:
    # three 0.3s) on; at step t the run of low levels has lasted t − 112 + 1 steps: 29 at 140 (five low levels,
    # not yet harm), 30 at 141 (harm).
    every = [(s, 0.3 if 110 <= s < 150 else 0.6) for s in range(200)]
    assert fall(every[:141])[0] is False
    fired, ev = fall(every[:142])
    assert fired is True and (ev["fallen_since"], ev["fallen_steps"]) == (112, 30)
    # a 25-step dip (110–134) recovers before it has lasted 30: never harm
    dip = [(s, 0.3 if 110 <= s < 135 else 0.6) for s in range(200)]
    assert not any(fall(dip[:t])[0] for t in range(120, 200))
    # Every 10th step logged (steps 0, 10, …): 0.3 for steps 300–370 (points 30–37). Levels low from the one
    # ending at step 320 (points 28–32). At 350 the last five levels (points 31–35) include point 31's (27–31: two
    # 0.3s → 0.6): not harm. At 360 the last five (32–36) are low and the run began at 320: 41 ≥ 30 steps → harm at
    # once — on a sparse log the 5 levels already span the 30 steps.
    sparse = [(10 * i, 0.3 if 30 <= i < 38 else 0.6) for i in range(60)]
    assert fall(sparse[:36])[0] is False
    fired, ev = fall(sparse[:37])
    assert fired is True and (ev["fallen_since"], ev["fallen_steps"]) == (320, 41)
    # The default, sustain_steps 90: the 40-step dip (110–149) is never harm; a fall that stays (0.3 from 110 on)
    # is harm once t − 112 + 1 ≥ 90, at t = 201, and not at 200 (89 steps).
    default = DetectorConfig()
    assert default.severity.sustain_steps == 90
    assert not any(fall(every[:t], default)[0] for t in range(120, 200))
    stays = [(s, 0.3 if s >= 110 else 0.6) for s in range(300)]
    assert fall(stays[:201], default)[0] is False
    fired, ev = fall(stays[:202], default)
    assert fired is True and (ev["fallen_since"], ev["fallen_steps"]) == (112, 90)


def test_without_reward_nothing_shows_harm_but_nonfinite_and_degenerate_are_exempt():
    # No reward column: the gate cannot see a fall, so the blow-up's critical is lowered to warning.
    _, suite = feed(rows(150, entropy_mean=blowup, entropy_mean_correct=blowup), ENTROPY)
    assert spans(suite.episodes(), "entropy")[0][3] == "warning"
    # A NaN at step 50 while the reward rises (at its best): still critical (nonfinite is exempt by default)
    data = rows(60, reward_mean=lambda s: 0.2 + 0.002 * s, nonfinite_logp=lambda s: 3 if s >= 50 else 0,
                first_nonfinite=lambda s: "logp" if s >= 50 else None)
    _, suite = feed(data, DetectorConfig(enabled=("nonfinite",)))
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 50, 59, "critical")]
    not_exempt = DetectorConfig(enabled=("nonfinite",), severity=SeverityConfig(exempt=()))
    assert spans(feed(data, not_exempt)[1].episodes(), "nonfinite") == [("nonfinite", 50, 59, "warning")]
    # entropy 1e-4 nats from step 5 (< degenerate_floor 1e-3) with the reward at its best: entropy/degenerate is
    # exempt → critical, opens at 5 (an immediate finding: the first point that shows it, not 5 + confirm_steps − 1);
    # listed in no exemption → warning. (entropy.solved_reward off: with it, a reward at the top of its range reads
    # as a converged policy, info — tests/detectors/test_entropy.py; early_points off: the entropy collapse the same
    # fall shows in the run's first points is another phase, not this gate's test)
    data = rows(20, entropy_mean=lambda s: 0.5 if s < 5 else 1e-4, reward_mean=0.5)
    sure = replace(ENTROPY, entropy=EntropyConfig(solved_reward=False, early_points=0))
    assert spans(feed(data, sure)[1].episodes(), "entropy") == [("degenerate", 5, 19, "critical")]
    none = replace(sure, severity=SeverityConfig(exempt=()))
    assert spans(feed(data, none)[1].episodes(), "entropy") == [("degenerate", 5, 19, "warning")]


def test_near_best_points_is_the_gates_rule_at_every_point():
    # Defaults: level = median of 5 points, the gate needs 2·5 = 10 points, margin max(0.02, 0.1·best).
    # reward 0.5 × 10 then 0.3 × 5. Points 0–8: cannot tell → False. 9: levels all 0.5 → near. 10: last five
    # [.5 .5 .5 .5 .3] → 0.5, near; 11: [.5 .5 .5 .3 .3] → 0.5, near; 12–14: median 0.3, best − now = 0.2 ≥ 0.05.
    from collapsewatch.detectors.history import History, Row
    from collapsewatch.detectors.severity import near_best_points, reward_near_best

    reward = [0.5] * 10 + [0.3] * 5
    assert near_best_points(reward).tolist() == [False] * 9 + [True] * 3 + [False] * 3
    # and it is the online gate's answer at each point, with a shorter peak window too (window 12: at point 14
    # the gate sees points 3–14, whose levels still hold a 0.5)
    cfg = DetectorConfig()
    short = replace(cfg, signals=replace(cfg.signals, reward_peak_window=12))
    for c in (cfg, short):
        h, online = History(200), []
        for step, r in enumerate(reward):
            h.push(Row(step, {"reward_mean": r}))
            near = reward_near_best(h, c)
            online.append(bool(near and near[0]))
        assert near_best_points(reward, c).tolist() == online


def test_a_fall_within_the_rewards_noise_is_no_harm():
    # 41 points: base 0.6 for steps 0–19, 0.3 from 20 (a fall of 0.3 ≥ the margin max(0.05, 0.25 · 0.6) = 0.15),
    # plus a period-4 wiggle e = (0, +x, 0, −x)[s % 4] with x = 0.4. A 5-point median of the wiggle is its base
    # (e.g. 0.2, 0.6, 0.6, 0.6, 1.0 → 0.6), so the best level is 0.6 and the last five levels are 0.3.
    # Per-point noise: the 40 differences are −0.4 ×20, +0.4 ×19 and, at s = 20, 0.3 + 0 − (0.6 − 0.4) = +0.1;
    # their median is (−0.4 + 0.1) / 2 = −0.15, the absolute deviations 0.25 ×21 and 0.55 ×19 → MAD 0.25,
    # noise = 1.4826 · 0.25 / √2 = 0.26209; a level's noise 1.2533 · 0.26209 / √5 = 0.14690; noise_z 3 → the
    # fall must exceed 0.4407: 0.3 does not → no harm. noise_z 0: the plain margin 0.15 → harm. x = 0: noise 0 →
    # harm.
    from collapsewatch.detectors.signals import reward_fall

    def fall(x: float, cfg: DetectorConfig):
        return reward_fall(_wiggled_fall(x), cfg, cfg.severity.sustain_levels)

    fired, ev = fall(0.4, DetectorConfig())
    assert fired is False
    assert ev["level_noise"] == pytest.approx(1.2533 * 1.4826 * 0.25 / math.sqrt(2) / math.sqrt(5))
    assert ev["drop_needed"] == pytest.approx(3 * ev["level_noise"]) and ev["reward_best"] == pytest.approx(0.6)
    assert fall(0.4, replace(DetectorConfig(), severity=SeverityConfig(noise_z=0.0)))[0] is True
    fired, ev = fall(0.0, DetectorConfig())
    assert fired is True and ev["drop_needed"] == pytest.approx(0.15)


def _wiggled_fall(x: float):
    """41 reward points: 0.6 for steps 0–19, 0.3 from 20, plus the period-4 wiggle (0, +x, 0, −x)[s % 4]."""
    from collapsewatch.detectors.history import History, Row

    h = History(200)
    for s in range(41):
        h.push(Row(s, {"reward_mean": (0.6 if s < 20 else 0.3) + (0.0, x, 0.0, -x)[s % 4]}))
    return h


def test_a_reward_drop_within_the_rewards_noise_is_no_drop():
    # signals.reward_drop — the one-level drop the entropy blow-up's warning, the entropy collapse's "reward holds"
    # and the ISDD / LLD confirmations read — takes the gate's noise margin on one level. The series of the test
    # above: best level 0.6, last level 0.3, a drop of 0.3 ≥ the plain margin 0.15; per-point noise 0.26209 (all 41
    # points), a 5-point level's 1.2533 · 0.26209 / √5 = 0.14690, × noise_z 3 = 0.4407 > 0.3 → no drop (before session
    # 47 the plain margin alone said "dropped"). Without the wiggle (x = 0) the noise is 0 and the margin 0.15 decides
    # → a drop of 0.3. Fewer than 2 × 5 points: None (no best to drop from).
    from collapsewatch.detectors.history import History, Row
    from collapsewatch.detectors.signals import reward_drop

    dropped, ev = reward_drop(_wiggled_fall(0.4), DetectorConfig())
    assert dropped is False
    assert ev["drop_needed"] == pytest.approx(3 * 1.2533 * 1.4826 * 0.25 / math.sqrt(2) / math.sqrt(5))
    assert ev["reward_peak"] == pytest.approx(0.6) and ev["drop"] == pytest.approx(0.3)
    dropped, ev = reward_drop(_wiggled_fall(0.0), DetectorConfig())
    assert dropped is True and ev["drop_needed"] == pytest.approx(0.15)
    h = History(200)
    for s in range(9):
        h.push(Row(s, {"reward_mean": 0.6}))
    assert reward_drop(h, DetectorConfig()) == (None, {})
