"""Segment caches (dashboard.history): a refresh reads only the newest segments and stays exact."""

from __future__ import annotations

import pandas as pd
import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch.dashboard import history
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store import queries
from collapsewatch.store.compact import compact_run
from collapsewatch.store.queries import Store

SMALL = Shape(seqs=4, token_seqs=2, seq_len=12)


@pytest.fixture()
def live(tmp_path):
    run = SyntheticRun(tmp_path, "r", n_steps=100, shape=SMALL, flush_every=5, heartbeat_s=3600)
    run.write(until=20)
    store = Store(tmp_path)
    yield run, store
    store.close()


def _spy(monkeypatch, name):
    calls = []
    real = getattr(queries, name)

    def spy(*args, **kwargs):
        calls.append(kwargs.get("files"))
        return real(*args, **kwargs)

    monkeypatch.setattr(history.queries, name, spy)
    return calls


def test_step_history_reads_only_the_frontier_segments(live, monkeypatch):
    run, store = live
    hist = history.StepHistory("r", 0, COLUMNS)
    calls = _spy(monkeypatch, "step_rows")
    assert hist.rows_for(store, running=True)["step"].tolist() == list(range(20))
    assert len(calls[-1]["step_metrics"]) == 4  # first read: all four segments (steps 0–19)
    run.write(until=30)
    rows = hist.rows_for(store, running=True)
    # frontier = 19: the segment holding steps 15–19 is read again, plus the two new ones; not 0–14
    assert len(calls[-1]["step_metrics"]) == 3 and len(calls[-1]["scalars"]) == 3
    full = queries.step_rows(store, "r", COLUMNS)
    pd.testing.assert_frame_equal(rows.reset_index(drop=True), full, check_dtype=False)
    n_calls = len(calls)
    hist.rows_for(store, running=True)
    assert len(calls) == n_calls  # nothing new on disk: no read at all


def test_step_history_survives_compaction(live):
    run, store = live
    hist = history.StepHistory("r", 0, COLUMNS)
    before = hist.rows_for(store, running=True)
    compact_run(store.root, "r", export=False)
    after = hist.rows_for(store, running=True)
    assert len(queries.segment_files(store, "r", "step_metrics")) == 1
    pd.testing.assert_frame_equal(before.reset_index(drop=True), after.reset_index(drop=True), check_dtype=False)


def test_step_history_follows_a_run_that_compacts_live(tmp_path):
    run = SyntheticRun(tmp_path, "lc", n_steps=100, shape=SMALL, flush_every=5, heartbeat_s=3600)
    run.writer.compact_every = 3  # merges every 3 segments (15 steps) while the dashboard keeps its cache
    store = Store(tmp_path)
    hist = history.StepHistory("lc", 0, COLUMNS)
    try:
        for until in (10, 20, 35, 50, 80):
            run.write(until=until)
            rows = hist.rows_for(store, running=True).reset_index(drop=True)
            assert rows["step"].tolist() == list(range(until))
            pd.testing.assert_frame_equal(rows, queries.step_rows(store, "lc", COLUMNS), check_dtype=False)
        assert any("-compact-" in f for f, _ in queries.segment_files(store, "lc", "step_metrics"))
    finally:
        store.close()


def test_token_index_matches_direct_queries_and_computes_only_new_batches(live):
    run, store = live
    index = history.TokenIndex("r")
    pd.testing.assert_frame_equal(index.steps(store), queries.token_steps(store, "r"), check_dtype=False)
    grid = index.heatmap(store, "ratio", step_bin=3, pos_bin=2, base_pos_bin=2)
    direct = queries.token_heatmap(store, "r", "ratio", step_bin=3, pos_bin=2)
    assert grid[["step", "pos", "n"]].values.tolist() == direct[["step", "pos", "n"]].values.tolist()
    assert grid["value"].tolist() == pytest.approx(direct["value"].tolist())
    run.write(until=25)
    index.heatmap(store, "ratio", step_bin=3, pos_bin=2, base_pos_bin=2)
    batches = index.heat_parts[("ratio", 2)].batches
    assert sorted(len(b) for b in batches) == [1, 4]  # the first four segments, then the new one alone
    files = index.files_for(store, 22)
    assert len(files["tokens"]) == 1 and len(files["sequences"]) == 1
    toks = queries.sequence_tokens(store, "r", 22, 1, files=files["tokens"])
    pd.testing.assert_frame_equal(toks, queries.sequence_tokens(store, "r", 22, 1))


def test_event_log_keeps_latest_extent(tmp_path):
    run = SyntheticRun(tmp_path, "c", n_steps=100, shape=SMALL, flush_every=10)
    store = Store(tmp_path)
    log = history.EventLog("c")

    def episodes() -> list[list]:  # what the detectors hold now: one row per episode, latest extent
        return [[e.phase, e.step_start, e.step_end] for e in run.suite.episodes()]

    run.write(until=70)
    assert log.events(store)[["phase", "step_start", "step_end"]].values.tolist() == episodes()
    drift = [e for e in run.suite.episodes() if e.detector == "isdd"]
    assert len(drift) == 1 and drift[0].step_end == 69  # the ISDD drift has just opened at the last step
    run.write(until=80)
    ev = log.events(store)
    assert ev[["phase", "step_start", "step_end"]].values.tolist() == episodes()
    assert ev[ev["detector"] == "isdd"][["step_start", "step_end"]].values.tolist() == [[drift[0].step_start, 79]]
    pd.testing.assert_frame_equal(ev, queries.run_events(store, "c"), check_dtype=False)
    store.close()


def test_fixture_events_are_the_detectors_own(synth_store):
    # The synthetic store's events come from the real detectors: replaying the stored steps offline gives
    # the same episodes (online == offline), and their evidence has the detectors' keys.
    from collapsewatch.offline import detect_runs

    store = Store(synth_store)
    stored = queries.run_events(store, "collapse")
    store.close()
    offline = detect_runs(synth_store, run="collapse", write=False)
    key = ["detector", "phase", "step_start", "step_end", "severity"]
    assert stored[key].values.tolist() == offline.sort_values(["step_start", "detector"])[key].values.tolist()
    assert {"isdd", "lld"} <= set(stored["detector"])
    isdd = stored[stored["detector"] == "isdd"].iloc[0]
    assert "ratio_p50_pos_level" in isdd["evidence"] and "clip_low_frac" in isdd["evidence"]


def test_run_table_summarises_runs_and_flags(synth_store):
    store = Store(synth_store)
    history.clear()
    df = history.run_table(store, COLUMNS).set_index("run")
    assert df.loc["collapse", "n_steps"] == 120 and df.loc["collapse", "last_step"] == 119
    # what the real detectors flag on the seeded 120-step collapse story (see test_fixture_events_are_the_detectors_own)
    assert df.loc["collapse", "active_flags"] == "isdd:drift, length:blowup, lld:accelerated_collapse, mismatch:drift"
    assert df.loc["collapse", "n_events"] == 5 and df.loc["collapse", "n_active"] == 4
    assert bool(df.loc["onpolicy", "on_policy"]) and pd.isna(df.loc["onpolicy", "last_ratio_p50_pos"])
    last = queries.step_rows(store, "collapse", ["reward_mean"])["reward_mean"].iloc[-1]
    assert df.loc["collapse", "last_reward"] == pytest.approx(last)
    store.close()
