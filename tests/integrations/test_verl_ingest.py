"""verl's file-logger JSONL and console lines, written by verl's own ``Tracking`` (``default_backend="file"`` /
``"console"``), ingested and tailed live. Runs in .venv-verl (``make test``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

from verl.utils.tracking import Tracking  # noqa: E402

from collapsewatch import connect  # noqa: E402
from collapsewatch.ingest import Tail, ingest_file  # noqa: E402


def verl_logger(tmp_path, monkeypatch) -> tuple[Tracking, object]:
    log = tmp_path / "verl.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    return Tracking(project_name="p", experiment_name="e", default_backend="file"), log


STEP1 = {"actor/pg_clipfrac": 0.125, "actor/ppo_kl": -0.002, "actor/entropy": 2.5, "actor/grad_norm": 1.5,
         "critic/score/mean": 0.25, "response_length/mean": 37.0, "response_length/clip_ratio": 0.0625,
         "rollout_corr/chi2_token": 0.01, "rollout_corr/rollout_is_eff_sample_size": 0.9, "timing_s/step": 12.0}


def test_verl_file_logger_lines_keep_their_keys_and_map_onto_the_catalogue(tmp_path, monkeypatch, store):
    tracker, log = verl_logger(tmp_path, monkeypatch)
    tracker.log(data=STEP1, step=1)
    tracker.log(data={"actor/grad_norm": 2.0, "actor/lr": 1e-6}, step=2)
    tracker.logger["file"].finish()
    assert ingest_file(store, log, "verl-run").steps == 2
    con = connect(store)
    scal = dict(con.execute("SELECT key, value FROM scalars WHERE step = 1").fetchall())
    # verl's own keys are kept ...
    assert scal["actor/pg_clipfrac"] == 0.125 and scal["rollout_corr/rollout_is_eff_sample_size"] == 0.9
    # ... and where the definition is the catalogue's, the catalogue's column is filled
    assert con.execute("SELECT clip_region_frac, ppo_kl, entropy_mean, reward_mean, response_length_mean, "
                       "truncated_frac, is_chi2, step_time, is_ess FROM steps WHERE step = 1").fetchone() == (
        0.125, -0.002, 2.5, 0.25, 37.0, 0.0625, 0.01, 12.0, None)  # verl's ESS is over truncated weights: unmapped
    assert con.execute("SELECT step, grad_norm, lr FROM steps ORDER BY step").fetchall() == [
        (1, 1.5, None), (2, 2.0, 1e-6)]


def test_tail_follows_a_growing_verl_log(tmp_path, monkeypatch, store):
    tracker, log = verl_logger(tmp_path, monkeypatch)
    tracker.log(data={"actor/grad_norm": 1.0}, step=1)
    tail = Tail(store, log, "live")
    assert tail.poll() == 1
    con = connect(store)
    assert con.execute("SELECT status FROM runs").fetchall() == [("running",)]
    assert tail.poll() == 0  # nothing new
    fp = tracker.logger["file"].fp  # the logger's own unbuffered file, caught mid-line: the part waits
    fp.write(b'{"step": 2, "data": {"actor/grad_norm": 2.0')
    assert tail.poll() == 0
    fp.write(b'}}\n')
    tracker.log(data={"actor/grad_norm": 3.0}, step=3)
    assert tail.poll() == 2
    tail.close()
    con = connect(store)
    assert con.execute("SELECT step, grad_norm FROM steps ORDER BY step").fetchall() == [(1, 1.0), (2, 2.0),
                                                                                       (3, 3.0)]
    assert con.execute("SELECT status FROM runs").fetchall() == [("finished",)]


def test_verl_console_lines_printed_by_verls_logger(tmp_path, store, capsys):
    # what `tee` saves of a verl run with trainer.logger=[console]: verl's LocalLogger prints one line per step,
    # values through pprint (numpy scalars print as np.float64(x)), behind Ray's actor prefix in a real run
    tracker = Tracking(project_name="p", experiment_name="e", default_backend="console")
    capsys.readouterr()
    tracker.log(data={**STEP1, "actor/entropy": np.float64(2.5), "training/global_step": np.int64(1)}, step=1)
    tracker.log(data={"actor/entropy": 1.25, "critic/score/mean": 0.5}, step=2)
    text = capsys.readouterr().out
    assert "np.float64(2.5)" in text  # verl's own printing, not ours
    log = tmp_path / "verl-console.log"
    log.write_text("".join(f"(TaskRunner pid=4242) {ln}\n" for ln in text.splitlines()))
    done = ingest_file(store, log, "verl-console")
    assert (done.format, done.steps, done.summary) == ("console", 2, "")
    con = connect(store)
    assert con.execute("SELECT step, entropy_mean, reward_mean, clip_region_frac FROM steps ORDER BY step"
                       ).fetchall() == [(1, 2.5, 0.25, 0.125), (2, 1.25, 0.5, None)]


def test_verls_wandb_logger_writes_a_run_ingest_reads(tmp_path, store, monkeypatch):
    # verl's Tracking(default_backend="wandb"): wandb.init(project, name, …), then wandb.log(data=…, step=global step);
    # its ValidationGenerationsLogger logs the validation samples as a wandb.Table under val/generations. Offline into
    # tmp_path: nothing is sent
    pytest.importorskip("wandb")
    from verl.utils.tracking import ValidationGenerationsLogger

    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true",
                       "WANDB_CONSOLE": "off", "WANDB_ERROR_REPORTING": "false"}.items():
        monkeypatch.setenv(key, value)
    tracker = Tracking(project_name="p", experiment_name="e", default_backend="wandb")
    tracker.log(data=STEP1, step=1)
    ValidationGenerationsLogger().log(["wandb"], [("1+1=", "2", 1.0)], step=1)
    tracker.log(data={"actor/grad_norm": 2.0, "actor/lr": 1e-6}, step=2)
    tracker.finish()
    done = ingest_file(store, tmp_path / "wandb", "verl-wandb")
    # the table is one value that is not a number (its row count and size are no metrics)
    assert (done.format, done.steps) == ("wandb", 2)
    assert done.summary == "skipped 1 value(s) that are not numbers: 'val/generations' (a table-file) ×1"
    con = connect(store)
    # the same values the file logger's test reads: wandb keeps verl's float64 values exact
    assert con.execute("SELECT clip_region_frac, ppo_kl, entropy_mean, reward_mean, response_length_mean, "
                       "truncated_frac, is_chi2, step_time, is_ess FROM steps WHERE step = 1").fetchone() == (
        0.125, -0.002, 2.5, 0.25, 37.0, 0.0625, 0.01, 12.0, None)
    assert con.execute("SELECT step, grad_norm, lr FROM steps ORDER BY step").fetchall() == [
        (1, 1.5, None), (2, 2.0, 1e-6)]


def test_follow_started_before_verl_waits_for_its_file(tmp_path, monkeypatch, store):
    # the order docs/verl.md gives: the follower first, then verl creates its file logger's file at
    # $VERL_FILE_LOGGER_PATH and logs; the follower says once that it waits, then ingests what verl wrote
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    log = tmp_path / "logs" / "e.jsonl"
    cmd = [sys.executable, "-m", "collapsewatch", "ingest", str(store), str(log), "--run", "live", "--follow",
           "--interval", "0.2"]
    # started with SIGINT ignored, as under a parent that ignores it (a shell's background job; this very test
    # process once Ray has run in it): the follower still stops on SIGINT (cli.ingest restores the handler)
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ""},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "does not exist yet: waiting" in proc.stderr.readline()  # said before the file exists
        assert proc.poll() is None  # still running: waiting, not refused
        log.parent.mkdir()
        monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
        tracker = Tracking(project_name="p", experiment_name="e", default_backend="file")  # creates the file
        tracker.log(data={"actor/grad_norm": 1.0}, step=1)
        tracker.log(data={"actor/grad_norm": 2.0}, step=2)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _steps(store) != [(1, 1.0), (2, 2.0)]:  # ingested live, in its loop
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "ingested 2 step(s) of jsonl into run 'live'" in out, out
    assert _steps(store) == [(1, 1.0), (2, 2.0)]


def _steps(store) -> list[tuple] | None:
    try:
        return connect(store).execute("SELECT step, grad_norm FROM steps ORDER BY step").fetchall()
    except Exception:  # the store or its first segment not written yet
        return None
