"""A synthetic run written to a real store and read back through the `steps` view detects the same."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from fixtures.synthetic_steps import GATE_30, make_run

from collapsewatch import connect
from collapsewatch.catalogue import LOGGED_SCALARS, STEP_METRICS
from collapsewatch.detectors import DetectorConfig, detect_each, detect_frame
from collapsewatch.store import StoreWriter


def write(root, run: str, frame) -> None:
    w = StoreWriter(root, run, rank=0)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    n = len(frame)
    metrics = {"run": [run] * n, "rank": [0] * n, "step": frame.step.tolist(),
               "ts": [t0 + timedelta(seconds=i) for i in range(n)]}
    names = {m.name for m in STEP_METRICS}
    for col in frame.columns:
        if col in names:
            metrics[col] = [None if v != v else v for v in frame[col].tolist()]  # NaN → NULL
    w.append("step_metrics", metrics)
    for m in LOGGED_SCALARS:
        if m.name in frame:
            w.append("scalars", {"run": [run] * n, "rank": [0] * n, "step": frame.step.tolist(),
                                 "key": [m.name] * n, "value": frame[m.name].tolist()})
    w.flush("finished")


def test_stored_run_detects_like_the_frame(tmp_path):
    frame = make_run("isdd", seed=4, gaps=True).frame
    write(tmp_path, "r1", frame)
    steps = connect(tmp_path).execute("SELECT * FROM steps ORDER BY step").df()
    cfg = DetectorConfig(severity=GATE_30)  # the synthetic run's reward fall lasts 30 steps, not 90, before it ends
    expected = detect_frame(frame, cfg)
    assert [e.detector for e in expected if e.severity == "critical"] == ["isdd"]
    assert detect_frame(steps, cfg) == expected
    assert detect_each(steps, cfg) == {("r1", 0): expected}
