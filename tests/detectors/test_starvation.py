"""Signal starvation on zero_std_group_frac (level = median of the last 5 points)."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("starvation",))


def test_warning_then_critical_and_the_kind_of_groups():
    # 0.3 until 50, 0.9 until 80, then 1.0; all wrong. Level ≥ 0.8 from 52 → opens at 54 (warning);
    # level ≥ 0.95 from 82 → the episode becomes critical. The reward fell from 0.5 to 0 at 50, far from its
    # best, so the severity gate lets critical through (a reward at 0 all along would be "at its best").
    frac = lambda s: 0.3 if s < 50 else (0.9 if s < 80 else 1.0)  # noqa: E731
    stream, suite = feed(rows(100, zero_std_group_frac=frac, correct_frac=0.0,
                              reward_mean=lambda s: 0.5 if s < 50 else 0.0), ONLY)
    assert spans(suite.episodes(), "starvation") == [("starvation", 54, 99, "critical")]
    sev = {e.step_end: e.severity for e in stream}
    assert sev[81] == "warning" and sev[82] == "critical"
    assert suite.episodes()[0].evidence["groups"] == "all-wrong"


def test_all_correct_groups_are_named_and_healthy_levels_do_not_flag():
    _, suite = feed(rows(40, zero_std_group_frac=0.97, correct_frac=0.99), ONLY)
    assert suite.episodes()[0].evidence["groups"] == "all-correct"
    _, suite = feed(rows(100, zero_std_group_frac=lambda s: 0.95 if s % 10 == 0 else 0.4), ONLY)
    assert suite.episodes() == []
