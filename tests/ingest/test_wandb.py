"""W&B run logs written by the real wandb (offline, into a tmp dir; nothing is sent): verl's logger calls, the run
folder / wandb folder / several runs, a run killed mid-write, files that are not W&B logs, and a live run followed.
TRL's WandbCallback is in test_formats.py (the one TRL run read from every format), verl's own Tracking logger in
tests/integrations/test_verl_ingest.py (.venv-verl)."""

from __future__ import annotations

import math
import re
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapsewatch import connect
from collapsewatch.cli import app
from collapsewatch.ingest import IngestError, Tail, detect, ingest_file, wandb_run

wandb = pytest.importorskip("wandb")


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    # offline into tmp_path; no console capture (pytest owns stdout), no banner, no error reports sent anywhere
    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true",
                       "WANDB_CONSOLE": "off", "WANDB_ERROR_REPORTING": "false"}.items():
        monkeypatch.setenv(key, value)


def start(tmp_path: Path, name: str, **settings):
    return wandb.init(project="cw", name=name, dir=str(tmp_path), settings=wandb.Settings(console="off", **settings))


def run_dir(run) -> Path:
    return Path(run.settings.sync_file).parent


def test_verl_logger_rows_fill_the_catalogue_at_the_global_step(tmp_path, store):
    run = start(tmp_path, "verl")
    # verl's Tracking.log → wandb.log(data=data, step=step), once per global step (verl/utils/tracking.py);
    # validation before training at step 0, generations as a wandb.Table (its log_table / val generations)
    run.log(data={"val-core/gsm8k/reward/mean@1": 0.125}, step=0)
    run.log(data={"actor/entropy": 0.5, "actor/entropy_loss": 0.9, "critic/score/mean": 0.25,
                  "response_length/mean": 37.0, "actor/grad_norm": 1.5, "perf": {"throughput": 100.0}}, step=1)
    run.log(data={"actor/entropy": 0.25, "critic/score/mean": 0.75, "response_length/mean": 41.0,
                  "actor/grad_norm": math.nan}, step=2)
    run.log(data={"val/generations": wandb.Table(columns=["input", "output"], data=[["1+1", "2"]])}, step=2)
    run.finish()
    path = run_dir(run)
    assert detect(path).NAME == "wandb" and detect(path / f"run-{run.id}.wandb").NAME == "wandb"
    done = ingest_file(store, path, "verl")
    # steps 0, 1, 2; the table is one value that is not a number (its size, rows … are no metrics); the NaN kept
    assert (done.steps, done.summary) == (3, "skipped 1 value(s) that are not numbers: 'val/generations' "
                                             "(a table-file) ×1; kept 1 non-finite value(s) (NaN / ±Inf)")
    con = connect(store)
    rows = con.execute("SELECT step, entropy_mean, reward_mean, response_length_mean, grad_norm FROM steps "
                       "ORDER BY step").fetchall()
    # step 1: actor/entropy 0.5 beats actor/entropy_loss 0.9 (listed first in KEY_MAP); critic/score/mean → reward
    assert rows[:2] == [(0, None, None, None, None), (1, 0.5, 0.25, 37.0, 1.5)]
    assert rows[2][:4] == (2, 0.25, 0.75, 41.0) and math.isnan(rows[2][4])
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM scalars").fetchall()}
    # verl's keys kept as logged; a nested dict under W&B's dotted name; wandb's _step / _runtime are bookkeeping
    assert {"actor/entropy_loss", "val-core/gsm8k/reward/mean@1", "perf.throughput"} <= keys
    assert not any(k.startswith(("_", "val/generations")) for k in keys)
    # the wall time is wandb's _timestamp, a few seconds ago (not the ingest's clock)
    ts = con.execute("SELECT epoch(ts) FROM steps WHERE step = 1").fetchone()[0]
    assert time.time() - 600 < ts <= time.time()


def test_openrlhf_rows_take_their_global_step_not_wandbs_call_count(tmp_path, store):
    run = start(tmp_path, "orlhf")
    # OpenRLHF's PPO trainer (openrlhf/trainer/ppo_trainer.py): step metrics per prefix, then per PPO step
    # {"train/<key>": v, "train/global_step": step} and, on evaluation, {"eval/<key>": v, "eval/global_step": step}
    run.define_metric("train/global_step")
    run.define_metric("train/*", step_metric="train/global_step", step_sync=True)
    run.define_metric("eval/global_step")
    run.define_metric("eval/*", step_metric="eval/global_step", step_sync=True)
    for step, reward in ((1, 0.25), (2, 0.5)):
        run.log({"train/rollout/reward_mean": reward, "train/global_step": step})
        run.log({"eval/pass1": reward / 2, "eval/global_step": step})
    run.finish()
    assert ingest_file(store, run_dir(run), "o").steps == 2
    # wandb's _step counts the 4 log calls (0..3); the rows belong to global steps 1 and 2, eval beside train; eval's
    # pass1 (an accuracy) also fills eval_score (ingest/keys.py)
    con = connect(store)
    assert con.execute("SELECT step, key, value FROM scalars ORDER BY step, key").fetchall() == [
        (1, "eval/pass1", 0.125), (1, "eval_score", 0.125), (1, "train/rollout/reward_mean", 0.25),
        (2, "eval/pass1", 0.25), (2, "eval_score", 0.25), (2, "train/rollout/reward_mean", 0.5)]
    # train/rollout/reward_mean: OpenRLHF's rollout/reward_mean behind its train/ prefix → reward_mean
    assert con.execute("SELECT step, reward_mean FROM steps ORDER BY step").fetchall() == [(1, 0.25), (2, 0.5)]


