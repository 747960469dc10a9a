"""Tracker sinks, offline with the real libraries: one real Monitor run (tests/sinks_run.py: a grad explosion episode
rising info → warning → critical) writes TensorBoard, MLflow, W&B, trackio and SwanLab at once; each tracker's files
are read back (TensorBoard, W&B, trackio and SwanLab scalars with the project's own ingest readers, MLflow with its
client) and compared with what the store holds. Then ``watch --to`` on a stored run, a refusal and a failing sink."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch.alerts import event_headline
from collapsewatch.judge import judge
from collapsewatch.series import SERIES
from collapsewatch.sinks import SEVERITY_SCALAR, SinkUnavailable, make_sink, run_verdict
from collapsewatch.store import Store
from tests.conftest import child_env, cli
from tests.sinks_run import RULES, first, grad_run

SEVERITY_AT = {40: 1, 42: 2, 43: 3}
"""The severity points every tracker gets (tests/sinks_run.py): info (1) at 40, warning (2) at 42, critical (3) at 43;
steps 41 (still info) and the critical episode's later steps are not news."""
EPISODE = {"run": "g", "detector": "grad", "phase": "explosion", "step_start": 40, "step_end": 43,
           "severity": "critical"}
"""The episode as the store ends with it (asserted against the store in ``tracked``)."""


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    root = tmp_path_factory.mktemp("sinks")
    env = child_env(**{"WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true",
                       "TRACKIO_DIR": str(root / "trackio"), "SWANLAB_MODE": "offline",
                       "SWANLAB_LOG_DIR": str(root / "swanlog"), "SWANLAB_ROOT": str(root / "swanlab-root"),
                       "SWANLAB_API_KEY": ""})  # no MLFLOW_ALLOW_FILE_STORE: the sink's folder store needs none
    sinks = [f"tensorboard:{root / 'tb'}", f"mlflow:{root / 'mlruns'}", "wandb:cw", "trackio:cw", "swanlab:cw"]
    argv = [sys.executable, "-m", "tests.sinks_run", str(root / "store"), str(root / "events.json"), *sinks]
    p = subprocess.run(argv,
                       cwd=Path(__file__).parent.parent, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "sink failed" not in p.stderr, p.stderr[-3000:]
    events = json.loads((root / "events.json").read_text())
    store = Store(root / "store")
    stored = judge(store, "g", RULES).events.to_dict("records")  # the run's own settings
    store.close()
    assert [{k: e[k] for k in EPISODE if k != "run"} for e in stored] == [{k: v for k, v in EPISODE.items()
                                                                           if k != "run"}]
    reported = [first(events, 40, "info"), first(events, 42, "warning"), first(events, 43, "critical")]
    return root, reported, run_verdict(root / "store", "g", RULES)


def _table_row(reported) -> dict:
    """The episodes table's one row: the episode as the store holds it, its headline from its last reported version
    (critical, steps 40–43: the same as the store's)."""
    return {**EPISODE, "text": event_headline(reported[-1])}


def test_the_severity_scalar_is_no_series_name():
    # the sink's point per reported episode and the series' worst so far (collapsewatch/severity) are two lines: under
    # one tag a tracker drew them as one, stepping back in time
    assert SEVERITY_SCALAR == "collapsewatch/episode_severity"
    assert SEVERITY_SCALAR not in {s.key for s in SERIES}


def test_tensorboard(tracked):
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator

    from collapsewatch.ingest.tensorboard import Snapshot
    root, reported, verdict = tracked
    logdir = root / "tb" / "g"
    assert {r.step: r.values for r in Snapshot(logdir).records()} == {s: {SEVERITY_SCALAR: v}
                                                                      for s, v in SEVERITY_AT.items()}
    acc = EventAccumulator(str(logdir), size_guidance={TENSORS: 0})
    acc.Reload()
    text = {tag.removesuffix("/text_summary"): [(e.step, e.tensor_proto.string_val[0].decode())
                                                for e in acc.Tensors(tag)] for tag in acc.Tags()[TENSORS]}
    assert text["collapsewatch/events"] == [(e["step_end"], event_headline(e)) for e in reported]
    assert text["collapsewatch/verdict"] == [(45, f"**{verdict['status']}** — {verdict['sentence']}")]
    [(step, table)] = text["collapsewatch/episodes"]
    row = _table_row(reported)
    assert step == 45 and table.splitlines()[-1] == "| " + " | ".join(str(v) for v in row.values()) + " |"


def test_mlflow(tracked, monkeypatch):
    from mlflow import MlflowClient

    root, reported, verdict = tracked
    (root / "mlflow-read").mkdir()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the folder store: fast to open (no migrations)
    client = MlflowClient(tracking_uri=str(root / "mlruns"))
    exp = client.get_experiment_by_name("collapsewatch")
    [run] = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "g" and run.info.status == "FINISHED"
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("collapsewatch.")}
    assert tags == {"collapsewatch.run": "g", "collapsewatch.verdict": verdict["status"],
                    "collapsewatch.verdict_sentence": verdict["sentence"], "collapsewatch.worst": "critical",
                    "collapsewatch.n_episodes": "1", "collapsewatch.last_event": event_headline(reported[-1])}
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, SEVERITY_SCALAR)] == \
        [(s, float(v)) for s, v in SEVERITY_AT.items()]
    # log_table's artifact: {"columns": [...], "data": [[...], ...]} (what mlflow.load_table reads)
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "collapsewatch/episodes.json",
                                                      str(root / "mlflow-read"))).read_text())
    assert [dict(zip(table["columns"], r, strict=True)) for r in table["data"]] == [_table_row(reported)]


