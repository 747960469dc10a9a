"""Train–inference mismatch: |is_log_ratio| rising against its own history, IS ESS falling."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import GATE_30, feed, rows, spans

ONLY = DetectorConfig(enabled=("mismatch",), severity=GATE_30)


def test_rising_abs_log_ratio():
    # 0.01 until 100, then +0.002/step. Bar = max(0.02, 2 × history median 0.01) = 0.02: the level
    # p(t − 2) reaches it at t = 107, but the 30-step window is then mostly flat and its median pairwise
    # slope 0; the 95 % CI of the Theil–Sen slope over [t − 29, t] first clears zero at t = 112 (12 rising
    # points of 30). Holds 112, 113, 114 → opens at 114; the ESS stays healthy: warning.
    data = rows(200, is_log_ratio_abs_mean=lambda s: 0.01 + 0.002 * max(s - 100, 0), is_ess=0.97)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "mismatch") == [("drift", 114, 199, "warning")]
    assert suite.episodes()[0].metric == "is_log_ratio_abs_mean"


def test_ess_collapse_alone_is_critical_once_the_reward_falls():
    # ESS 0.97 → 0.2 at 50: level ≤ 0.3 from 52, opens at 54, critical by the rule. No reward logged: nothing
    # shows harm, so the severity gate keeps it a warning; with the reward falling 0.6 → 0.1 at 50 (levels 0.5
    # below the best from 52, sustained over 5 levels from 56) it stays critical.
    data = rows(100, is_log_ratio_abs_mean=0.01, is_ess=lambda s: 0.97 if s < 50 else 0.2)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "mismatch") == [("drift", 54, 99, "warning")]
    assert suite.episodes()[0].metric == "is_ess"
    for r in data:
        r["reward_mean"] = 0.6 if r["step"] < 50 else 0.1
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "mismatch") == [("drift", 54, 99, "critical")]


def test_no_rollout_logprobs_is_not_applicable():
    _, suite = feed(rows(30, is_log_ratio_abs_mean=None, is_ess=None, reward_mean=0.5), ONLY)
    assert suite.episodes() == [] and suite.applicability()["mismatch"].status == "not_applicable"
