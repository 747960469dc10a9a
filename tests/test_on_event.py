"""Monitor(on_event=...): the hook custom loops use to act on a phase — every new or extended event, on the
training thread, and a hook that raises never stops training."""

from __future__ import annotations

import logging

from collapsewatch import Monitor, connect


def _spiky_run(mon: Monitor) -> None:
    # grad_norm 1.0 with 30.0 at steps 40–42: 30 × the median of the previous points (1.0) is over the bar;
    # an info spike at 40 and 41, an explosion from 42 on (3 = sustain_steps points still up; peak 30 ≥
    # critical_factor 20 makes it critical by the rule, but no reward is logged, so nothing shows harm and the
    # severity gate lowers it to warning)
    for step in range(50):
        mon.log(step, {"grad_norm": 30.0 if 40 <= step <= 42 else 1.0})


def test_on_event_sees_each_event_as_the_store_does(store):
    seen = []
    with Monitor(store, run="hook", on_event=seen.append, flush_steps=5) as mon:
        _spiky_run(mon)
    # the episode as it opens (40, info), is extended (to 41, still info) and escalates (to 42, warning)
    assert [(e.detector, e.phase, e.step_start, e.step_end, e.severity) for e in seen] == [
        ("grad", "explosion", 40, 40, "info"), ("grad", "explosion", 40, 41, "info"),
        ("grad", "explosion", 40, 42, "warning")]
    stored = connect(store).execute("SELECT detector, phase, step_start, severity FROM events").fetchall()
    assert stored == [("grad", "explosion", 40, "warning")]


def test_a_raising_hook_is_logged_and_training_goes_on(store, caplog):
    calls = []

    def hook(ev):
        calls.append(ev)
        raise RuntimeError("receiver down")

    with caplog.at_level(logging.ERROR, logger="collapsewatch"):
        with Monitor(store, run="raise", on_event=hook, flush_steps=5) as mon:
            _spiky_run(mon)  # no exception reaches the loop
    assert len(calls) == 3 and "on_event callback raised" in caplog.text and "receiver down" in caplog.text
    steps = connect(store).execute("SELECT count(*) FROM steps WHERE run = 'raise'").fetchone()
    assert steps == (50,)  # every step recorded
