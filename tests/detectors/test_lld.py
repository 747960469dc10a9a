"""LLD death spiral: one noise-free series walks through all three phases; others show re-entry,
the incorrect-likelihood veto, the acceleration requirement, and NULL rows.

Defaults: slopes are Theil–Sen with 95 % CIs; stagnation over 50 steps (CI × 50 within ±0.03, ≥ 25
points); decay over 30 steps (CI < 0 and slope × 30 ≤ −0.05); a phase opens on its 5th consecutive hold
and closes after 10 steps without.
"""

from __future__ import annotations

from dataclasses import replace

from collapsewatch.detectors import DetectorConfig

from .series import GATE_30, feed, rows, spans

LLD_ONLY = DetectorConfig(enabled=("lld",), severity=GATE_30)


def L_spiral(t: int) -> float:
    """Flat −0.74 until 150, −0.003/step until 220 (−0.95), then −0.003 d − 0.001 d² (d = t − 220)."""
    if t < 150:
        return -0.74
    if t < 220:
        return -0.74 - 0.003 * (t - 150)
    d = t - 220
    return -0.95 - 0.003 * d - 0.001 * d * d


def spiral(n: int = 300, **over):
    cols = dict(
        reward_mean=lambda t: 0.2 + 0.002 * t if t <= 220 else 0.64 - 0.01 * (t - 220),
        logp_old_mean_correct=L_spiral,
        logp_old_mean_incorrect=lambda t: -1.1 if t < 150 else -1.1 - 0.002 * (t - 150),
        grad_norm=lambda t: 1.0 if t <= 220 else 1 + 0.5 * (t - 220),
        entropy_mean=lambda t: 0.5 if t <= 220 else 0.5 * (1 + (t - 220) / 10),
    )
    cols.update(over)
    return rows(n, **cols)


def test_three_phases_in_order_with_derived_steps():
    # early_stagnation: L exactly flat and reward exactly rising; the 50-step window has its 25 points at
    #   t = 24 → holds 24…, opens at 28. Once L falls (t > 150) the 50-step CI's lower end × 50 drops below
    #   −0.03 at t = 166 (−0.034; −0.027 at 165), the same step the decay rule takes over.
    # steady_decay: the 30-step slope × 30 is −0.048 at 165 and −0.054 at 166 (CI < 0 from 162) → holds
    #   from 166, opens at 170; I falls too (−0.002/step).
    # accelerated_collapse: the slope of the last 10 points is −0.0062 at 226, first ≤ 2 × the 30-step slope
    #   (−0.003); the grad spike (1 + 0.5 (t − 220) ≥ 3 × median 1) is there from 224 → holds from 226,
    #   opens at 230 and lasts while L keeps falling (to the end). From 226 the higher phase takes the
    #   verdict, so decay's last holding step is 225.
    stream, suite = feed(spiral(), LLD_ONLY)
    assert spans(suite.episodes(), "lld") == [
        ("early_stagnation", 28, 165, "info"),
        ("steady_decay", 170, 225, "warning"),
        ("accelerated_collapse", 230, 299, "critical"),
    ]
    decay, collapse = suite.episodes()[1:]
    assert decay.evidence["I_falling"] is True and "incorrect falling too" in decay.message
    assert decay.threshold == -0.05 and decay.value == -0.003 * 30
    # evidence at entry: grad spike (from 224) and entropy surge (level e(t − 2) ≥ 1.3 · 0.5 from 225);
    # the reward level has not yet fallen 0.16 below its peak (≈ 0.64, at t ≥ 239)
    opening = next(e for e in stream if e.phase == "accelerated_collapse")
    assert opening.step_end == 230 and opening.evidence["signals"] == ["grad_spike", "entropy_surge"]
    assert "reward_drop" in collapse.evidence["signals"]


def test_a_decay_that_stops_closes_and_re_enters():
    # L falls −0.003/step over [100, 160), is flat until 220, falls again from 220. Each decay opens 20 steps
    # after its start (16 steps until slope × 30 ≤ −0.05, as above, + 4 confirmations). The flat stretch:
    # the 30-step slope stops qualifying at 160 + 14, so the last holding step is 173.
    def L(t: int) -> float:
        return -0.7 - 0.003 * (min(max(t - 100, 0), 60) + max(t - 220, 0))

    data = rows(300, logp_old_mean_correct=L, logp_old_mean_incorrect=-1.1, reward_mean=0.5)
    _, suite = feed(data, LLD_ONLY)
    decays = [s for s in spans(suite.episodes(), "lld") if s[0] == "steady_decay"]
    assert decays == [("steady_decay", 120, 173, "warning"), ("steady_decay", 240, 299, "warning")]


def test_incorrect_likelihood_rising_vetoes_steady_decay_unless_disabled():
    rising_i = lambda t: -1.1 + 0.002 * t  # noqa: E731
    data = spiral(220, logp_old_mean_incorrect=rising_i)
    _, suite = feed(data, LLD_ONLY)
    assert [s[0] for s in spans(suite.episodes(), "lld")] == ["early_stagnation"]
    cfg = replace(LLD_ONLY, lld=replace(LLD_ONLY.lld, require_incorrect_falling=False))
    _, suite = feed(data, cfg)
    assert spans(suite.episodes(), "lld")[1] == ("steady_decay", 170, 219, "warning")


def test_acceleration_without_any_confirming_signal_stays_steady_decay():
    # Same L, but grad norm, entropy and reward stay flat: no grad spike, surge or reward drop → the
    # accelerating decline is still reported as steady decay (warning), never critical.
    data = spiral(reward_mean=0.5, grad_norm=1.0, entropy_mean=0.5)
    _, suite = feed(data, LLD_ONLY)
    assert [s[0] for s in spans(suite.episodes(), "lld")] == ["steady_decay"]
    assert spans(suite.episodes(), "lld")[0][1:] == (170, 299, "warning")


def test_null_rows_neither_extend_nor_end_an_episode():
    # Every 7th row has L NULL (and on step 200 a NaN): those steps give no verdict. The decay still opens
    # (5 consecutive *evaluated* holds) and still runs to the end.
    data = spiral(220)
    for r in data:
        if r["step"] % 7 == 0:
            r["logp_old_mean_correct"] = None
    data[200]["logp_old_mean_correct"] = float("nan")
    _, suite = feed(data, LLD_ONLY)
    decay = [s for s in spans(suite.episodes(), "lld") if s[0] == "steady_decay"]
    assert len(decay) == 1 and 166 <= decay[0][1] <= 172 and decay[0][2] == 219


def test_flat_likelihood_with_flat_reward_is_not_stagnation():
    data = rows(200, logp_old_mean_correct=-0.74, reward_mean=0.5)
    _, suite = feed(data, LLD_ONLY)
    assert suite.episodes() == []
