"""An object store's reader fetches what it reads (``collapsewatch/store/lazy.py``), against a real S3 server (moto):
opening the store and its run rows fetch no step, sequence or token object; one run's steps fetch that run's
step-level segments; one run's tokens that run's token segments; a size bound evicts the least recently used and
answers stay the same; a writer publishing while a lazy reader reads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from collapsewatch import Monitor
from collapsewatch.store import Store, queries
from collapsewatch.store.lazy import FETCHED, MAX_BYTES_ENV, fetched, held_bytes
from collapsewatch.store.location import parse_url, published
from tests.conftest import random_batch
from tests.store import s3server

BUCKET = "cw-lazy"
RUNS = ("a", "b", "c")


s3 = s3server.module_server(BUCKET)


@pytest.fixture(scope="module")
def bucket(s3, tmp_path_factory):
    """Three finished runs of 12 steps written with ``Monitor`` (token rows on every 10th step and on 5 % of the
    other sequences), each table compacted at close; the URL and its listing."""
    mp = pytest.MonkeyPatch()
    url = s3server.reach(s3, mp, str(tmp_path_factory.mktemp("writer-cache")), BUCKET)
    for i, run in enumerate(RUNS):
        with Monitor(url, run=run, detectors=False, flush_steps=2, compact_every=0) as mon:
            for step in range(12):
                mon.observe(random_batch(B=4, T=8, seed=100 * i + step), step=step)
                mon.log(step, {"grad_norm": float(step)})
    yield url, published(parse_url(url).list())
    mp.undo()


@pytest.fixture
def reader(bucket, s3, tmp_path, monkeypatch):
    """A reader on another machine: its own empty cache (mirror)."""
    s3server.reach(s3, monkeypatch, str(tmp_path / "reader-cache"))
    return bucket


def _fetched() -> tuple[int, int]:
    return FETCHED["bytes"], FETCHED["objects"]


def _mirrored(store: Store) -> set[str]:
    return {p.relative_to(store.root).as_posix() for p in Path(store.root).rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(store.root).parts)}


def _of(listing: dict, run: str | None, *tables: str) -> dict[str, int]:
    """rel -> size of the segments of ``tables`` of ``run`` (of every run: not ``_schema``, which is no run)."""
    return {rel: size for rel, (size, _) in listing.items() if rel.split("/")[1:2] and rel.split("/")[1] in tables
            and rel.split("/")[0] == (run or rel.split("/")[0]) and not rel.startswith("_schema/")}


def test_the_runs_page_fetches_run_rows_only_and_one_run_fetches_that_run(reader):
    url, listing = reader
    # by hand: what a reader needs to open the store and read its run rows is the run row of each run's one rank
    # (<run>/runs/r0.parquet) and the _schema folder; no marker is left (every flush merged at close)
    base = {rel: size for rel, (size, _) in listing.items()
            if rel.startswith("_schema/") or rel.split("/")[1:2] == ["runs"]}
    assert sorted(r for r in base if not r.startswith("_schema/")) == [f"{r}/runs/r0.parquet" for r in RUNS]
    assert not [r for r in listing if "/_published/" in r]
    b0, o0 = _fetched()
    s = Store(url)
    rows = queries.run_rows(s)
    assert sorted(rows["run"]) == list(RUNS) and set(rows["status"]) == {"finished"}
    assert _mirrored(s) == set(base)
    assert _fetched() == (b0 + sum(base.values()), o0 + len(base))

    # one run's steps: that run's step_metrics and scalars segments, nothing of another run or table
    b1, o1 = _fetched()
    steps = queries.step_rows(s, "b", ["grad_norm"])
    assert steps["step"].tolist() == list(range(12)) and steps["grad_norm"].tolist() == [float(i) for i in range(12)]
    step_level = _of(listing, "b", "step_metrics", "scalars")
    assert step_level and _mirrored(s) == set(base) | set(step_level)
    assert _fetched() == (b1 + sum(step_level.values()), o1 + len(step_level))

    # one run's tokens: that run's token segments only
    b2, o2 = _fetched()
    tokens = s.query(f"SELECT count(*) AS n FROM ({s.run_view('tokens', 'b')})")["n"][0]
    toks = _of(listing, "b", "tokens")
    assert tokens > 0 and _mirrored(s) == set(base) | set(step_level) | set(toks)
    assert _fetched() == (b2 + sum(toks.values()), o2 + len(toks))

    # reading them again fetches nothing; a user query on tokens fetches every run's tokens, no sequence
    b3, o3 = _fetched()
    assert s.query(f"SELECT count(*) AS n FROM ({s.run_view('tokens', 'b')})")["n"][0] == tokens
    assert _fetched() == (b3, o3)
    total = fetched(s.root)  # every process's fetches: the user query runs in a worker process
    assert total == (b3 - b0, o3 - o0)  # a fresh mirror: all of it this test's, so far in this process
    df, _ = s.sql("SELECT run, count(*) AS n FROM tokens GROUP BY run ORDER BY run")
    assert df["run"].tolist() == list(RUNS) and int(df.set_index("run")["n"]["b"]) == tokens
    all_tokens = _of(listing, None, "tokens")
    assert _mirrored(s) == set(base) | set(step_level) | set(all_tokens)
    assert fetched(s.root) == (total[0] + sum(all_tokens.values()) - sum(toks.values()),
                               total[1] + len(all_tokens) - len(toks))
    assert not [r for r in _mirrored(s) if "/sequences/" in r and not r.startswith("_schema/")]


def test_user_sql_of_one_run_fetches_that_runs_tokens_alone(reader):
    url, listing = reader
    s = Store(url)
    try:
        b0, o0 = fetched(s.root)
        # one view, WHERE run = 'c' (sandbox.one_run): run c's token segments only, none of a or b
        df, _ = s.sql("SELECT count(*) AS n FROM tokens WHERE run = 'c'")
        toks = _of(listing, "c", "tokens")
        assert toks and fetched(s.root) == (b0 + sum(toks.values()), o0 + len(toks))
        assert not [r for r in _mirrored(s) if "/tokens/" in r and not r.startswith(("_schema/", "c/"))]
        # the same count as the package's own scan of that run's folder
        assert int(df["n"][0]) == s.query(f"SELECT count(*) AS n FROM ({s.run_view('tokens', 'c')})")["n"][0] > 0
    finally:
        s.close()


def test_opening_one_run_fetches_that_run_alone(reader):
    url, listing = reader
    # by hand: a reader that opens run b (its run row, its step rows) needs _schema, b's run row and b's step_metrics
    # and scalars segments: not another run's row, no sequence or token object
    want = {rel: size for rel, (size, _) in listing.items() if rel.startswith("_schema/")}
    want |= _of(listing, "b", "runs", "step_metrics", "scalars")
    b0, o0 = _fetched()
    s = Store(url)
    assert queries.run_info(s, "b")["status"] == "finished"
    assert len(queries.step_rows(s, "b", ["grad_norm"])) == 12
    assert _mirrored(s) == set(want)
    assert _fetched() == (b0 + sum(want.values()), o0 + len(want))
    assert s.has_run("a") and s.has_run("c")  # every listed run is a run folder, its row not fetched yet


def test_a_size_bound_evicts_the_least_recently_used_and_answers_stay(reader, monkeypatch):
    url, listing = reader
    tokens = {run: sum(_of(listing, run, "tokens").values()) for run in RUNS}
    # bound: room for the largest run's tokens plus the smallest's, never for all three (the sum of any two
    # is at most bound + the difference; we pick bound = max + min so that a and b, then c, cannot all stay)
    bound = max(tokens.values()) + min(tokens.values())
    assert sum(tokens.values()) > bound
    monkeypatch.setenv(MAX_BYTES_ENV, str(bound))
    s = Store(url)

    def count(run: str) -> int:
        return int(s.query(f"SELECT count(*) AS n FROM ({s.run_view('tokens', run)})")["n"][0])

    first = {run: count(run) for run in RUNS}  # a, b, then c: fetching c evicts a (oldest) if a + c > bound ...
    held = {run for run in RUNS if (s.root / run / "tokens").is_dir()}
    assert "c" in held and held_bytes(s.root) <= bound
    assert "a" not in held  # a was used first: the least recently used
    b0, _ = _fetched()
    assert count("a") == first["a"]  # ... and reading a again fetches it again, with the same answer
    assert _fetched()[0] - b0 == tokens["a"]
    assert held_bytes(s.root) <= bound


def test_a_reader_reads_while_a_writer_publishes(reader):
    url, _ = reader
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            with Monitor(url, run="live", detectors=False, flush_steps=1, compact_every=3) as mon:
                for step in range(20):
                    mon.observe(random_batch(B=4, T=8, seed=step), step=step)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=write)
    t.start()
    s = Store(url)
    last = reads = 0
    try:
        while not done.is_set() or reads < 2:
            # a step row never without its sequence rows (one listing's whole state), never fewer steps than before
            df = s.query("""SELECT m.step, count(q.seq_id) AS n FROM step_metrics m
                            LEFT JOIN sequences q ON q.run = m.run AND q.step = m.step
                            WHERE m.run = 'live' GROUP BY m.step""")
            assert (df["n"] == 4).all(), df
            assert len(df) >= last
            last, reads = len(df), reads + 1
    finally:
        t.join()
    assert not errors, errors
    assert reads >= 2 and last <= 20
    assert len(Store(url).query("SELECT * FROM step_metrics WHERE run = 'live'")) == 20


def test_a_reader_lists_the_bucket_at_most_every_sync_share_times_its_last_listing(reader):
    # a sync lists the whole bucket; a reader asks for one at most every SYNC_S (1 s) and, when the last one took
    # longer, every SYNC_SHARE (4) × its duration: with a last sync that took 100 s, a refresh 1.1 s later syncs
    # nothing (at most 1/5 of the reader's time listing); one that took 0 s: the refresh after 1.1 s syncs;
    # max_age 0 (a forced sync) always does
    import time

    from collapsewatch.store import mirror
    from collapsewatch.store.queries import SYNC_S

    url, _ = reader
    s = Store(url)
    loc = s.where
    when, generation, _ = mirror._synced[loc.local]
    mirror._synced[loc.local] = (when, generation, 100.0)
    time.sleep(SYNC_S + 0.1)
    s.refresh()
    assert mirror._synced[loc.local][0] == when  # 1.1 s < 4 × 100 s: not synced
    mirror._synced[loc.local] = (when, generation, 0.0)
    s.refresh()
    again = mirror._synced[loc.local][0]
    assert again > when  # 1.1 s > max(1 s, 4 × 0 s): synced
    mirror._synced[loc.local] = (again, generation, 100.0)
    mirror.refresh(loc, 0.0)
    assert mirror._synced[loc.local][0] > again  # forced
    s.close()


def test_judging_many_runs_fetches_their_tables_in_one_round(reader):
    # judge.fetch_keys, before the runs page or `runs` judges more than BULK runs of an object store: the run rows,
    # step_metrics, scalars and events segments of every run (by hand, from the listing) in one fetch; judging each
    # run afterwards fetches nothing more. A list of at most BULK runs fetches nothing here (each run's judgement
    # fetches its own tables)
    from collapsewatch.judge import KEY_TABLES, fetch_keys, key_files
    from collapsewatch.store.queries import BULK

    url, _ = reader
    listing = published(parse_url(url).list())  # now: an earlier test of this module may have added a run
    s = Store(url)
    try:
        b0, o0 = _fetched()
        before = _mirrored(s)
        assert all(rel.startswith("_schema/") for rel in before)  # an open store holds _schema alone
        fetch_keys(s, list(RUNS))  # 3 ≤ BULK (8)
        assert _fetched() == (b0, o0)
        many = [RUNS[i % len(RUNS)] for i in range(BULK + 1)]  # (names may repeat: it is their number that counts)
        fetch_keys(s, many)
        want = _of(listing, None, *KEY_TABLES)  # run rows, step_metrics, scalars (no events: detectors off)
        assert want and set(want) == _mirrored(s) - before and _fetched() == (b0 + sum(want.values()), o0 + len(want))
        for run in RUNS:
            key_files(s, run)
        assert _fetched() == (b0 + sum(want.values()), o0 + len(want))
    finally:
        s.close()


def test_a_mirrors_views_are_bound_again_only_after_its_files_changed(reader, monkeypatch):
    # a mirror's views list its files (a snapshot); they are created again only when a sync or a fetch changed the
    # mirror, not before every query: binding the runs view once, then three queries (one of them per-run, one
    # store-wide) with no fetch in between create no view; a fetch of run c's step rows (the mirror changed) makes
    # the next store-wide query create them once more, with the same answer
    from collapsewatch.store import queries as q

    calls = []
    real = q.create_views
    monkeypatch.setattr(q, "create_views", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    url, _ = reader
    s = Store(url)
    try:
        n = s.query("SELECT count(*) AS n FROM runs")["n"][0]
        assert n >= len(RUNS) and len(calls) == 1
        s.query("SELECT count(*) AS n FROM runs")
        q.run_info(s, "a")
        s.query("SELECT run FROM runs")
        assert len(calls) == 1
        q.step_rows(s, "c", ["grad_norm"])  # fetches c's step_metrics and scalars: the mirror's files changed
        assert s.query("SELECT count(*) AS n FROM runs")["n"][0] == n and len(calls) == 2
    finally:
        s.close()
