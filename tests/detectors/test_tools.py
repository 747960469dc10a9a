"""Tool-use collapse: tool_calls_mean falling to ≤ 0.1 × its peak level after tool use was established."""

from __future__ import annotations

import pytest

from collapsewatch.detectors import DetectorConfig, ToolsConfig
from collapsewatch.detectors.registry import specs

from .series import GATE_30, feed, rows, spans

ONLY = DetectorConfig(enabled=("tools",), severity=GATE_30)


def test_an_agent_that_stops_searching_is_flagged_where_its_level_reaches_the_bar():
    # calls 1.0 on steps 0–5, then 0.9, 0.5, 0.2, 0.1, 0, 0 … Levels (median of 3): 1.0 up to step 6, 0.9 at 7,
    # 0.5 at 8, 0.2 at 9 (> 0.1 × peak 1.0 = 0.1), 0.1 at 10 (≤ 0.1: holds), 0.0 at 11 and 12 → three in a row,
    # opens at 12 (confirm_steps 3). No reward logged: nothing shows harm, the severity gate lowers its critical to a warning.
    calls = [1.0] * 6 + [0.9, 0.5, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0]
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), ONLY)
    assert spans(suite.episodes(), "tools") == [("collapse", 12, 13, "warning")]
    ep = suite.episodes()[0]
    assert ep.metric == "tool_calls_mean" and ep.value == 0.0 and ep.threshold == pytest.approx(0.1)
    assert ep.evidence["tool_calls_peak"] == 1.0 and ep.evidence["peak_step"] == 2  # the first level of 1.0 ends at 2


def test_with_the_reward_falling_and_staying_down_it_is_critical():
    # calls 1.0 → 0.0 at step 50: levels 1, 0 at 51 (median of 1, 0, 0), holds 51, 52, 53 → opens at 53. The reward
    # falls 0.6 → 0.1 at 50 as well and stays: the gate's sustained fall keeps the finding critical (the same
    # reward series keeps test_mismatch's ESS finding critical).
    data = rows(100, tool_calls_mean=lambda s: 1.0 if s < 50 else 0.0, reward_mean=lambda s: 0.6 if s < 50 else 0.1)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "tools") == [("collapse", 53, 99, "critical")]
    for r in data:
        r["reward_mean"] = 0.6
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "tools") == [("collapse", 53, 99, "warning")]


def test_a_dip_to_two_fifths_of_the_peak_that_recovers_is_quiet():
    # a search agent's healthy dip: 1.0, then 0.4 (0.4 × the peak, above the 0.1 bar), then 1.2
    calls = [1.0] * 10 + [0.4] * 10 + [1.2] * 10
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), ONLY)
    assert spans(suite.episodes(), "tools") == []


def test_a_dip_to_three_twentieths_is_quiet_at_the_default_bar_and_flagged_at_the_old_one():
    # 1.0 on steps 0–9, 0.15 on 10–19, 1.0 on 20–29: levels 0.15 from step 11 (median(1.0, 0.15, 0.15)) to 20
    # (median(0.15, 0.15, 1.0)); 0.15 > 0.1 × 1.0 → quiet. Under collapse_frac 0.2 (the default before session 54):
    # 0.15 ≤ 0.2 holds on 11…20, three in a row → opens at 13, ends at 20 (21's level is 1.0: patience, no re-entry)
    calls = [1.0] * 10 + [0.15] * 10 + [1.0] * 10
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), ONLY)
    assert spans(suite.episodes(), "tools") == []
    old = DetectorConfig(enabled=("tools",), severity=GATE_30, tools=ToolsConfig(collapse_frac=0.2))
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), old)
    assert spans(suite.episodes(), "tools") == [("collapse", 13, 20, "warning")]


def test_tool_use_never_established_is_not_abandoned():
    # peak level 0.3 < established 0.5: a model that never learned its tool, then 0 — no episode. With
    # established = 0.25: levels 0.3 up to step 10 (median(0.3, 0.3, 0)), 0 from 11 (median(0.3, 0, 0)); holds at
    # 11, 12, 13 → opens at 13
    calls = [0.3] * 10 + [0.0] * 10
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), ONLY)
    assert spans(suite.episodes(), "tools") == []
    low = DetectorConfig(enabled=("tools",), tools=ToolsConfig(established=0.25))
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), low)
    assert spans(suite.episodes(), "tools") == [("collapse", 13, 19, "warning")]


def test_no_verdict_before_min_points():
    # 1, 1, 1, 0, 0: five points < min_points 6 → nothing; the sixth (0) makes levels 1, 0, 0, 0 → holds from step 4
    # (median(1, 0, 0) = 0) … but no verdict was given before step 5, so three holding verdicts end at step 7
    calls = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    _, suite = feed(rows(len(calls), tool_calls_mean=calls), ONLY)
    assert spans(suite.episodes(), "tools") == [("collapse", 7, 7, "warning")]


def test_no_tool_column_is_not_applicable_and_the_sentence_names_the_fall():
    _, suite = feed(rows(30, tool_calls_mean=None, reward_mean=0.5), ONLY)
    assert suite.episodes() == [] and suite.applicability()["tools"].status == "not_applicable"
    sentence = specs()["tools"].sentence("collapse", {"tool_calls_level": 0.05, "tool_calls_peak": 1.1, "bar": 0.22},
                                         10)
    assert sentence == "the agent stopped calling its tool: 0.05 calls per response, down from 1.10 (bar 0.22)"


def test_settings_are_checked():
    with pytest.raises(ValueError, match="collapse_frac"):
        ToolsConfig(collapse_frac=1.5)
    with pytest.raises(ValueError, match="min_points"):
        ToolsConfig(smooth_points=5, min_points=4)
