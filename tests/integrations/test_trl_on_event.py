"""watch(trainer, ..., on_event=...): the Monitor's event hook reaches a TRL run (real GRPOTrainer, tiny model)."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

from collapsewatch import connect  # noqa: E402
from collapsewatch.detectors import DetectorConfig  # noqa: E402
from collapsewatch.integrations.trl import watch  # noqa: E402
from collapsewatch.series import SEVERITY_KEY, STEP_KEY  # noqa: E402
from tests.integrations.trl_tiny import LogsSeen, tiny_grpo_trainer  # noqa: E402


def test_on_event_is_called_on_a_trl_run(tmp_path):
    # Only the starvation detector, with its warning bar at 0: a share of zero-std groups is always ≥ 0, so
    # the rule holds on every step with a zero_std_group_frac and opens an episode on the 3rd (a level of 3 points);
    # the tiny model earns nothing, so cold_start is off to keep it a warning. Its few groups a step may log the
    # share as 0 and 1 only (one group a step: a level of the last single_points points, read from half as many);
    # single_points 5 reads that level from the 3rd point too, so the episode opens there either way.
    # The hook then sees that episode (and each extension) as the store does.
    cfg = DetectorConfig.from_dict({"enabled": ["starvation"],
                                    "starvation": {"warn_frac": 0.0, "cold_start": False, "single_points": 5}})
    seen = []
    trainer = tiny_grpo_trainer(str(tmp_path / "out"))
    watch(trainer, tmp_path / "store", "hooked", detectors=cfg, on_event=seen.append)
    later = LogsSeen()
    trainer.add_callback(later)
    trainer.train()
    assert seen and {(e.detector, e.phase) for e in seen} == {("starvation", "starvation")}
    stored = connect(tmp_path / "store").execute(
        "SELECT detector, phase, step_start, step_end FROM events WHERE run = 'hooked'").fetchall()
    latest = {e.key: e for e in seen}
    assert sorted(stored) == sorted((e.detector, e.phase, e.step_start, e.step_end) for e in latest.values())
    # the series reach the callbacks after watch()'s: train()'s summary log (tracker step 4 of 4) carries S = 4 and
    # the worst severity so far, warning = 2 (the starvation episode of step 3, the only event); no log of a step
    # before the last carries its own or a later step
    step, final = later.logs[-1]
    assert (step, final[STEP_KEY], final[SEVERITY_KEY]) == (4, 4.0, 2.0) and "train_runtime" in final
    assert all(logs[STEP_KEY] < s for s, logs in later.logs[:-1] if STEP_KEY in logs)
