"""watch(trainer, ..., sinks=["wandb"]) on a real TRL run that reports to W&B (offline): the sink writes into the run
TRL's ``WandbCallback`` opened — one run, holding TRL's metrics and collapsewatch's alert, severity and verdict —,
read back with the project's W&B reader."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("wandb")

from collapsewatch.alerts import event_headline  # noqa: E402
from collapsewatch.detectors import DetectorConfig  # noqa: E402
from collapsewatch.ingest.wandb_run import Parser, read  # noqa: E402
from collapsewatch.integrations.trl import watch  # noqa: E402
from collapsewatch.sinks import SEVERITY_SCALAR, run_verdict  # noqa: E402
from tests.integrations.trl_tiny import tiny_grpo_trainer  # noqa: E402


def test_wandb_sink_writes_into_trls_own_run(tmp_path, monkeypatch):
    import wandb

    for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_PROJECT": "cw", "WANDB_SILENT": "true",
                 "WANDB_CONSOLE": "off", "WANDB_ERROR_REPORTING": "false"}.items():
        monkeypatch.setenv(k, v)
    # Only the starvation detector, its warning bar at 0: a share of zero-std groups is always ≥ 0, so the rule
    # holds at every step and opens one warning episode at the 3rd (confirm_steps; tests/integrations/
    # test_trl_on_event.py) — one W&B alert (level WARN), severity 2 at that step
    cfg = DetectorConfig.from_dict({"enabled": ["starvation"], "starvation": {"warn_frac": 0.0}})
    trainer = tiny_grpo_trainer(str(tmp_path / "out"), report_to=["wandb"], run_name="tiny")
    seen: list = []
    watch(trainer, tmp_path / "store", "sunk", detectors=cfg, sinks=["wandb"], on_event=seen.append)
    trainer.train()
    wandb.finish()  # TRL leaves its run open after train(); finishing it writes the file's last records
    [folder] = list((tmp_path / "wandb").glob("offline-run-*"))  # one run: TRL's, with the sink's records in it
    parser = Parser()
    rows = {r.step: r.values for r in read(folder, parser=parser)}
    assert any("train/loss" in v or "train/reward" in v for v in rows.values())  # TRL's own metrics
    first = dict(seen[0].as_row(), run="sunk")
    assert first["severity"] == "warning" and first["step_start"] == first["step_end"]
    assert parser.alerts == [{"level": "WARN", "text": event_headline(first), "wait_duration": "60000",
                              "title": f"collapsewatch warning: sunk starvation/starvation from step "
                                       f"{first['step_start']}"}]
    assert any(v.get(SEVERITY_SCALAR) == 2 for v in rows.values())
    verdict = run_verdict(tmp_path / "store", "sunk")
    assert parser.summary["collapsewatch/verdict"] == verdict["status"]
    assert parser.summary["collapsewatch/verdict_sentence"] == verdict["sentence"]
