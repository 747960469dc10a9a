"""Entropy collapse and blow-up on step functions (level = median of the last 5 points)."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("entropy",))


def test_collapse_to_near_zero():
    # 0.5 until 100, then 0.01: the level is 0.01 once 3 of the last 5 points are (t = 102); the bar is
    # max(0.05, 0.1 · peak 0.5) = 0.05 → holds from 102, opens at 104 (3rd hold).
    _, suite = feed(rows(200, entropy_mean=lambda s: 0.5 if s < 100 else 0.01), ONLY)
    assert spans(suite.episodes(), "entropy") == [("collapse", 104, 199, "warning")]
    assert suite.episodes()[0].threshold == 0.05


def test_blowup_until_the_history_median_catches_up():
    # 0.5 until 100, then 1.5: the bar is 2 × the median over the history (≤ 200 rows). The level 1.5 ≥ 1.0
    # from 102 → opens at 104. Rows 0…180 hold 100 points at 0.5 and 81 at 1.5: the median is still 0.5,
    # so the episode lasts to the end (at 200 rows with ≥ 100 at 1.5 it would close).
    _, suite = feed(rows(181, entropy_mean=lambda s: 0.5 if s < 100 else 1.5), ONLY)
    assert spans(suite.episodes(), "entropy") == [("blowup", 104, 180, "critical")]


def test_healthy_decline_and_a_one_step_spike_do_not_flag():
    # entropy 1.0 → 0.4 linearly (never below 0.1 · peak), one step at 3.0: the 5-point median ignores it
    data = rows(200, entropy_mean=lambda s: 3.0 if s == 150 else 1.0 - 0.003 * s)
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []


def test_too_few_points_give_no_verdict():
    _, suite = feed(rows(19, entropy_mean=0.001), ONLY)  # min_points 20
    assert suite.episodes() == []


def test_return_to_normal_after_a_blowup_is_not_a_collapse():
    # 0.3 (normal), a blow-up to 5.0 for steps 60–99, then back to 0.3. A peak taken over every level would put the
    # collapse bar at 0.1 · 5.0 = 0.5 > 0.3 and flag the recovery; the normal peak excludes levels ≥ 2 × median
    # (median 0.3 → levels ≥ 0.6), so the bar stays max(0.05, 0.1 · 0.3) = 0.05 and only the blow-up is flagged.
    data = rows(160, entropy_mean=lambda s: 5.0 if 60 <= s < 100 else 0.3)
    _, suite = feed(data, ONLY)
    assert [p for p, *_ in spans(suite.episodes(), "entropy")] == ["blowup"]
