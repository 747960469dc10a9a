"""A lab drill raises an alert in W&B (offline) and trackio: a real built-in-trainer run with the ``nonfinite`` drill
(one NaN in ``logp`` at step 1), watched with ``collapsewatch watch --to wandb:cw --to trackio:cw``; both trackers'
files are read back (W&B with the project's reader, trackio with its own ``SQLiteStorage``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collapsewatch.alerts import event_headline
from collapsewatch.ingest.wandb_run import Parser, read
from collapsewatch.sinks import run_verdict
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train
from tests.conftest import child_env

SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120"]


@pytest.mark.slow
def test_a_drill_raises_an_alert_in_wandb_and_trackio(tmp_path):
    from trackio import sqlite_storage

    store = tmp_path / "store"
    train(load_config(overrides=SMALL, steps=3, store=str(store), run="nan", progress=False,
                      drill={"kind": "nonfinite", "at_step": 1, "tensor": "logp"}))
    env = child_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true",
                    TRACKIO_DIR=str(tmp_path / "trackio"))
    p = subprocess.run([sys.executable, "-m", "collapsewatch", "watch", str(store), "--once", "--json",
                        "--to", "wandb:cw", "--to", "trackio:cw"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2, p.stderr  # a critical was reported
    [event, verdict] = [json.loads(line) for line in p.stdout.splitlines()]
    # the nonfinite detector's episode: critical at the drill's step 1 (its first NaN)
    assert (event["detector"], event["step_start"], event["severity"]) == ("nonfinite", 1, "critical")
    assert verdict == run_verdict(store, "nan") | {"type": "verdict"}
    title = "collapsewatch critical: nan nonfinite/nonfinite from step 1"
    parser = Parser()
    list(read(tmp_path / "wandb", parser=parser))
    assert parser.alerts == [{"level": "ERROR", "title": title, "text": event_headline(event),
                              "wait_duration": "60000"}]
    assert parser.summary["collapsewatch/verdict"] == verdict["status"]
    before, sqlite_storage.TRACKIO_DIR = sqlite_storage.TRACKIO_DIR, tmp_path / "trackio"
    try:
        alerts = sqlite_storage.SQLiteStorage.get_alerts("cw", run_name="nan")
    finally:
        sqlite_storage.TRACKIO_DIR = before
    assert sorted((a["step"], a["level"], a["title"], a["text"]) for a in alerts) == [
        (1, "error", title, event_headline(event)),
        (verdict["last_step"], "error", f"collapsewatch verdict: {verdict['status']}", verdict["sentence"])]
