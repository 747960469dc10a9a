"""SwanLab run logs written by the real swanlab (offline, into a tmp dir; nothing is sent): verl's logger calls, the
run folder / log dir / several runs, a run killed mid-write, files that are not SwanLab logs, and a live run followed.
swanlab is not in the locked environment (swanlab 0.10 requires protobuf < 7, the lock has 7): these tests run
where it is installed (pip install 'collapsewatch[swanlab]')."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapsewatch import connect
from collapsewatch.cli import app
from collapsewatch.ingest import IngestError, Tail, detect, ingest_file

swanlab = pytest.importorskip("swanlab")


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    # offline into tmp_path: no login, no upload; swanlab's own folder (credentials, settings) in tmp_path, not ~
    for key, value in {"SWANLAB_MODE": "offline", "SWANLAB_LOG_DIR": str(tmp_path / "swanlog"),
                       "SWANLAB_ROOT": str(tmp_path / "swanlab-root"), "SWANLAB_API_KEY": ""}.items():
        monkeypatch.setenv(key, value)


def start(tmp_path: Path, name: str):
    # verl's Tracking(default_backend="swanlab") (verl/utils/tracking.py): swanlab.init(project, experiment_name,
    # config={"FRAMEWORK": "verl", **config}, logdir=SWANLAB_LOG_DIR, mode=SWANLAB_MODE)
    return swanlab.init(project="p", experiment_name=name, config={"FRAMEWORK": "verl"},
                        logdir=str(tmp_path / "swanlog"), mode="offline")


def log_file(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "swanlog").glob("run-*/run-*.swanlab")
    return found


def test_verl_logger_rows_fill_the_catalogue_at_the_global_step(tmp_path, store):
    start(tmp_path, "verl")
    # Tracking.log → swanlab.log(data=data, step=step), once per global step; validation before training at step 0;
    # ValidationGenerationsLogger: the generations as a swanlab.echarts.Table under val/generations
    swanlab.log(data={"val-core/gsm8k/reward/mean@1": 0.125}, step=0)
    swanlab.log(data={"actor/entropy": 0.5, "actor/entropy_loss": 0.9, "critic/score/mean": 0.25,
                      "response_length/mean": 37.0, "actor/grad_norm": 1.5, "perf": {"throughput": 100.0}}, step=1)
    swanlab.log(data={"actor/entropy": 0.9}, step=1)  # a key again at a step: swanlab keeps the first (0.5)
    swanlab.log(data={"actor/entropy": 0.25, "critic/score/mean": 0.75, "response_length/mean": 41.0,
                      "actor/grad_norm": math.nan}, step=2)
    table = swanlab.echarts.Table()
    table.add(headers=["step", "input", "output", "score"], rows=[[2, "1+1=", "2", 1.0]])
    swanlab.log({"val/generations": table}, step=2)
    swanlab.finish()
    file = log_file(tmp_path)
    for path in (tmp_path / "swanlog", file.parent, file):
        assert detect(path).NAME == "swanlab"
    done = ingest_file(store, tmp_path / "swanlog", "verl")
    # steps 0, 1, 2; the table is one value that is not a number; the NaN kept
    assert (done.format, done.steps, done.summary) == (
        "swanlab", 3, "skipped 1 value(s) that are not numbers: 'val/generations' (a swanlab-echarts) ×1; "
                      "kept 1 non-finite value(s) (NaN / ±Inf)")
    con = connect(store)
    rows = con.execute("SELECT step, entropy_mean, reward_mean, response_length_mean, grad_norm FROM steps "
                       "ORDER BY step").fetchall()
    # step 1: actor/entropy 0.5 beats actor/entropy_loss 0.9 (listed first in KEY_MAP); critic/score/mean → reward
    assert rows[:2] == [(0, None, None, None, None), (1, 0.5, 0.25, 37.0, 1.5)]
    assert rows[2][:4] == (2, 0.25, 0.75, 41.0) and math.isnan(rows[2][4])
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM scalars").fetchall()}
    # verl's keys kept as logged; the nested dict as swanlab flattened it (with /); the table is no scalar
    assert {"actor/entropy_loss", "val-core/gsm8k/reward/mean@1", "perf/throughput"} <= keys
    assert "val/generations" not in keys
    # the wall time is swanlab's record time, a few seconds ago (not the ingest's clock)
    ts = con.execute("SELECT epoch(ts) FROM steps WHERE step = 1").fetchone()[0]
    assert time.time() - 600 < ts <= time.time()


def test_a_log_dir_with_several_runs_needs_source_run(tmp_path, store):
    ids = {}
    for name, ent in (("a", 0.5), ("b", 0.125)):
        run = start(tmp_path, name)
        swanlab.log({"actor/entropy": ent}, step=1)
        swanlab.finish()
        ids[name] = run.id
    folders = {f.parent.name: f for f in (tmp_path / "swanlog").glob("run-*/run-*.swanlab")}
    folder_of = {name: next(d for d, f in folders.items() if f.stem == f"run-{rid}") for name, rid in ids.items()}
    with pytest.raises(IngestError, match=r"holds 2 SwanLab run\(s\) \(.*; pass one with --source-run") as e:
        ingest_file(store, tmp_path / "swanlog", "w")
    # named by experiment name and folder, in one line
    assert "\n" not in str(e.value) and all(f"{n} ({d})" in str(e.value) for n, d in folder_of.items())
    with pytest.raises(IngestError, match="none is 'c'"):
        ingest_file(store, tmp_path / "swanlog", "w", source_run="c")
    # by experiment name (verl's experiment_name), by run id, by folder: a's entropy 0.5, b's 0.125
    for run_name, source in (("by-name", "a"), ("by-id", ids["b"]), ("by-folder", folder_of["a"])):
        assert ingest_file(store, tmp_path / "swanlog", run_name, source_run=source).steps == 1
    got = dict(connect(store).execute("SELECT run, entropy_mean FROM steps").fetchall())
    assert got == {"by-name": 0.5, "by-id": 0.125, "by-folder": 0.5}


def _long_run(tmp_path: Path) -> bytes:
    start(tmp_path, "long")
    for step in range(200):
        swanlab.log({"actor/entropy": step / 200}, step=step)
    swanlab.finish()
    return log_file(tmp_path).read_bytes()


def test_a_run_killed_mid_write_keeps_the_records_before_the_cut(tmp_path, store):
    data = _long_run(tmp_path)
    cut = tmp_path / "cut" / "run-x.swanlab"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) * 3 // 4])  # the last quarter lost, mid-record: the writer killed mid-write
    done = ingest_file(store, cut, "cut")
    assert "no finish record" in done.summary
    got = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    # the rows before the cut, each as logged (step s: s / 200); the ones after it are gone, not invented
    assert 0 < len(got) < 200 and got == [(s, s / 200) for s in range(len(got))]
    result = CliRunner().invoke(app, ["ingest", str(store), str(cut), "--run", "cli", "--no-detect"])
    assert result.exit_code == 0 and "no finish record" in result.output


def test_a_file_that_is_not_a_swanlab_log_says_so_in_one_line(tmp_path, store):
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"step": 1, "actor/entropy": 0.5}\n')
    (tmp_path / "empty").mkdir()
    for path in (jsonl, tmp_path / "empty"):
        with pytest.raises(IngestError, match="is not a SwanLab run log") as e:
            ingest_file(store, path, "x", "swanlab")
        assert str(e.value).startswith(repr(str(path))) and "\n" not in str(e.value)
    start(tmp_path, "r")
    swanlab.log({"actor/entropy": 0.5}, step=1)
    swanlab.finish()
    data = log_file(tmp_path).read_bytes()
    # byte 6 is the header's format version (2 in swanlab 0.10): another version is refused by swanlab's reader
    other = tmp_path / "other-version.swanlab"
    other.write_bytes(data[:6] + bytes([data[6] + 1]) + data[7:])
    with pytest.raises(IngestError, match=r"other-version.swanlab' could not be read by swanlab's reader: "
                                          r"Invalid run version") as e:
        ingest_file(store, other, "x")
    assert "\n" not in str(e.value)
    header_only = tmp_path / "header.swanlab"
    header_only.write_bytes(data[:7])
    with pytest.raises(IngestError, match="header.swanlab' holds no step rows"):
        ingest_file(store, header_only, "x")


def test_a_live_run_is_followed_step_by_step(tmp_path, store):
    data = _long_run(tmp_path)
    # swanlab appends to its file (flushed when its buffer fills, and at the end): a live file is a prefix of the
    # final one. The followed file grows through two prefixes of the real file, then the whole.
    live = tmp_path / "live" / "run-x.swanlab"
    live.parent.mkdir()
    live.write_bytes(data[: len(data) // 3])
    tail = Tail(store, live, "live")
    assert tail.format == "swanlab"
    first = tail.poll()  # every complete step but the newest (its keys may still be arriving)
    rows = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    assert 0 < first == len(rows) < 200 and rows == [(s, s / 200) for s in range(first)]
    live.write_bytes(data[: len(data) * 2 // 3])
    second = tail.poll()
    assert second > 0 and tail.poll() == 0  # nothing new: nothing taken twice
    live.write_bytes(data)
    done = tail.close()  # the rest, the newest step included
    assert (done.steps, done.summary) == (200, "")
    rows = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    assert rows == [(s, s / 200) for s in range(200)]
    assert connect(store).execute("SELECT status FROM runs WHERE run = 'live'").fetchone() == ("finished",)


def test_a_local_mode_run_reads_the_same(tmp_path, store, monkeypatch):
    # mode="local" also writes logs/<n>/*.log for swanlab's dashboard; its .swanlab file is the one read
    monkeypatch.setenv("SWANLAB_MODE", "local")
    swanlab.init(project="p", experiment_name="local", logdir=str(tmp_path / "swanlog"), mode="local")
    swanlab.log({"actor/entropy": 0.5, "critic/score/mean": 0.25}, step=1)
    swanlab.finish()
    assert any((tmp_path / "swanlog").glob("run-*/logs"))
    assert ingest_file(store, tmp_path / "swanlog", "local").steps == 1
    assert connect(store).execute("SELECT entropy_mean, reward_mean FROM steps").fetchall() == [(0.5, 0.25)]
