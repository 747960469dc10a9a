"""Live overview (dashboard.live): first load, then polls that send only new steps as a Patch."""

from __future__ import annotations

import pytest

from collapsewatch.dashboard import history, live, state
from collapsewatch.dashboard.figures import TRACE_COLUMNS
from collapsewatch.dashboard.synthetic import Shape, SyntheticRun


@pytest.fixture()
def running(tmp_path):
    run = SyntheticRun(tmp_path, "live", n_steps=100, shape=Shape(seqs=4, token_seqs=1, seq_len=8), flush_every=5,
                       heartbeat_s=3600)
    run.write(until=40)
    state.configure(tmp_path)
    history.clear()
    yield run
    history.clear()


def _ops(patch):
    return patch.to_plotly_json()["operations"]


def test_load_then_poll_sends_only_new_steps(running):
    fig, st, info = live.load("live")
    reward = TRACE_COLUMNS.index("reward_mean")
    assert info["status"] == "running" and st["last"] == 39 and fig["data"][reward]["x"] == list(range(40))
    assert live.poll(st) == (None, st, None)  # nothing new: nothing sent

    running.write(until=47)
    patch, st2, head = live.poll(st)
    ops = _ops(patch)
    extend_x = {op["location"][1]: op["params"]["value"] for op in ops
                if op["operation"] == "Extend" and op["location"][2] == "x"}
    assert extend_x[reward] == [40, 41, 42, 43, 44, 45, 46]
    assert 0 not in extend_x and st2["last"] == 46 and st2["summary"]["rows"] == 47 and head is not None
    # the early-stagnation phase starts at step 44: the bands and the timeline are replaced
    assigned = {tuple(op["location"]) for op in ops if op["operation"] == "Assign"}
    assert ("layout", "shapes") in assigned and ("data", 0, "y") in assigned
    shapes = next(op for op in ops if op["location"] == ["layout", "shapes"])["params"]["value"]
    assert sum(s.get("name") == "phase:lld:early_stagnation" for s in shapes) == 2


def test_poll_notices_finish(running):
    _, st, _ = live.load("live")
    running.close(status="finished")
    patch, st2, head = live.poll(st)
    assert patch is None and st2["status"] == "finished" and head["status"] == "finished"


def test_unknown_run():
    state.configure(state.store_path())
    assert live.load("no-such-run") is None
