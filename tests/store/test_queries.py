"""The dashboard's query layer (collapsewatch.store.queries) on hand-written rows with known answers."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone

import numpy as np
import pytest

from collapsewatch.store import ReadOnlyQueryError, Store, queries
from collapsewatch.store.writer import StoreWriter


def _steps(w: StoreWriter, steps, **cols):
    n = len(steps)
    w.append("step_metrics", {"run": [w.run] * n, "rank": [w.rank] * n, "step": list(steps),
                              "ts": [datetime.now(timezone.utc)] * n,
                              "n_seqs": [4] * n, **cols})


def _scalars(w: StoreWriter, step: int, **kv):
    w.append("scalars", {"run": [w.run] * len(kv), "rank": [w.rank] * len(kv), "step": [step] * len(kv),
                         "key": list(kv), "value": list(kv.values())})


def _event(w: StoreWriter, phase: str, start: int, end: int, source: str = "online", detector: str = "lld"):
    w.append("events", {"run": [w.run], "rank": [w.rank], "detector": [detector], "phase": [phase],
                        "step_start": [start], "step_end": [end], "severity": ["warning"], "message": ["m"],
                        "evidence": [json.dumps({"slope": -0.01})], "source": [source]})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    # run "a": steps 0..9 in two segments; step 10 has scalars only (its probe row not written yet)
    a = StoreWriter(root, "a", heartbeat_s=3600)
    a.set_run_info(objective="grpo", config={"model": {"model_path": "/nowhere"}, "lr": 1e-6})
    _steps(a, range(0, 5), reward_mean=[0.1, 0.2, 0.3, 0.4, 0.5], on_policy=[False] * 5)
    for s in range(5):
        _scalars(a, s, grad_norm=float(s))
    a.flush()
    _steps(a, range(5, 10), reward_mean=[0.6, 0.7, 0.8, 0.9, 0.95], on_policy=[False] * 5)
    for s in range(5, 11):
        _scalars(a, s, grad_norm=float(s))
    _event(a, "early_stagnation", 1, 2)               # old: not active at last step 9
    _event(a, "steady_decay", 4, 6)
    _event(a, "steady_decay", 4, 8)                    # same episode extended: latest extent wins
    _event(a, "steady_decay", 4, 8, source="offline")  # seen offline too: still one episode
    # tokens of step 5: seq 0 (3 tokens, one a tool observation) and seq 1 (2 tokens)
    lr = np.array([math.log(0.5), math.log(2.0), np.nan, math.log(0.25), 0.0])
    a.append("tokens", {"run": ["a"] * 5, "rank": [0] * 5, "step": [5] * 5, "seq_id": [0, 0, 0, 1, 1],
                        "pos": [0, 1, 2, 0, 1], "token_id": [11, 12, 13, 21, 22], "mask": [True, True, False, True, True],
                        "log_ratio": lr, "ratio": np.exp(lr), "entropy": [1.0, 2.0, np.nan, 3.0, 5.0]})
    a.append("sequences", {"run": ["a"] * 2, "rank": [0, 0], "step": [5, 5], "seq_id": [0, 1],
                           "reward": [1.0, 0.0], "advantage": [0.5, -0.5], "correct": [True, False]})
    a.flush()
    # run "b": rank 1 only, finished, one step
    b = StoreWriter(root, "b", rank=1, world_size=2, heartbeat_s=3600)
    _steps(b, [0], reward_mean=[0.25], on_policy=[True])
    b.flush(status="finished")
    s = Store(root)
    yield s
    s.close()


def test_run_rows_status_and_lowest_rank(store):
    df = queries.run_rows(store).set_index("run")
    assert df.loc["a", "status"] == "running" and df.loc["b", "status"] == "finished"
    assert df.loc["a", "objective"] == "grpo" and df.loc["a", "rank"] == 0 and df.loc["b", "rank"] == 1
    assert queries.run_names(store) == ["b", "a"]  # most recently started first


def test_run_names_reads_a_run_row_again_only_when_its_folder_changed(tmp_path, monkeypatch):
    import os

    from collapsewatch.store.manifest import SETTLE_NS

    root = tmp_path / "s"
    for i, run in enumerate(["old", "mid", "new"]):  # started in this order: newest first is new, mid, old
        w = StoreWriter(root, run, heartbeat_s=3600)
        _steps(w, [0], reward_mean=[0.5], on_policy=[True])
        w.flush(status="finished")
        for path in (root / run / "runs", *(root / run / "runs").iterdir()):  # settled: changed 10 s + i ago
            os.utime(path, ns=(time.time_ns() - SETTLE_NS * 5 + i, time.time_ns() - SETTLE_NS * 5 + i))
    (root / "empty" / "runs").mkdir(parents=True)  # a run folder with no run row: not a run of the runs view
    os.utime(root / "empty" / "runs", ns=(time.time_ns() - SETTLE_NS * 5, time.time_ns() - SETTLE_NS * 5))
    s = Store(root)
    sql_order = s.query("SELECT run FROM runs ORDER BY started_at DESC, run")["run"].tolist()
    assert queries.run_names(s) == sql_order == ["new", "mid", "old"]

    def no_read(*a, **k):
        raise AssertionError("a run row was read")

    with monkeypatch.context() as m:  # nothing changed: the runs' starts are known, no run row is read
        m.setattr(s, "query", no_read)
        assert queries.run_names(s) == ["new", "mid", "old"]
    w = StoreWriter(root, "newest", heartbeat_s=3600)  # a new run: read (its folder is new), listed first
    _steps(w, [0], reward_mean=[0.5], on_policy=[True])
    w.flush(status="finished")
    assert queries.run_names(s) == ["newest", "new", "mid", "old"]
    s.close()


def test_runs_folders_are_looked_at_again_where_named_or_when_the_store_folder_changed(tmp_path):
    import os

    from collapsewatch.store import manifest

    past = time.time_ns() - manifest.SETTLE_NS * 10

    def settle(*paths):
        for p in paths:
            os.utime(p, ns=(past, past))

    root = tmp_path / "s"
    for run in ("a", "b"):
        w = StoreWriter(root, run, heartbeat_s=3600)
        _steps(w, [0], reward_mean=[0.5], on_policy=[True])
        w.flush(status="finished")
        settle(root / run / "runs")
    settle(root)
    manifest.clear()
    asked: list[list[str]] = []

    def none(names):
        asked.append(names)
        return set()

    first = manifest.runs_folder_mtimes(root, none)  # first look: every run folder (nothing asked)
    assert first == {"a": past, "b": past} and asked == []
    (root / "a" / "runs" / "x.tmp").touch()  # a's runs folder changes (as a run row replaced by hand)
    os.utime(root / "a" / "runs", ns=(past + 7, past + 7))
    settle(root)  # (the store folder is as it was)
    assert manifest.runs_folder_mtimes(root, none) == first  # a is not looked at: not named
    assert asked == [["a", "b"]]
    assert manifest.runs_folder_mtimes(root, lambda names: {"a"})["a"] == past + 7  # named: looked at
    assert manifest.runs_folder_mtimes(root)["a"] == past + 7  # without fresh: every one, as before
    # a writer started on b's folder (a resumed run): its first run row changes the store folder's mtime, and
    # the next look takes in every run folder, b's new mark too
    w = StoreWriter(root, "b", heartbeat_s=3600)
    assert os.stat(root).st_mtime_ns == past  # (not before its run row is written)
    w.flush(status="finished")
    assert os.stat(root).st_mtime_ns != past
    assert manifest.runs_folder_mtimes(root, none)["b"] == os.stat(root / "b" / "runs").st_mtime_ns != past
    # in turn: slices of 2 of 5 names, every name within 3 turns, wrapping
    names = list("abcde")
    assert [manifest.in_turn(names, t, 2) for t in range(3)] == [{"a", "b"}, {"c", "d"}, {"e", "a"}]
    assert manifest.in_turn([], 0, 2) == set() and manifest.in_turn(names, 4, 0) == set()


def test_run_info_parses_config_and_lowest_rank(store):
    info = queries.run_info(store, "a")
    assert info["objective"] == "grpo" and info["config"]["lr"] == 1e-6 and info["rank"] == 0
    assert queries.run_info(store, "b")["rank"] == 1
    assert queries.run_info(store, "nope") is None


def test_run_infos_reads_several_runs_at_once(store):
    # one query for "a" and "b" gives each run's own row: "a" rank 0 running with its config, "b" rank 1 finished
    # and no config ({}); an unknown name and a name no run can have map to None; a repeated name is read once
    infos = queries.run_infos(store, ["b", "a", "nope", "../x", "a"])
    assert list(infos) == ["b", "a", "nope", "../x"]
    assert infos["a"]["status"] == "running" and infos["a"]["config"]["lr"] == 1e-6 and infos["a"]["rank"] == 0
    assert infos["b"]["status"] == "finished" and infos["b"]["config"] == {} and infos["b"]["rank"] == 1
    assert infos["nope"] is None and infos["../x"] is None
    assert infos["a"] == queries.run_info(store, "a") and infos["b"] == queries.run_info(store, "b")


def test_step_rows_after_and_scalars_only_step(store):
    df = queries.step_rows(store, "a", ["reward_mean", "grad_norm"], after=7)
    assert df["step"].tolist() == [8, 9, 10]
    assert df["has_metrics"].tolist() == [True, True, False]  # step 10: scalars arrived, probe row not yet
    assert df["grad_norm"].tolist() == [8.0, 9.0, 10.0]
    assert df["reward_mean"].iloc[:2].tolist() == pytest.approx([0.9, 0.95])
    assert queries.step_rows(store, "b", ["reward_mean"], rank=1)["reward_mean"].tolist() == [0.25]
    assert queries.step_rows(store, "b", ["reward_mean"], rank=0).empty


def test_step_rows_reads_only_given_segments(store):
    segs = {t: [p for p, _ in queries.segment_files(store, "a", t)] for t in ("step_metrics", "scalars")}
    first = {t: files[:1] for t, files in segs.items()}  # the first flush: steps 0..4
    df = queries.step_rows(store, "a", ["reward_mean", "grad_norm"], files=first)
    assert df["step"].tolist() == [0, 1, 2, 3, 4] and df["grad_norm"].tolist() == [0, 1, 2, 3, 4]


def test_unknown_columns_never_reach_sql(store):
    with pytest.raises(ValueError, match="unknown step metric"):
        queries.step_rows(store, "a", ["reward_mean; DROP VIEW steps"])


def test_segment_steps_from_footers(store):
    files = [p for p, _ in queries.segment_files(store, "a", "step_metrics")]
    df = queries.segment_steps(store, files)
    assert df[["min_step", "max_step", "n_rows"]].values.tolist() == [[0, 4, 5], [5, 9, 5]]


def test_run_events_keep_latest_extent(store):
    df = queries.run_events(store, "a")
    assert df[["phase", "step_start", "step_end"]].values.tolist() == [["early_stagnation", 1, 2],
                                                                      ["steady_decay", 4, 8]]


def test_token_queries(store):
    steps = queries.token_steps(store, "a")
    assert steps.values.tolist() == [[5, 2, 2]]  # step 5: 2 sequences, largest position 2
    seqs = queries.token_sequences(store, "a", 5)
    assert seqs[["seq_id", "n_token_rows", "reward", "correct"]].values.tolist() == [[0, 3, 1.0, True],
                                                                                   [1, 2, 0.0, False]]
    toks = queries.sequence_tokens(store, "a", 5, 0)
    assert toks["pos"].tolist() == [0, 1, 2] and toks["mask"].tolist() == [True, True, False]
    assert toks["ratio"].iloc[:2].tolist() == pytest.approx([0.5, 2.0])
    assert queries.sequence_tokens(store, "a", 5, 0, rank=1).empty


def test_token_heatmap_geometric_mean_over_model_tokens(store):
    # position bin 0 (width 2) of step 5 holds model tokens with r = 0.5, 2.0 (seq 0) and 0.25, 1.0 (seq 1)
    # geometric mean = exp(mean(log r)) = (0.5·2·0.25·1)^(1/4) = 0.25^(1/4) ≈ 0.7071
    df = queries.token_heatmap(store, "a", "ratio", pos_bin=2)
    assert df[["step", "pos", "n"]].values.tolist() == [[5, 0, 4]]  # the mask-0 token at pos 2 is excluded
    assert df["value"].iloc[0] == pytest.approx(0.25 ** 0.25)
    ent = queries.token_heatmap(store, "a", "entropy")
    assert ent.set_index("pos")["value"].to_dict() == pytest.approx({0: 2.0, 1: 3.5})
    with pytest.raises(ValueError):
        queries.token_heatmap(store, "a", "logp); DROP VIEW x; --")


def test_compare_rows_stack_runs(store):
    df = queries.compare_rows(store, ["a", "b"], ["reward_mean"])
    assert df.groupby("run").size().to_dict() == {"a": 11, "b": 1}
    assert df[df["run"] == "b"]["reward_mean"].tolist() == [0.25]


def test_user_query_is_read_only_and_capped(store):
    with pytest.raises(ReadOnlyQueryError, match="read-only"):
        queries.user_query(store, "DROP VIEW steps")
    with pytest.raises(ReadOnlyQueryError):
        queries.user_query(store, "SELECT 1; INSERT INTO scalars VALUES ('a', 0, 0, 'k', 1)")
    df, more = queries.user_query(store, "SELECT step FROM steps WHERE run = 'a' ORDER BY step", max_rows=4)
    assert df["step"].tolist() == [0, 1, 2, 3] and more is True
    df, more = queries.user_query(store, "SELECT count(*) AS n FROM runs", max_rows=4)
    assert df["n"].tolist() == [2] and more is False
    with pytest.raises(ValueError, match="query failed"):
        queries.user_query(store, "SELECT no_such_column FROM steps")
