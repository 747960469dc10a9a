"""The runs page's refresh reads again only the runs that changed since the last refresh and the running ones
(``history.run_table``), and its rows are the rows a fresh read gives."""

from __future__ import annotations

import pandas as pd
import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch import judge
from collapsewatch.dashboard import history, tables
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store import manifest, segments
from collapsewatch.store.queries import Store
from collapsewatch.store.writer import StoreWriter

SMALL = Shape(seqs=4, token_seqs=2, seq_len=12)


@pytest.fixture()
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(manifest, "SETTLE_NS", 0)  # the folders were written a moment ago; their mtimes are exact
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
    # (each row's RUNS_VERSION numbers its reads in this process: not part of what a fresh read must equal)
    drop = ["updated_at", tables.RUNS_VERSION]
    pd.testing.assert_frame_equal(got.drop(columns=drop), expected.drop(columns=drop), check_dtype=False)


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


def test_grid_rows_are_made_again_only_for_runs_read_again(runs):
    root, live = runs
    store = Store(root)
    first = history.run_table(store, COLUMNS)
    v1 = dict(zip(first["run"], first[tables.RUNS_VERSION], strict=True))
    grid = tables.runs_rows(first)
    live.write(until=40)
    second = history.run_table(store, COLUMNS)
    v2 = dict(zip(second["run"], second[tables.RUNS_VERSION], strict=True))
    # the running run was read again (a new version); the three finished ones kept theirs
    assert [r for r in v1 if v1[r] != v2[r]] == ["live"]
    again = {r["name"]: r for r in tables.runs_rows(second)}
    assert again["live"]["last_step"] == 39 and again["live"] != {r["name"]: r for r in grid}["live"]
    # every row as a table never seen makes it (no memo: the versions taken away)
    unversioned = second.drop(columns=tables.RUNS_VERSION)
    assert list(again.values()) == tables.runs_rows(unversioned)
    # nothing changed but the running run: the finished runs' frame rows are the same objects' values
    pd.testing.assert_frame_equal(second[second["run"] != "live"].reset_index(drop=True),
                                  first[first["run"] != "live"].reset_index(drop=True), check_dtype=False)
    # the frame with the running run's row replaced is the frame a fresh read gives
    drop = ["updated_at", tables.RUNS_VERSION]
    pd.testing.assert_frame_equal(second.drop(columns=drop), _fresh(root).drop(columns=drop), check_dtype=False)
    # a run added: its row joins
    SyntheticRun(root, "late", n_steps=10, shape=SMALL, flush_every=10, heartbeat_s=3600).write()
    third = history.run_table(store, COLUMNS)
    assert "late" in {r["name"] for r in tables.runs_rows(third)} and len(third) == 5


def test_a_settled_run_is_looked_at_when_its_run_row_changes_or_in_turn(runs, monkeypatch):
    root, _ = runs
    store = Store(root)
    history.run_table(store, COLUMNS)  # the first read: every run
    looked: list[str] = []
    real = history.run_signature
    monkeypatch.setattr(history, "run_signature", lambda folder, now: looked.append(folder.name) or real(folder, now))
    monkeypatch.setattr(history, "ROTATE", 0)  # none in turn
    history.run_table(store, COLUMNS)
    assert looked == ["live"]  # the running run; no finished run's five folders
    # a run row replaced by hand, as a writer replaces it but with no writer to announce it: not looked at (only in
    # turn, below)
    row = root / "done1" / "runs" / "r0.parquet"
    tmp = row.with_suffix(".tmp")
    tmp.write_bytes(row.read_bytes())
    tmp.replace(row)
    looked.clear()
    history.run_table(store, COLUMNS)
    assert looked == ["live"]
    # a writer started on a run folder that was there (a resumed run) announces its first run row: every run's
    # `runs` folder is looked at once, and the one that changed (done2) is read again
    writer = StoreWriter(root, "done2", heartbeat_s=3600)
    writer.flush(status="finished")
    looked.clear()
    history.run_table(store, COLUMNS)
    assert sorted(looked) == ["done1", "done2", "live"]  # (done1's hand-made change shows with it)
    looked.clear()
    history.run_table(store, COLUMNS)
    assert looked == ["live"]
    # in turn, every run within as many refreshes as there are runs (4), whatever changed
    looked.clear()
    monkeypatch.setattr(history, "ROTATE", 1)
    for _ in range(4):
        history.run_table(store, COLUMNS)
    assert set(looked) == {"done0", "done1", "done2", "live"}


def test_a_refresh_where_no_run_changed_reuses_the_page_view(runs):
    from collapsewatch.dashboard import create_app
    from collapsewatch.dashboard.sweep import VERDICTS

    root, live = runs
    create_app(root)  # the pages register with an app
    from collapsewatch.dashboard.pages import runs as page

    live.write()
    live.close()  # no run is running: a refresh reads no run again
    store = Store(root)
    verdicts = list(VERDICTS)
    history.run_table(store, COLUMNS)  # (the live run's last read: it finished since)
    first = page.view(history.run_table(store, COLUMNS), None, verdicts)
    token = page.hold(first)
    again = page.view(history.run_table(store, COLUMNS), None, verdicts)
    assert again is first  # no run changed: the same view, no row made again
    assert page.sent(again, token, False) == {}  # and nothing sent
    assert page.view(history.run_table(store, COLUMNS), None, ["healthy"]) is not first  # other ticks: its own
    writer = StoreWriter(root, "done2", heartbeat_s=3600)  # a run changed (a resumed writer)
    writer.flush(status="finished")
    table = history.run_table(store, COLUMNS)
    changed = page.view(table, None, verdicts)
    assert changed is not first
    assert changed["shown"] == page._view(table, None, verdicts)["shown"]  # what a view made afresh shows
    # the resumed run started again: it is the newest and moves to the top, so the page gets every row again
    assert changed["shown"][0]["name"] == "done2" and page.sent(changed, token, False) is None