def test_wandb(tracked):
    from collapsewatch.ingest.wandb_run import Parser, read

    root, reported, verdict = tracked
    parser = Parser()
    rows = {r.step: r.values for r in read(root / "wandb", parser=parser)}
    assert {s: v[SEVERITY_SCALAR] for s, v in rows.items() if SEVERITY_SCALAR in v} == SEVERITY_AT
    # alerts at warning (WARN) and critical (ERROR) only, one per (run, episode, severity)
    assert parser.alerts == [
        {"level": lvl, "text": event_headline(e), "wait_duration": "60000",
         "title": f"collapsewatch {e['severity']}: g grad/explosion from step 40"}
        for lvl, e in (("WARN", reported[1]), ("ERROR", reported[2]))]
    summary = {k: v for k, v in parser.summary.items()
               if k.startswith("collapsewatch/") and not k.startswith("collapsewatch/episodes")}
    assert summary == {SEVERITY_SCALAR: 3, "collapsewatch/step": 45, "collapsewatch/verdict": verdict["status"],
                       "collapsewatch/verdict_sentence": verdict["sentence"], "collapsewatch/worst": "critical",
                       "collapsewatch/n_episodes": 1}
    [path] = (root / "wandb").glob("offline-run-*/files/media/table/collapsewatch/episodes_*.table.json")
    table = json.loads(path.read_text())
    assert [dict(zip(table["columns"], r, strict=True)) for r in table["data"]] == [_table_row(reported)]


def test_trackio(tracked):
    from trackio import sqlite_storage

    from collapsewatch.ingest.trackio_db import read

    root, reported, verdict = tracked
    rows = {r.step: r.values for r in read(root / "trackio" / "cw.db")}
    assert {s: v[SEVERITY_SCALAR] for s, v in rows.items() if SEVERITY_SCALAR in v} == SEVERITY_AT
    assert rows[45]["collapsewatch/episodes"]["_type"] == "trackio.table"
    before, sqlite_storage.TRACKIO_DIR = sqlite_storage.TRACKIO_DIR, root / "trackio"
    try:  # trackio's own reader, as the ingest reader uses it
        alerts = sqlite_storage.SQLiteStorage.get_alerts("cw", run_name="g")
    finally:
        sqlite_storage.TRACKIO_DIR = before
    got = sorted((a["step"], a["level"], a["title"], a["text"]) for a in alerts)
    assert got == [*((e["step_end"], {"info": "info", "warning": "warn", "critical": "error"}[e["severity"]],
                      f"collapsewatch {e['severity']}: g grad/explosion from step 40", event_headline(e))
                     for e in reported),
                   (45, "error", f"collapsewatch verdict: {verdict['status']}", verdict["sentence"])]