def test_a_wandb_folder_with_several_runs_needs_source_run(tmp_path, store):
    ids = {}
    for name, ent in (("a", 0.5), ("b", 0.125)):
        run = start(tmp_path, name)
        run.log({"actor/entropy": ent}, step=1)
        run.finish()
        ids[name] = (run.id, run_dir(run).name)
    folder = tmp_path / "wandb"
    with pytest.raises(IngestError, match=r"holds 2 W&B run\(s\) \(.*; pass one with --source-run") as e:
        ingest_file(store, folder, "w")
    assert "\n" not in str(e.value) and all(d in str(e.value) for _, d in ids.values())
    # by run id, by folder name, and the latest-run link wandb keeps (b, the later run): b's entropy 0.125
    for run_name, source, path in (("by-id", ids["b"][0], folder), ("by-folder", ids["a"][1], folder),
                                   ("latest", None, folder / "latest-run")):
        assert ingest_file(store, path, run_name, source_run=source).steps == 1
    got = dict(connect(store).execute("SELECT run, entropy_mean FROM steps").fetchall())
    assert got == {"by-id": 0.125, "by-folder": 0.5, "latest": 0.125}


def test_a_run_killed_mid_write_keeps_the_records_before_the_cut(tmp_path, store):
    run = start(tmp_path, "long")
    for step in range(200):
        run.log({"actor/entropy": step / 200}, step=step)
    run.finish()
    whole = run_dir(run) / f"run-{run.id}.wandb"
    cut = tmp_path / "cut" / whole.name
    cut.parent.mkdir()
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * 3 // 4])  # the last quarter lost, mid-record: the writer killed mid-write
    done = ingest_file(store, cut, "cut")
    assert "wandb's reader: reached the end of an incomplete .wandb file" in done.summary
    got = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    # the rows before the cut, each as logged (step s: s / 200); the ones after it are gone, not invented
    assert 0 < len(got) < 200 and got == [(s, s / 200) for s in range(len(got))]
    result = CliRunner().invoke(app, ["ingest", str(store), str(cut), "--run", "cli", "--no-detect"])
    assert result.exit_code == 0 and "incomplete .wandb file" in result.output


def test_a_file_that_is_not_a_wandb_log_says_so_in_one_line(tmp_path, store):
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"step": 1, "actor/entropy": 0.5}\n')
    (tmp_path / "empty").mkdir()
    for path in (jsonl, tmp_path / "empty"):
        with pytest.raises(IngestError, match="is not a W&B run log") as e:
            ingest_file(store, path, "x", "wandb")
        assert str(e.value).startswith(repr(str(path))) and "\n" not in str(e.value)
    run = start(tmp_path, "r")
    run.log({"actor/entropy": 0.5}, step=1)
    run.finish()
    log = run_dir(run) / f"run-{run.id}.wandb"
    renamed = shutil.copy(log, tmp_path / "run.bin")  # a W&B header, but wandb's reader reads only *.wandb
    with pytest.raises(IngestError, match=r"run.bin' could not be read by wandb's reader: Not a .wandb file"):
        ingest_file(store, renamed, "x")
    header_only = tmp_path / "header.wandb"
    header_only.write_bytes(log.read_bytes()[:7])
    with pytest.raises(IngestError, match="header.wandb' holds no step rows"):
        ingest_file(store, header_only, "x")
    result = CliRunner().invoke(app, ["ingest", str(store), str(jsonl), "--run", "x", "--format", "wandb"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def _poll_until(tail: Tail, want: set[int]) -> None:
    deadline = time.monotonic() + 120  # not a timing assertion: a bound so a broken reader fails instead of hanging
    while not want <= tail.steps:
        assert time.monotonic() < deadline, f"steps {sorted(tail.steps)} never reached {sorted(want)}"
        tail.poll()
        time.sleep(0.2)


def test_follow_a_live_run(tmp_path, store, monkeypatch):
    # wandb flushes a running run's file every x_transaction_log_flush_interval (15 s by default): 0.2 s here; no
    # system stats (written every 15 s), so nothing is written while the test lets the reader idle
    run = start(tmp_path, "live", x_transaction_log_flush_interval=0.2, x_disable_stats=True)
    monkeypatch.setattr(wandb_run, "IDLE", "1s")  # the reader stops idle after 1 s (10 min in use) and is restarted
    tail = Tail(store, run_dir(run), "live")
    assert tail.format == "wandb"
    for step in (1, 2, 3):
        run.log({"train/entropy": 1 / step, "train/global_step": step})
    _poll_until(tail, {1, 2})
    assert 3 not in tail.steps  # the newest step waits for a later one (its keys may still be coming)
    assert connect(store).execute("SELECT status FROM runs").fetchone() == ("running",)
    time.sleep(3)  # nothing written for 3 s: the reader stops idle; the next poll starts it again, re-reading the file
    assert tail.poll() == 0  # what it reads again is what was ingested: nothing new, nothing counted as late
    run.log({"train/entropy": 0.125, "train/global_step": 4})
    run.finish()
    _poll_until(tail, {3})
    done = tail.close()  # the tail stops: the newest step, 4, is taken as it is
    assert (done.format, done.steps) == ("wandb", 4)
    # the reader's words when it idled (the seconds it counted, ≥ 1), once per idle: nothing else left out
    idled = r"wandb's reader: no writes for \d+s; the run may have crashed"
    assert re.fullmatch(f"{idled}(; {idled})*", done.summary), done.summary
    con = connect(store)
    # train/entropy (HF's prefix) → entropy_mean: 1, 1/2, 1/3, then 0.125
    assert con.execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall() == [
        (1, 1.0), (2, 0.5), (3, 1 / 3), (4, 0.125)]
    assert con.execute("SELECT status FROM runs").fetchone() == ("finished",)
