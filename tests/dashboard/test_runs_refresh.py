"""The runs page's refresh reads again only the runs that changed since the last refresh and the running ones
(``history.run_table``), and its rows are the rows a fresh read gives."""

from __future__ import annotations

import pandas as pd
import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch import judge
from collapsewatch.dashboard import history
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store import manifest, segments
from collapsewatch.store.queries import Store

SMALL = Shape(seqs=4, token_seqs=2, seq_len=12)


@pytest.fixture()
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(history, "SETTLE_NS", 0)  # the folders were written a moment ago; their mtimes are exact
    history.clear()
    made = []
    for i in range(3):
        run = SyntheticRun(tmp_path / "s", f"done{i}", n_steps=30, shape=SMALL, flush_every=10, heartbeat_s=3600)
        run.write()
        run.close()
        made.append(run)
    live = SyntheticRun(tmp_path / "s", "live", n_steps=60, shape=SMALL, flush_every=5, heartbeat_s=3600)
    live.write(until=20)
    yield tmp_path / "s", live
    history.clear()
    manifest.clear()


def _spy(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = history._computed
    monkeypatch.setattr(history, "_computed", lambda store, r, columns: calls.append(r["run"]) or real(store, r, columns))
    return calls


def _fresh(root) -> pd.DataFrame:
    """The table as a new process reads it: nothing kept in memory or on disk."""
    history.clear()
    manifest.clear()
    segments._verdicts.clear()
    judge.clear()
    for d in manifest.store_dir(root).glob("*/"):
        for f in d.glob("*.json"):
            f.unlink()
    return history.run_table(Store(root), COLUMNS)


def test_a_refresh_reads_only_the_running_and_the_changed_runs(runs, monkeypatch):
    root, live = runs
    store = Store(root)
    calls = _spy(monkeypatch)
    first = history.run_table(store, COLUMNS)
    assert sorted(calls) == ["done0", "done1", "done2", "live"] and len(first) == 4
    calls.clear()
    history.run_table(store, COLUMNS)
    assert calls == ["live"]  # three finished runs, unchanged: not read
    live.write(until=40)
    again = history.run_table(store, COLUMNS)
    assert calls == ["live", "live"]
    assert again.set_index("run").loc["live", "last_step"] == 39
    SyntheticRun(root, "late", n_steps=10, shape=SMALL, flush_every=10, heartbeat_s=3600).write()
    calls.clear()
    got = history.run_table(store, COLUMNS)
    assert sorted(calls) == ["late", "live"] and len(got) == 5
    expected = _fresh(root)
    pd.testing.assert_frame_equal(got.drop(columns="updated_at"), expected.drop(columns="updated_at"),
                                  check_dtype=False)


def test_a_finished_run_is_computed_once_across_processes(runs, monkeypatch):
    root, _ = runs
    history.run_table(Store(root), COLUMNS)
    history.clear()  # a new process: the table is not in memory, the rows kept on disk are
    calls = _spy(monkeypatch)
    real_judgement = history.judgement
    judged: list[str] = []
    monkeypatch.setattr(history, "judgement", lambda store, run, *a, **k: judged.append(run) or
                        real_judgement(store, run, *a, **k))
    history.run_table(Store(root), COLUMNS)
    assert sorted(calls) == ["done0", "done1", "done2", "live"]
    assert judged == ["live"]  # the finished runs' rows came from disk


def test_an_unchanged_store_gives_the_last_refreshs_frame_and_grid_rows(runs):
    from datetime import datetime, timezone

    from collapsewatch.dashboard import tables

    root, live = runs
    live.write()
    live.close()  # every run finished: a refresh has nothing to read again
    store = Store(root)
    now = datetime.now(timezone.utc)
    first = history.run_table(store, COLUMNS)
    second = history.run_table(store, COLUMNS)
    assert second.attrs[tables.RUNS_VERSION] == first.attrs[tables.RUNS_VERSION]  # the same rows
    pd.testing.assert_frame_equal(first, second)
    grid = tables.runs_rows(first, now)
    assert tables.runs_rows(second, now) == grid  # the kept grid rows, ages recomputed at the same `now`
    # a run added: a new version, and the grid rows are those of the new frame, as a frame never seen gives them
    SyntheticRun(root, "late", n_steps=10, shape=SMALL, flush_every=10, heartbeat_s=3600).write()
    third = history.run_table(store, COLUMNS)
    assert third.attrs[tables.RUNS_VERSION] != second.attrs[tables.RUNS_VERSION] and len(third) == 5
    unversioned = third.copy()
    unversioned.attrs = {}
    assert tables.runs_rows(third, now) == tables.runs_rows(unversioned, now)
    assert "late" in {r["name"] for r in tables.runs_rows(third, now)}
