"""Live overview (dashboard.live): first load, then polls that send only new steps as a Patch."""

from __future__ import annotations

import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch.dashboard import history, live, state
from collapsewatch.dashboard.figures import TRACE_COLUMNS


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
    got = live.load("live", smooth=1)
    fig, st, info = got["figure"], got["state"], got["info"]
    reward = TRACE_COLUMNS.index("reward_mean")
    assert info["status"] == "running" and st["last"] == 39 and fig["data"][reward]["x"] == list(range(40))
    assert fig["layout"]["xaxis"]["range"] == [0.0, 39.0] == got["timeline"]["layout"]["xaxis"]["range"]
    assert live.poll(st) == {"patch": None, "timeline": None, "events": None, "state": st, "info": None,
                             "verdict": None}

    running.write(until=47)
    got = live.poll(st)
    st2 = got["state"]
    ops = _ops(got["patch"])
    extend_x = {op["location"][1]: op["params"]["value"] for op in ops
                if op["operation"] == "Extend" and op["location"][2] == "x"}
    assert extend_x[reward] == [40, 41, 42, 43, 44, 45, 46]
    assert st2["last"] == 46 and st2["summary"]["rows"] == 47 and got["info"] is not None
    # the panels and the timeline follow the run: both x ranges end at the new last step
    assigned = {tuple(op["location"]): op["params"]["value"] for op in ops if op["operation"] == "Assign"}
    assert assigned[("layout", "xaxis", "range")] == [0.0, 46.0]
    assert got["timeline"]["layout"]["xaxis"]["range"] == [0.0, 46.0]
    # the early-stagnation phase starts at step 44: its band (hidden), the timeline and the events table come
    shapes = assigned[("layout", "shapes")]
    bands = [s for s in shapes if s.get("name", "").startswith("band:")]
    assert len(bands) == 2 and not any(s["visible"] for s in bands)
    assert got["timeline"]["data"][0]["y"][-1] == "lld · early_stagnation"
    assert [r["what"] for r in got["events"]][-1] == "lld · early_stagnation"


def test_smoothed_poll_extends_raw_copies_too(running):
    got = live.load("live", smooth=8)
    running.write(until=43)
    ops = _ops(live.poll(got["state"])["patch"])
    extended = {op["location"][1] for op in ops if op["operation"] == "Extend" and op["location"][2] == "x"}
    assert {TRACE_COLUMNS.index("reward_mean"), TRACE_COLUMNS.index("raw:reward_mean")} <= extended


def test_poll_notices_finish(running):
    st = live.load("live")["state"]
    running.close(status="finished")
    got = live.poll(st)
    assert got["patch"] is None and got["state"]["status"] == "finished" and got["info"]["status"] == "finished"


def test_unknown_run(running):  # (a store of its own: it passed only after another test had configured one)
    assert live.load("no-such-run") is None


def test_the_wire_copy_has_numpy_arrays_with_the_same_values():
    import numpy as np
    from plotly.io.json import to_json_plotly

    fig = {"data": [{"x": [0, 1, 2], "y": [0.5, 1.5, 2.5], "text": ["a", "b", "c"]}, {"x": [], "y": []}],
           "layout": {}}
    wire = live.for_the_wire(fig)
    assert isinstance(wire["data"][0]["x"], np.ndarray) and wire["data"][0]["text"] == ["a", "b", "c"]
    assert fig["data"][0]["x"] == [0, 1, 2]  # the builder's figure is not changed
    assert to_json_plotly(wire) == to_json_plotly(fig)  # the browser gets the same JSON
