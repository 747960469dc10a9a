"""GRPO-Guard's signature: A>0 ratio mean left of 1 while clip_high stays silent (level = median of last 5)."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("grpo_guard",))


def _mean(s: int) -> float:
    return 1.01 if s < 30 else 0.95


def test_left_shift_with_a_silent_upper_clip_is_flagged_as_info():
    # ratio_mean_pos 1.01 until step 29, then 0.95; clip_high_frac 0 throughout. The level (median of the last
    # 5 points) drops below 1 − 0.02 = 0.98 at step 32 (three of five points at 0.95); confirmed on three
    # consecutive steps → the episode opens at step 34 and stays open to the end, severity info.
    stream, suite = feed(rows(60, ratio_mean_pos=_mean, clip_high_frac=0.0, on_policy=False), ONLY)
    assert spans(suite.episodes(), "grpo_guard") == [("ratio_left_shift", 34, 59, "info")]
    ev = suite.episodes()[0].evidence
    assert ev["ratio_mean_pos_level"] == 0.95 and ev["clip_high_frac_level"] == 0.0
    assert stream[0].metric == "ratio_mean_pos" and stream[0].threshold == 0.98


def test_a_firing_upper_clip_or_a_mean_at_one_is_not_the_signature():
    # Same left shift, but clip_high fires on 1 % of tokens (> 0.001): the clip is still acting.
    _, suite = feed(rows(60, ratio_mean_pos=_mean, clip_high_frac=0.01, on_policy=False), ONLY)
    assert suite.episodes() == []
    # Silent clip but the mean at 0.99 ≥ 0.98: within the tolerance.
    _, suite = feed(rows(60, ratio_mean_pos=0.99, clip_high_frac=0.0, on_policy=False), ONLY)
    assert suite.episodes() == []


def test_on_policy_steps_give_no_verdict():
    # On-policy the ratio metrics are NULL (r ≡ 1): nothing to judge, however long the run.
    _, suite = feed(rows(60, ratio_mean_pos=None, clip_high_frac=None, on_policy=True), ONLY)
    assert suite.episodes() == []
    # Every other step on-policy: the windows count off-policy points only (even steps). The first 0.95 point is
    # step 30; the median of the last 5 points is 0.95 from step 34 (points 26…34, three of them 0.95); odd
    # steps give no verdict, so the three confirmations are steps 34, 36, 38 → the episode opens at 38.
    off = lambda s: s % 2 == 0  # noqa: E731
    _, suite = feed(rows(60, ratio_mean_pos=lambda s: _mean(s) if off(s) else None,
                         clip_high_frac=lambda s: 0.0 if off(s) else None, on_policy=lambda s: not off(s)), ONLY)
    assert [(p, a) for p, a, _, _ in spans(suite.episodes(), "grpo_guard")] == [("ratio_left_shift", 38)]
