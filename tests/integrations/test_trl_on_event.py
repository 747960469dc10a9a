"""watch(trainer, ..., on_event=...): the Monitor's event hook reaches a TRL run (real GRPOTrainer, tiny model)."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

from collapsewatch import connect  # noqa: E402
from collapsewatch.detectors import DetectorConfig  # noqa: E402
from collapsewatch.integrations.trl import watch  # noqa: E402
from tests.integrations.trl_tiny import tiny_grpo_trainer  # noqa: E402


def test_on_event_is_called_on_a_trl_run(tmp_path):
    # Only the starvation detector, with its warning bar at 0: a share of zero-std groups is always ≥ 0, so
    # the rule holds on every step with a zero_std_group_frac and opens an episode on the 3rd (confirm_steps).
    # The hook then sees that episode (and each extension) as the store does.
    cfg = DetectorConfig.from_dict({"enabled": ["starvation"], "starvation": {"warn_frac": 0.0}})
    seen = []
    trainer = tiny_grpo_trainer(str(tmp_path / "out"))
    watch(trainer, tmp_path / "store", "hooked", detectors=cfg, on_event=seen.append)
    trainer.train()
    assert seen and {(e.detector, e.phase) for e in seen} == {("starvation", "starvation")}
    stored = connect(tmp_path / "store").execute(
        "SELECT detector, phase, step_start, step_end FROM events WHERE run = 'hooked'").fetchall()
    latest = {e.key: e for e in seen}
    assert sorted(stored) == sorted((e.detector, e.phase, e.step_start, e.step_end) for e in latest.values())