def test_swanlab(tracked):
    from collapsewatch.ingest.swanlab_run import read

    root, reported, verdict = tracked
    rows = {r.step: r.values for r in read(root / "swanlog") if hasattr(r, "values")}
    assert {s: v[SEVERITY_SCALAR] for s, v in rows.items() if SEVERITY_SCALAR in v} == SEVERITY_AT
    assert all(rows[e["step_end"]]["collapsewatch/events"] == {"_type": "swanlab-text"} for e in reported)
    # swanlab keeps each text in media/text/<step>-<hash>.txt
    [run_dir] = (root / "swanlog").glob("run-*")
    texts = {p.read_text() for p in (run_dir / "media" / "text").glob("*.txt")}
    assert texts == {*(event_headline(e) for e in reported), f"{verdict['status']}: {verdict['sentence']}"}


def test_watch_to_tensorboard_keeps_stdout_json(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator

    run = SyntheticRun(tmp_path / "store", "collapse", n_steps=300, shape=Shape(seqs=8, token_seqs=2, seq_len=24))
    run.write()
    run.close()
    p = subprocess.run([sys.executable, "-m", "collapsewatch", "watch", str(tmp_path / "store"), "--once", "--json",
                        "--to", f"tensorboard:{tmp_path / 'tb'}"], capture_output=True, text=True, timeout=180)
    assert p.returncode == 2, p.stderr
    *lines, verdict = [json.loads(line) for line in p.stdout.splitlines()]  # stdout: JSON lines only
    acc = EventAccumulator(str(tmp_path / "tb" / "collapse"), size_guidance={TENSORS: 0})
    acc.Reload()
    texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("collapsewatch/events/text_summary")]
    assert len(lines) > 3 and texts == [(e["step_end"], event_headline(e)) for e in lines]
    [v] = [e.tensor_proto.string_val[0].decode() for e in acc.Tensors("collapsewatch/verdict/text_summary")]
    assert v == f"**{verdict['status']}** — {verdict['sentence']}" and verdict["status"] == "collapsed"


def test_refusals_are_one_line(tmp_path, monkeypatch):
    from collapsewatch.store import StoreWriter

    StoreWriter(tmp_path, "r").flush("finished")  # a store: the refusal is the sink's, not "not a store"
    p = cli("watch", str(tmp_path), "--once", "--to", "neptune")  # in this process; an escaping exception fails
    assert p.returncode == 1 and "unknown sink 'neptune'" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    with pytest.raises(ValueError, match=r"^unknown sink 'neptune': one of tensorboard:DIR, mlflow"):
        make_sink("neptune")
    # a library that is not installed (its finder says so): refused when the sink is made, naming the extra
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(SinkUnavailable, match=r"^the wandb sink needs the wandb package: "
                                              r"pip install 'collapsewatch\[wandb\]'$"):
        make_sink("wandb:p")


