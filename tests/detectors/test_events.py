"""Episode tracking: confirm, extend, patience, re-entry, worst severity; JSON-safe evidence."""

from __future__ import annotations

import json
import math

from collapsewatch.detectors.events import Event, Finding, PhaseState, advance, clean, reached_step

WARN = Finding("warning", "m", 1.0, 0.5, 10, "w", {"x": 1.0})
CRIT = Finding("critical", "m", 2.0, 0.5, 10, "c", {"x": 2.0})


def drive(verdicts: dict[int, Finding | None], confirm: int = 3, patience: int = 3) -> list[Event]:
    state, out = PhaseState(), []
    for step in sorted(verdicts):
        state, event = advance(state, step, verdicts[step], "d", "p", confirm, patience)
        if event is not None:
            out.append(event)
    return out


def test_confirm_extend_patience_and_reentry():
    # holds 10-13, misses 14-15 (< patience 3), holds 16, misses 17-19 (= patience: closed), holds 20-22
    v = {s: WARN for s in (10, 11, 12, 13, 16, 20, 21, 22)} | {s: None for s in (14, 15, 17, 18, 19)}
    events = drive(v)
    # confirmed on the 3rd consecutive hold (12); extended at 13 and 16 (gap within patience); then a
    # new episode confirmed at 22 (3rd hold after the reset)
    assert [(e.step_start, e.step_end) for e in events] == [(12, 12), (12, 13), (12, 16), (22, 22)]


def test_gap_in_streak_before_confirmation_restarts_count():
    events = drive({10: WARN, 11: WARN, 12: None, 13: WARN, 14: WARN, 15: WARN})
    assert [(e.step_start, e.step_end) for e in events] == [(15, 15)]


def test_an_immediate_finding_opens_at_its_first_point_and_ends_by_patience():
    # confirm 3, patience 3: a plain warning at 10 and 11 opens nothing (2 < 3 holds); an immediate one opens at its
    # first hold (10), extends at 11, and ends at the 3rd miss in a row (14: patience 3); a plain hold at 17 opens nothing
    now = Finding("warning", "m", 1.0, 0.5, 1, "w", immediate=True)
    assert drive({10: WARN, 11: WARN, 12: None}) == []
    events = drive({10: now, 11: now, 12: None, 13: None, 14: None, 15: None, 16: None, 17: WARN})
    assert [(e.step_start, e.step_end) for e in events] == [(10, 10), (10, 11)]


def test_episode_keeps_worst_severity_but_latest_message():
    events = drive({1: WARN, 2: CRIT, 3: WARN}, confirm=1)
    assert [e.severity for e in events] == ["warning", "critical", "critical"]
    assert events[-1].message == "w" and events[-1].value == 1.0
    assert events[-1].evidence["severity_now"] == "warning"


def test_reached_records_when_each_severity_first_held():
    # confirm 1: info at 1 opens the episode; warning at 3 (info again at 2 and 4), critical at 6. reached = the
    # first step at each level: info 1, warning 3, critical 6 — the episode rang as a warning at 3, not at 1.
    info = Finding("info", "m", 0.5, 0.5, 10, "i")
    events = drive({1: info, 2: info, 3: WARN, 4: info, 5: WARN, 6: CRIT, 7: WARN}, confirm=1)
    last = events[-1]
    assert (last.step_start, last.severity) == (1, "critical")
    assert last.evidence["reached"] == {"info": 1, "warning": 3, "critical": 6}
    assert [reached_step(last.evidence, s, last.step_start) for s in ("info", "warning", "critical")] == [1, 3, 6]
    # straight to critical: every level reached at once; the store's JSON text reads the same
    jump = drive({4: CRIT}, confirm=1)[-1]
    assert jump.evidence["reached"] == {"info": 4, "warning": 4, "critical": 4}
    assert reached_step(jump.as_row()["evidence"], "warning", 4) == 4
    # an episode recorded before `reached` existed, or unreadable evidence: its start
    assert reached_step({"x": 1}, "warning", 7) == reached_step("not json", "critical", 7) == 7


def test_after_a_gap_an_episode_escalates_only_once_its_rule_is_confirmed_again():
    # confirm 3, patience 5: info holds 1-3 (opens at 3, streak 3), misses 4-5 (the episode stays open, streak 0),
    # then a warning at 6 alone (streak 1 < 3) and a miss at 7: the episode extends to 6 but stays info — a new
    # episode would not have opened on one point either. Warnings at 8, 9, 10: streak 1, 2, 3 → info, info, warning
    # at 10, the step a new episode confirmed by them would have opened. The message and severity_now are the
    # latest finding's throughout. Without a gap (confirm 3, holds 1-3 info, warning at 4, streak 4) it escalates
    # at once, as before.
    info = Finding("info", "m", 0.5, 0.5, 10, "i")
    events = drive({1: info, 2: info, 3: info, 4: None, 5: None, 6: WARN, 7: None, 8: WARN, 9: WARN, 10: WARN},
                   patience=5)
    assert [(e.step_end, e.severity, e.evidence["severity_now"]) for e in events] == [
        (3, "info", "info"), (6, "info", "warning"), (8, "info", "warning"), (9, "info", "warning"),
        (10, "warning", "warning")]
    assert events[-1].step_start == 3 and events[-1].evidence["reached"] == {"info": 3, "warning": 10}
    events = drive({1: info, 2: info, 3: info, 4: WARN})
    assert [(e.step_end, e.severity) for e in events] == [(3, "info"), (4, "warning")]
    # an immediate finding escalates at its first point, gap or not (it needs no confirmation to open either)
    now = Finding("critical", "m", 1e-4, 1e-3, 1, "c", immediate=True)
    events = drive({1: info, 2: info, 3: info, 4: None, 5: now}, patience=5)
    assert [(e.step_end, e.severity) for e in events] == [(3, "info"), (5, "critical")]


def test_clean_and_as_row_give_strict_json():
    ev = clean({"a": float("nan"), "b": [math.inf, 1.23456789], "c": True, "d": 3})
    assert ev == {"a": None, "b": [None, 1.23457], "c": True, "d": 3}
    row = Event("isdd", "drift", 1, 2, "warning", "m", 0.5, 0.9, 20, "msg", ev).as_row()
    assert json.loads(row["evidence"]) == ev
    assert set(row) == {"detector", "phase", "step_start", "step_end", "severity", "metric", "value",
                        "threshold", "window_steps", "message", "evidence"}
