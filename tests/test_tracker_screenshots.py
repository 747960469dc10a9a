"""bench/tracker_screenshots.py as run for docs/trl.md: the real TRL run, TensorBoard and headless Chromium. The PNGs
come out at their sizes, and the TensorBoard folder they show holds what the captions say, read back with
TensorBoard's own EventAccumulator and held against the run's store."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[1]
if not Path("/usr/bin/chromium").exists():
    pytest.skip("needs Debian chromium at /usr/bin/chromium", allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("trl")
pytest.importorskip("tensorboard")


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]  # PNG: 8-byte signature, then the IHDR chunk: length, type, width, height
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_the_screenshots_show_the_runs_series_and_alert(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator

    from collapsewatch.sinks import SEVERITY_SCALAR
    from collapsewatch.store.queries import Store

    out, keep = tmp_path / "img", tmp_path / "run"
    done = subprocess.run([sys.executable, "bench/tracker_screenshots.py", "--out", str(out), "--keep", str(keep)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    series, alert = out / "tensorboard-series.png", out / "tensorboard-alert.png"
    # the viewports the script sets; docs/img keeps images under 300 KB
    assert _png_size(series) == (1600, 1480) and _png_size(alert) == (1600, 1000)
    assert series.stat().st_size < 300_000 and alert.stat().st_size < 300_000

    store = Store(keep / "store")
    episodes = store.query("SELECT detector, step_start, severity FROM events WHERE run = 'trl-exp' "
                           "ORDER BY step_start").to_dict("records")
    store.close()
    # the reward bug starts with the generation of step 7 (TRL's global_step 6): the nonfinite detector's critical
    # episode opens there; every completion hits max_completion_length=8, the length detector's info finding
    assert {"detector": "nonfinite", "step_start": 7, "severity": "critical"} in episodes
    assert {e["detector"] for e in episodes} == {"nonfinite", "length"}

    acc = EventAccumulator(str(keep / "tb" / "trl-exp"), size_guidance={TENSORS: 0, SCALARS: 0})
    acc.Reload()
    scalars = {t: {e.step: e.value for e in acc.Scalars(t)} for t in acc.Tags()[SCALARS] if "collapsewatch" in t}
    # the nine cards of the Time Series page: the sink's severity and TRL's eight train/collapsewatch/… series
    # (entropy_mean_correct absent: share_of_a never reaches the success threshold 1.0)
    assert sorted(scalars) == [SEVERITY_SCALAR, *(f"train/collapsewatch/{k}" for k in (
        "entropy_mean_incorrect", "ratio_p05_pos", "ratio_p50_pos", "sentinel_logp_correct_mean",
        "sentinel_logp_incorrect_mean", "severity", "step", "zero_std_group_frac"))]
    # the sink: a point at each episode's first reported step, its severity as a number (1 info, 3 critical)
    by_step = {e["step_start"]: {"info": 1, "critical": 3}[e["severity"]] for e in episodes}
    assert scalars[SEVERITY_SCALAR] == by_step
    # TRL's series: the worst so far, 3 from the log that carries step 7 on, never down
    sev = scalars["train/collapsewatch/severity"]
    assert max(sev.values()) == 3 and list(sev.values()) == sorted(sev.values())
    assert all(v == 3 for s, v in sev.items() if scalars["train/collapsewatch/step"][s] >= 7)

    text = {t.removesuffix("/text_summary"): [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors(t)]
            for t in acc.Tags()[TENSORS] if t.startswith("collapsewatch/")}
    events = dict(text["collapsewatch/events"])
    assert "[critical] nonfinite/nonfinite" in events[7] and "in rewards" in events[7]
    [(step, verdict)] = text["collapsewatch/verdict"]
    assert step == 12 and verdict.startswith("**warning**") and "non-finite values" in verdict