def test_a_failing_sink_is_logged_once_and_training_goes_on(tmp_path, caplog):
    (tmp_path / "tb").write_text("a file, not a folder")  # SummaryWriter cannot make its log dir under it
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        events = grad_run(tmp_path / "store", [f"tensorboard:{tmp_path / 'tb'}"])
    assert len(events) >= 4 and run_verdict(tmp_path / "store", "g")["last_step"] == 45
    failed = [r.getMessage() for r in caplog.records if "sink failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].startswith(f"collapsewatch: the tensorboard:{tmp_path / 'tb'} sink failed (")
    assert failed[0].endswith("; its later errors are not logged, a failure stops neither training nor watch")


def test_a_failing_sink_in_watch_says_watch_goes_on(tmp_path, caplog):
    """Inside ``collapsewatch watch`` nothing trains: the line said "training goes on" there too. Its only sink
    failing, watch ends saying so in one line with exit 3 (it exited 0: a script could not tell nothing arrived)."""
    from collapsewatch.follow import EXIT_SINKS_FAILED
    from collapsewatch.store import StoreWriter

    StoreWriter(tmp_path / "store", "r").flush("finished")
    (tmp_path / "tb").write_text("a file, not a folder")
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        p = cli("watch", str(tmp_path / "store"), "--once", "--to", f"tensorboard:{tmp_path / 'tb'}")
    assert p.stdout == "r: No steps recorded: nothing to judge.\n"  # the verdict was still printed
    # the sink's own line is watch's warning on stderr (not the library's log), then watch's line naming it
    [line, last] = p.stderr.splitlines()
    assert (p.returncode, EXIT_SINKS_FAILED) == (3, 3) and last == (
        f"error: every sink failed to deliver (tensorboard:{tmp_path / 'tb'}): what watch reported reached none of them")
    assert line.startswith(f"warning: the tensorboard:{tmp_path / 'tb'} sink failed (")
    assert "training goes on" not in line and line.endswith("a failure stops neither training nor watch")
    assert not [r for r in caplog.records if "sink failed" in r.getMessage()]


def test_watch_with_some_sinks_failing_names_them_and_exits_0(tmp_path, caplog):
    from collapsewatch.store import StoreWriter

    StoreWriter(tmp_path / "store", "r").flush("finished")
    (tmp_path / "bad").write_text("a file, not a folder")
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        p = cli("watch", str(tmp_path / "store"), "--once", "--to", f"tensorboard:{tmp_path / 'bad'}",
                "--to", f"tensorboard:{tmp_path / 'good'}")
    # the second sink wrote the verdict into good/r/; 1 of the 2 failed: named by its log dir (both are tensorboard
    # sinks: "tensorboard" alone could be either), exit 0 (nothing critical)
    assert p.returncode == 0 and list((tmp_path / "good" / "r").glob("events.out.tfevents.*"))
    [line, last] = p.stderr.splitlines()
    assert last == f"warning: 1 of 2 sinks failed to deliver (tensorboard:{tmp_path / 'bad'}); the others delivered"
    assert line.startswith(f"warning: the tensorboard:{tmp_path / 'bad'} sink failed (")
    assert not [r for r in caplog.records if "sink failed" in r.getMessage()]


def test_every_sink_is_named_by_its_kind_and_target_and_never_by_a_secret():
    """The label every message names a sink by (``Sink.label``): ``KIND:WHERE`` as ``--to`` took it, so two sinks of
    one kind read apart; of a URL with a host, its scheme and host (and a path where not http(s)) — a user and
    password, a query, an http(s) path (a webhook's token) are never shown; the kind alone for its default target."""
    specs = ["tensorboard:tb/a", "tensorboard:tb/b", "mlflow", "mlflow:sqlite:///mlflow.db",
             "mlflow:https://bob:pw@mlflow.example:5000/api?token=t", "mlflow:postgresql://bob:pw@db:5432/mlflow",
             "wandb", "wandb:proj", "trackio:proj", "swanlab:proj", "https://hooks.slack.com/services/T0/B0/s3cret",
             "discord:https://bob:pw@discord.com/api/webhooks/1/s3cret"]
    assert [make_sink(s).label for s in specs] == [
        "tensorboard:tb/a", "tensorboard:tb/b", "mlflow", "mlflow:sqlite:///mlflow.db", "mlflow:https://mlflow.example:5000",
        "mlflow:postgresql://db:5432/mlflow", "wandb", "wandb:proj", "trackio:proj", "swanlab:proj",
        "webhook:https://hooks.slack.com", "webhook:https://discord.com"]


def test_watch_with_a_refusing_webhook_and_a_critical_exits_2_and_says_no_sink_delivered(collapsed, receiver):
    # the collapsed run reports criticals (exit 2 wins over 3); the one sink, --notify, got HTTP 500 for each POST:
    # the webhook's own line (once per host), then watch's line naming it
    # the hook's path stands for a Slack webhook's token: every line names the hook by scheme and host alone
    receiver.status = 500
    p = cli("watch", str(collapsed), "--once", "--notify", f"{receiver.url}/services/T0/B0/s3cret")
    assert p.returncode == 2 and receiver.got and "s3cret" not in p.stderr
    assert p.stderr.splitlines()[-2] == (f"warning: the webhook:{receiver.url} sink failed (the receiver answered HTTP "
                                         "500); its later errors are not logged, a failure stops neither training nor "
                                         "watch")
    assert p.stderr.splitlines()[-1] == (f"error: every sink failed to deliver (webhook:{receiver.url}): what watch "
                                         "reported reached none of them")


@pytest.mark.parametrize("option", ["--notify", "--to"])
def test_a_failing_webhook_reads_the_same_under_watch_whichever_option_made_it(collapsed, option):
    # nothing listens on port 1: every POST is refused. The webhook's one line was "warning: the webhook:… sink
    # failed" with --notify and "collapsewatch: the webhook:… sink failed" (the library's log) with --to: now both are
    # watch's warning on stderr (follow._sinks: one Sinks, one warn), named by scheme and host (no path: 'x' is gone)
    p = cli("watch", str(collapsed), "--once", option, "http://127.0.0.1:1/x")
    [line, last] = p.stderr.splitlines()[-2:]
    assert p.returncode == 2  # the collapsed run reports criticals: 2 wins over 3 (no sink delivered)
    assert line.startswith("warning: the webhook:http://127.0.0.1:1 sink failed (") and line.endswith(
        "); its later errors are not logged, a failure stops neither training nor watch")
    assert last == ("error: every sink failed to deliver (webhook:http://127.0.0.1:1): what watch reported reached "
                    "none of them")
    assert sum(" sink failed (" in ln for ln in p.stderr.splitlines()) == 1  # once per sink, whatever it sent


@pytest.fixture(scope="module")
def collapsed(tmp_path_factory) -> Path:
    """A store holding one finished synthetic run, ``collapse`` (its verdict: collapsed)."""
    root = tmp_path_factory.mktemp("collapsed") / "store"
    run = SyntheticRun(root, "collapse", n_steps=300, shape=Shape(seqs=8, token_seqs=2, seq_len=24))
    run.write()
    run.close()
    return root


@pytest.mark.parametrize("as_uri", [True, False], ids=["file-uri", "path"])
def test_mlflow_writes_a_folder_store_and_leaves_the_environment_as_it_was(collapsed, tmp_path, monkeypatch, caplog,
                                                                           as_uri):
    """MLflow ≥ 3.7 refuses its folder store unless MLFLOW_ALLOW_FILE_STORE is set (it said so, and nothing was
    written): ``--to mlflow:FOLDER`` sets it for the sink's own calls only."""
    from mlflow import MlflowClient

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    folder = tmp_path / "mlruns"
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        p = cli("watch", str(collapsed), "--once", "--to", f"mlflow:{folder.as_uri() if as_uri else folder}")
    assert p.returncode == 2, p.stderr  # a critical episode was reported
    assert not [r for r in caplog.records if "sink failed" in r.getMessage()]
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # to read it back
    client = MlflowClient(tracking_uri=str(folder))
    [run] = client.search_runs([client.get_experiment_by_name("collapsewatch").experiment_id])
    assert (run.info.run_name, run.info.status, run.data.tags["collapsewatch.verdict"]) == \
        ("collapse", "FINISHED", "collapsed")


def test_trackio_without_a_project_outside_a_trackio_run_writes_to_the_default_project(collapsed, tmp_path):
    """``--to trackio`` with no trackio run open (``watch`` opens none) failed at its first alert ("Call trackio.init()
    before trackio.alert()") and wrote nothing; it now opens a run per collapsewatch run in the project
    ``collapsewatch``, as the W&B sink does. In its own process: trackio reads ``TRACKIO_DIR`` when imported."""
    from trackio import sqlite_storage

    p = subprocess.run([sys.executable, "-m", "collapsewatch", "watch", str(collapsed), "--once", "--to", "trackio"],
                       env=child_env(TRACKIO_DIR=str(tmp_path / "trackio")), capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 2 and "sink failed" not in p.stderr, p.stderr[-3000:]
    before, sqlite_storage.TRACKIO_DIR = sqlite_storage.TRACKIO_DIR, tmp_path / "trackio"
    try:
        alerts = sqlite_storage.SQLiteStorage.get_alerts("collapsewatch", run_name="collapse")
    finally:
        sqlite_storage.TRACKIO_DIR = before
    assert "collapsewatch verdict: collapsed" in {a["title"] for a in alerts}


def test_a_failure_line_shows_no_credential_or_token_a_librarys_error_quotes():
    # a tracking library's error names the URI it failed on; the line keeps each URL's scheme and host (and a non-http
    # path) and drops the user:password, the query and an http(s) path — by hand, from webhooks.shown's rule
    from collapsewatch.sinks.base import failed_line
    from collapsewatch.webhooks import scrubbed

    why = ("MlflowException: API request to https://bob:pw@mlflow.example:5000/api/2.0/runs?token=t failed; "
           "tried postgresql://bob:pw@db:5432/mlflow and (https://hooks.slack.com/services/T0/B0/s3cret)")
    assert scrubbed(why) == ("MlflowException: API request to https://mlflow.example:5000 failed; tried "
                             "postgresql://db:5432/mlflow and (https://hooks.slack.com)")
    line = failed_line("mlflow:https://mlflow.example:5000", why)
    assert "pw" not in line and "s3cret" not in line and "token" not in line
    assert scrubbed("no URL here: tb/a") == "no URL here: tb/a"
