"""Ingesting logged scalars of a run made without the monitor."""

import json

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file


def test_trainer_state_json(tmp_path, store):
    state = {"log_history": [{"step": 1, "loss": 0.5, "learning_rate": 1e-5, "clip_ratio/region_mean": 0.02},
                             {"step": 2, "loss": 0.4, "learning_rate": 1e-5, "grad_norm": 3.0},
                             {"epoch": 1.0, "train_runtime": 10.0}]}  # no step: skipped
    f = tmp_path / "trainer_state.json"
    f.write_text(json.dumps(state))
    assert ingest_file(store, f, "old") == 2
    con = connect(store)
    assert con.execute("SELECT step, loss, lr, grad_norm FROM steps ORDER BY step").fetchall() == [
        (1, 0.5, 1e-5, None), (2, 0.4, 1e-5, 3.0)]
    assert con.execute("SELECT value FROM scalars WHERE key = 'clip_ratio/region_mean'").fetchall() == [(0.02,)]
    assert con.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    # per-token metrics cannot come from logs: NULL, not 0
    assert con.execute("SELECT ratio_p50_pos FROM steps WHERE step = 1").fetchone() == (None,)


def test_bad_files(tmp_path, store):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        ingest_file(store, bad, "r")
    with pytest.raises(ValueError, match="does not exist"):
        ingest_file(store, tmp_path / "missing.jsonl", "r")
    lines = tmp_path / "ok.jsonl"
    lines.write_text('{"step": 0, "grad_norm": 1.5}\n')
    ingest_file(store, lines, "r")
    with pytest.raises(ValueError, match="already exists"):
        ingest_file(store, lines, "r")


def test_verl_log_into_an_object_store_and_a_run_name_not_reused(tmp_path, monkeypatch):
    # verl's {"step", "data"} lines into an s3:// store on a real S3-compatible server (moto, 127.0.0.1); a second
    # ingest under the same name is refused, also from "another machine" (an empty local spool)
    from tests.store import s3server

    server = s3server.start()
    try:
        server.create_bucket("cw-ingest")
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
        url = "s3://cw-ingest/p"
        log = tmp_path / "verl.jsonl"
        log.write_text('{"step": 1, "data": {"actor/ppo_kl": 0.01, "actor/grad_norm": 2.0}}\n')
        assert ingest_file(url, log, "v") == 1
        con = connect(url)
        assert con.execute("SELECT key, value FROM scalars ORDER BY key").fetchall() == [
            ("actor/grad_norm", 2.0), ("actor/ppo_kl", 0.01), ("grad_norm", 2.0), ("ppo_kl", 0.01)]
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "other-machine"))
        with pytest.raises(ValueError, match="already exists"):
            ingest_file(url, log, "v")
    finally:
        server.stop()
