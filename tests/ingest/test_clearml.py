"""ClearML offline sessions written by the real clearml (Task.set_offline(True), into a tmp dir; nothing is sent):
verl's ClearMLLogger calls, HF's single values, the session folder / zip / metrics.jsonl / offline folder, several
sessions, a session cut mid-line, files that are not sessions, and a growing session followed. Each run is a
subprocess: Task.init patches the process it runs in (frameworks, streams, a resource monitor)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import IngestError, Tail, detect, ingest_file

pytest.importorskip("clearml")

WRITER = textwrap.dedent('''
    import math, sys, time
    import pandas as pd
    from clearml import Task

    name, steps, per_line = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lines"
    Task.set_offline(True)
    # verl's ClearMLLogger (verl/utils/tracking.py): Task.init(task_name, project_name, continue_last_task=True,
    # output_uri=False), the config connected, then per step and key: title, series = key.split("/", 1);
    # report_scalar(title, series, value, iteration=step)
    task = Task.init(task_name=name, project_name="p", continue_last_task=True, output_uri=False)
    task.connect_configuration({"trainer": {"total_epochs": 1}}, name="Hyperparameters")
    logger = task.get_logger()

    def log(data, step):
        for k, v in data.items():
            title, series = k.split("/", 1)
            logger.report_scalar(title=title, series=series, value=v, iteration=step)

    if name == "verl":
        log({"val-core/gsm8k/reward/mean@1": 0.125}, 0)
        log({"actor/entropy": 0.5, "actor/entropy_loss": 0.9, "critic/score/mean": 0.25,
             "response_length/mean": 37.0, "actor/grad_norm": 1.5}, 1)
        log({"actor/entropy": 0.25, "critic/score/mean": 0.75, "response_length/mean": 41.0,
             "actor/grad_norm": math.nan}, 2)
        # ValidationGenerationsLogger.log_generations_to_clearml: the generations as a table
        logger.report_table(title="Validation", series="Validation generations", iteration=2,
                            table_plot=pd.DataFrame([{"step": 2, "input": "1+1=", "output": "2", "score": 1.0}]))
        # HF's ClearMLCallback reports train_runtime, epoch … as single values
        logger.report_single_value(name="train_runtime", value=12.5)
    else:
        metrics = task.get_offline_mode_folder() / "metrics.jsonl"
        for step in range(steps):
            log({"actor/entropy": step / steps}, step)
            # one metrics.jsonl line per step, as a live run's reporter writes one per flush (every 5 s): flush, then
            # wait for the reporter to write the line
            while per_line and (not metrics.is_file() or len(metrics.read_text().splitlines()) <= step):
                logger.flush()
                time.sleep(0.05)
    task.mark_completed()
''')


def start(root: Path, *runs: tuple[str, int], lines: bool = False) -> tuple[Path, set[Path], list]:
    """Start WRITER once per (name, steps) under ``root``'s own ClearML cache, side by side in subprocesses (each
    sleeps most of its ~15 s: ClearML's reporter and its exit wait); :func:`finish` waits for them."""
    env = {**os.environ, "HOME": str(root), "CLEARML_CACHE_DIR": str(root / "cache"),
           "CLEARML_CONFIG_FILE": str(root / "none.conf"), "CLEARML_OFFLINE_MODE": "1"}
    before = set((root / "cache" / "offline").glob("offline-*"))
    procs = [(name, subprocess.Popen([sys.executable, "-c", WRITER, name, str(steps), "lines" if lines else "one"],
                                     env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
             for name, steps in runs]
    return root, before, procs


def finish(started: tuple[Path, set[Path], list]) -> list[Path]:
    """The offline session folders the writers of :func:`start` left, by task name in their order."""
    root, before, procs = started
    for _, p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    new = [p for p in (root / "cache" / "offline").glob("offline-*") if p.is_dir() and p not in before]
    by_name = {json.loads((p / "task.json").read_text())["name"]: p for p in new}
    assert len(new) == len(procs) == len(by_name)
    return [by_name[name] for name, _ in procs]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> dict[str, Path]:
    """Every session the module reads, written once, the independent ones side by side (≈ 30 s, not ≈ 70 s one
    after the other), each group under its own cache: ``verl`` (verl's logger calls, alone in its offline folder);
    ``b``, ``a2`` and then ``a1`` (a second run named "a") in one offline folder; ``long`` (4 steps, one
    metrics.jsonl line per step: ClearML's reporter writes one per 5 s flush)."""
    verl = start(tmp_path_factory.mktemp("clearml-verl"), ("verl", 0))
    several = start(tmp_path_factory.mktemp("clearml-several"), ("b", 4), ("a", 2))
    long = start(tmp_path_factory.mktemp("clearml-long"), ("long", 4), lines=True)
    (v,) = finish(verl)
    b, a2 = finish(several)
    (a1,) = finish(start(several[0], ("a", 1)))  # after the first "a": a second run of the same name
    (lg,) = finish(long)
    return {"verl": v, "b": b, "a2": a2, "a1": a1, "long": lg}


@pytest.fixture(scope="module")
def long_session(sessions) -> list[str]:
    """The lines of a real session's metrics.jsonl, one per step: step s logs actor/entropy = s / 4."""
    return (sessions["long"] / "metrics.jsonl").read_text().splitlines(keepends=True)


def test_verl_logger_rows_fill_the_catalogue_at_the_global_step(sessions, store):
    session = sessions["verl"]
    offline = session.parent
    for path in (offline, session, session.with_suffix(".zip"), session / "metrics.jsonl"):
        assert detect(path).NAME == "clearml"
    done = ingest_file(store, offline, "verl")
    # steps 0, 1, 2 (iterations); the table is one value that is not a number; the single value has no step
    assert (done.format, done.steps, done.summary) == (
        "clearml", 3, "skipped 1 value(s) that are not numbers: 'Validation/Validation generations' (a clearml-plot) "
                      "×1; left out 1 single value(s) (report_single_value: no step)")
    con = connect(store)
    rows = con.execute("SELECT step, entropy_mean, reward_mean, response_length_mean, grad_norm FROM steps "
                       "ORDER BY step").fetchall()
    # step 1: actor/entropy 0.5 beats actor/entropy_loss 0.9 (listed first in KEY_MAP); critic/score/mean → reward.
    # step 2's NaN grad norm: ClearML reports NaN as 0.0 (its default_nan_value) — the file holds 0.0, not NaN
    assert rows == [(0, None, None, None, None), (1, 0.5, 0.25, 37.0, 1.5), (2, 0.25, 0.75, 41.0, 0.0)]
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM scalars").fetchall()}
    # verl's keys come back as logged: title "/" series, split at the first "/" by verl's logger
    assert {"actor/entropy_loss", "val-core/gsm8k/reward/mean@1", "critic/score/mean"} <= keys
    ts = con.execute("SELECT epoch(ts) FROM steps WHERE step = 1").fetchone()[0]
    assert time.time() - 600 < ts <= time.time()  # the event's time (ms since the epoch), not the ingest's clock
    # the zip (written when the task closed) and the metrics.jsonl alone read the same
    for i, path in enumerate((session.with_suffix(".zip"), session / "metrics.jsonl")):
        assert ingest_file(store, path, f"again{i}").steps == 3


def test_an_offline_folder_with_several_sessions_needs_source_run(sessions, store):
    b, a2, a1 = sessions["b"], sessions["a2"], sessions["a1"]  # a1: a second run named "a"
    offline = b.parent
    with pytest.raises(IngestError, match=r"holds 3 ClearML run\(s\) \(.*; pass one with --source-run") as e:
        ingest_file(store, offline, "c")
    assert "\n" not in str(e.value) and all(f"({s.name})" in str(e.value) for s in (a1, a2, b))
    # verl's continue_last_task=True still makes a new offline session per run: two named "a"
    with pytest.raises(IngestError, match="2 are 'a': pass one's id"):
        ingest_file(store, offline, "c", source_run="a")
    # by task name (b: 4 steps) and by task id (a2: 2 steps)
    assert ingest_file(store, offline, "by-name", source_run="b").steps == 4
    assert ingest_file(store, offline, "by-id", source_run=a2.name).steps == 2


@pytest.mark.slow  # the sessions fixture waits ~25 s for the long session's reporter (4 lines × 5 s)
def test_a_session_cut_mid_line_keeps_the_lines_before_it(tmp_path, store, long_session):
    lines = long_session
    assert len(lines) == 4  # one line per flush, one flush per step
    cut = tmp_path / "cut" / "metrics.jsonl"
    cut.parent.mkdir()
    cut.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # killed while writing step 3's line
    done = ingest_file(store, cut, "cut")
    assert done.summary == "the last line is incomplete (a run still writing, or killed mid-write): left out"
    # steps 0, 1, 2 as logged (step s: s / 4); step 3's half line is not read, nothing invented
    got = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    assert got == [(0, 0.0), (1, 0.25), (2, 0.5)]
    # a bad line inside the file is a skipped row, named
    cut.write_text(lines[0] + "not json\n" + lines[1])
    assert ingest_file(store, cut, "bad").summary == "skipped 1 row(s): line 2 not JSON"


def test_a_file_that_is_not_a_clearml_session_says_so_in_one_line(tmp_path, store):
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"step": 1, "actor/entropy": 0.5}\n')
    assert detect(jsonl).NAME == "jsonl"  # a JSONL of objects is not ClearML's (lines of event lists)
    (tmp_path / "empty").mkdir()
    for path in (jsonl, tmp_path / "empty"):
        with pytest.raises(IngestError, match="is not a ClearML offline session") as e:
            ingest_file(store, path, "x", "clearml")
        assert str(e.value).startswith(repr(str(path))) and "\n" not in str(e.value)


@pytest.mark.slow  # the sessions fixture waits ~25 s for the long session's reporter (4 lines × 5 s)
def test_a_growing_session_is_followed_step_by_step(tmp_path, store, long_session):
    lines = long_session
    live = tmp_path / "live" / "metrics.jsonl"
    live.parent.mkdir()
    # ClearML appends one line per flush: the followed file grows through the real file's lines
    live.write_text("".join(lines[:2]) + lines[2][:10])  # steps 0, 1 and a line being written
    tail = Tail(store, live, "live")
    assert tail.format == "clearml" and tail.poll() == 1  # step 0; step 1 is the newest: it waits
    live.write_text("".join(lines[:4]))
    assert tail.poll() == 2 and tail.poll() == 0  # steps 1, 2; nothing taken twice
    live.write_text("".join(lines))
    done = tail.close()
    assert (done.steps, done.summary) == (4, "")
    got = connect(store).execute("SELECT step, entropy_mean FROM steps ORDER BY step").fetchall()
    assert got == [(0, 0.0), (1, 0.25), (2, 0.5), (3, 0.75)]  # s / 4
    assert json.loads(lines[0])[0]["type"] == "training_stats_scalar"
