"""watch(trainer, ..., sinks=["wandb"]) on a real TRL run that reports to W&B (offline): the sink writes into the run
TRL's ``WandbCallback`` opened — one run, holding TRL's metrics and collapsewatch's alert, severity and verdict —,
read back with the project's W&B reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("wandb")

from collapsewatch.alerts import event_headline  # noqa: E402
from collapsewatch.detectors import DetectorConfig  # noqa: E402
from collapsewatch.ingest.wandb_run import Parser, read  # noqa: E402
from collapsewatch.sinks import SEVERITY_SCALAR, run_verdict  # noqa: E402
from tests.conftest import child_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# Only the starvation detector, its warning bar at 0: a share of zero-std groups is always ≥ 0, so the rule holds at
# every step and opens one warning episode at the 3rd (confirm_steps; tests/integrations/test_trl_on_event.py) — one
# W&B alert (level WARN), severity 2 at that step
RULES = {"enabled": ["starvation"], "starvation": {"warn_frac": 0.0}}

_TRAIN = """
import json, sys
from pathlib import Path
import wandb
from collapsewatch.detectors import DetectorConfig
from collapsewatch.integrations.trl import watch
from tests.integrations.trl_tiny import tiny_grpo_trainer
tmp = Path(sys.argv[1])
trainer = tiny_grpo_trainer(str(tmp / "out"), report_to=["wandb"], run_name="tiny")
seen = []
watch(trainer, tmp / "store", "sunk", detectors=DetectorConfig.from_dict(json.loads(sys.argv[2])), sinks=["wandb"],
      on_event=seen.append)
trainer.train()
wandb.finish()  # TRL leaves its run open after train(); finishing it writes the file's last records
(tmp / "seen.json").write_text(json.dumps([e.as_row() for e in seen]))
"""


def test_wandb_sink_writes_into_trls_own_run(tmp_path):
    # the TRL run in its own process: wandb keeps process-wide state (its service, its settings) that would leak
    # into later W&B tests of this pytest process
    env = child_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_PROJECT="cw", WANDB_SILENT="true",
                    WANDB_CONSOLE="off", WANDB_ERROR_REPORTING="false", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", _TRAIN, str(tmp_path), json.dumps(RULES)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    [folder] = list((tmp_path / "wandb").glob("offline-run-*"))  # one run: TRL's, with the sink's records in it
    parser = Parser()
    rows = {r.step: r.values for r in read(folder, parser=parser)}
    assert any("train/loss" in v or "train/reward" in v for v in rows.values())  # TRL's own metrics
    first = dict(seen[0], run="sunk")
    assert first["severity"] == "warning" and first["step_start"] == first["step_end"]
    assert parser.alerts == [{"level": "WARN", "text": event_headline(first), "wait_duration": "60000",
                              "title": f"collapsewatch warning: sunk starvation/starvation from step "
                                       f"{first['step_start']}"}]
    assert any(v.get(SEVERITY_SCALAR) == 2 for v in rows.values())
    cfg = DetectorConfig.from_dict(RULES)
    verdict = run_verdict(tmp_path / "store", "sunk", cfg)  # judged under the run's own rules, as the Monitor does
    assert parser.summary["collapsewatch/verdict"] == verdict["status"]
    assert parser.summary["collapsewatch/verdict_sentence"] == verdict["sentence"]
