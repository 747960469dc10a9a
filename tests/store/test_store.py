"""Store: round trip, pinned schema, migrations, live readers beside writers, crashes, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from collapsewatch import Monitor, connect
from collapsewatch.store import ReadOnlyQueryError, Store, StoreWriter
from collapsewatch.store.compact import compact_store
from collapsewatch.store.migrations import LATEST_VERSION, TABLES, schema_connection
from collapsewatch.store.queries import runs_summary
from tests.conftest import cli, random_batch

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).with_name("schema_pinned.json")


def _schema() -> dict[str, list[list[str]]]:
    con = schema_connection()
    return {t: [[r[0], r[1]] for r in con.execute(f"DESCRIBE {t}").fetchall()] for t in TABLES}


def test_schema_is_pinned():
    """A schema change must be a new numbered migration and a deliberate update of schema_pinned.json."""
    assert _schema() == json.loads(PINNED.read_text())


def test_migrations_from_empty_record_version():
    con = duckdb.connect(":memory:")
    from collapsewatch.store.migrations import migrate, migrations

    assert migrate(con) == LATEST_VERSION
    assert migrate(con) == LATEST_VERSION  # idempotent
    rows = con.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    # every migration file once, in order (numbers are assigned per branch, so the list may have gaps)
    assert rows[0] == (1, "0001_initial.sql") and [v for v, _ in rows] == [v for v, _, _ in migrations()]


def test_round_trip_values(store):
    with Monitor(store, run="rt", detectors=False) as mon:
        for step in range(3):
            mon.observe(random_batch(seed=step), step=step)
            mon.log(step, {"grad_norm": 2.5 * step, "loss/policy": -0.1})
    con = connect(store)
    assert con.execute("SELECT count(*) FROM steps WHERE run = 'rt'").fetchone() == (3,)
    assert con.execute("SELECT grad_norm, loss_policy FROM steps WHERE step = 2").fetchone() == (5.0, -0.1)
    assert con.execute("SELECT count(*) FROM sequences").fetchone() == (24,)  # 3 steps × 8 sequences
    # step 0 keeps token rows of every sequence (Sampling.token_every = 10): 8 rows × 14 model tokens
    assert con.execute("SELECT count(*) FROM tokens WHERE step = 0 AND mask").fetchone() == (8 * 14,)
    assert con.execute("SELECT status, world_size FROM runs").fetchone() == ("finished", 1)
    # the finished run is also one DuckDB file that plain duckdb opens
    exported = duckdb.connect(str(store / "rt" / "rt.duckdb"), read_only=True)
    assert exported.execute("SELECT count(*), max(grad_norm) FROM steps").fetchone() == (3, 5.0)


def test_restart_keeps_latest_row_per_step(store):
    for attempt in range(2):  # the second run restarts from a checkpoint at step 1
        with Monitor(store, run="re", detectors=False, resume=attempt > 0) as mon:
            for step in range(attempt, 3):
                mon.observe(random_batch(seed=10 * attempt + step), step=step)
    con = connect(store)
    assert con.execute("SELECT count(*), count(DISTINCT step) FROM steps").fetchone() == (3, 3)


def test_read_only_sql_refuses_writes(store):
    with Monitor(store, run="ro", detectors=False) as mon:
        mon.observe(random_batch(), step=0)
    s = Store(store)
    for bad in ("DROP VIEW steps", "CREATE TABLE x (a INT)", "COPY (SELECT 1) TO 'x.csv'",
                "INSERT INTO steps SELECT * FROM steps", "SELECT 1; DELETE FROM steps"):
        with pytest.raises(ReadOnlyQueryError, match="read-only"):
            s.sql(bad)
    with pytest.raises(ReadOnlyQueryError, match="read_csv"):
        s.sql("SELECT * FROM read_csv('/etc/passwd')")  # no file access (tests/store/test_sql_sandbox.py)
    assert s.sql("SELECT count(*) AS n FROM steps")[0]["n"].tolist() == [1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return cli(*args)  # in this process: what the command prints and returns (tests.conftest.cli)


def test_cli_errors_are_one_line(store):
    with Monitor(store, run="c", detectors=False) as mon:
        mon.observe(random_batch(), step=0)
    for args, needle in ((["runs", "/nonexistent/x"], "does not exist"),
                         (["sql", str(store), "selec 1"], "malformed SQL"),
                         (["sql", str(store), "drop view steps"], "read-only")):
        p = _cli(*args)
        assert p.returncode == 1 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    p = _cli("sql", str(store), "select step, n_seqs from steps", "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == [{"step": 0, "n_seqs": 8}]


def _writer(store: Path, run: str, rank: int, world: int, steps: int, sleep: float,
            compact_every: int = 64) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "tests/store/writer_proc.py"), str(store), run, str(rank),
                             str(world), str(steps), str(sleep), str(compact_every)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


READER = """
import sys, time
from collapsewatch.store import Store
import os
errors, seen, reads = 0, 0, 0
while not os.path.exists(sys.argv[2]):  # until the test says the writers are done
    try:
        s = Store(sys.argv[1]); seen = max(seen, int(s.sql("select count(*) n from steps")[0]["n"][0])); s.close()
        reads += 1
    except Exception as e:
        errors += 1; print(repr(e), file=sys.stderr)
    time.sleep(0.02)
print(errors, seen, reads)
"""


def test_two_ranks_write_while_a_reader_reads(store):
    StoreWriter(store, "bootstrap").flush("finished")  # the store exists before the reader starts
    # compact_every=4: each rank merges its segments live, about every 4 steps, while the reader reads
    writers = [_writer(store, "ddp", r, 2, 40, 0.05, compact_every=4) for r in range(2)]
    stop = store.parent / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(store), str(stop)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    for w in writers:
        assert w.wait(timeout=120) == 0
    stop.touch()
    out, err = reader.communicate(timeout=120)
    errors, seen, reads = map(int, out.split())
    assert errors == 0, err
    assert 0 < seen <= 80 and reads > 10  # read many times while the writers ran; a merge never doubles a step
    con = connect(store)
    assert con.execute("SELECT rank, count(*) FROM steps WHERE run = 'ddp' GROUP BY rank ORDER BY rank"
                       ).fetchall() == [(0, 40), (1, 40)]
    assert con.execute("SELECT status, world_size, ranks_seen FROM runs WHERE run = 'ddp'").fetchone() == (
        "finished", 2, 2)


@pytest.mark.parametrize("kill_after", [1, 3])
def test_sigkill_loses_at_most_the_last_flush(store, kill_after):
    w = _writer(store, "crash", 0, 1, 1000, 0.02)
    flushed = -1
    for _ in range(kill_after):
        line = w.stdout.readline()
        flushed = int(line.split()[1])
    w.send_signal(signal.SIGKILL)
    w.wait(timeout=30)
    con = connect(store)
    steps = {r[0] for r in con.execute("SELECT step FROM steps").fetchall()}
    assert set(range(flushed + 1)) <= steps  # every step flushed before the kill is intact
    assert con.execute("SELECT count(*) FROM sequences WHERE step <= ?", [flushed]).fetchone() == (
        4 * (flushed + 1),)  # writer_proc observes 4 sequences a step
    # the crashed status of a silent run is tested on an aged heartbeat (test_killed_run_is_reported_crashed...),
    # not by restating the view's rule against the wall clock here


def test_killed_run_is_reported_crashed_and_compacts(store):
    w = _writer(store, "dead", 0, 1, 1000, 0.02)
    w.stdout.readline()
    w.send_signal(signal.SIGKILL)
    w.wait(timeout=30)
    # age the heartbeat instead of waiting: rewrite updated_at 1 minute into the past
    import pyarrow.parquet as pq

    path = store / "dead" / "runs" / "r0.parquet"
    t = pq.read_table(path).to_pandas()
    t["updated_at"] = t["updated_at"] - __import__("pandas").Timedelta(minutes=1)
    import pyarrow as pa

    pq.write_table(pa.Table.from_pandas(t, schema=pq.read_schema(path), preserve_index=False), path)
    assert runs_summary(Store(store)).set_index("run").loc["dead", "status"] == "crashed"
    assert compact_store(store) == ["dead"]
    con = connect(store)
    assert con.execute("SELECT count(*) >= 5 FROM steps").fetchone() == (True,)
    assert len(list((store / "dead" / "step_metrics").glob("*.parquet"))) == 1


def test_shape_mismatch_names_tensors(store):
    from collapsewatch import TokenBatch

    b = random_batch()
    with pytest.raises(ValueError, match=r"entropy \(8, 15\)"):
        TokenBatch(logp=b.logp, mask=b.mask, entropy=b.entropy[:, :15])
    with pytest.raises(ValueError, match=r"rewards \(7,\)"):
        TokenBatch(logp=b.logp, mask=b.mask, rewards=b.rewards[:7])


def test_store_that_cannot_be_created_fails_before_training(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="afile/store.*not writable"):
        Monitor(tmp_path / "afile" / "store", run="x")
    with pytest.raises(ValueError, match="run name"):
        Monitor(tmp_path / "s", run="../escape")


def test_write_failure_is_counted_and_retried(store, monkeypatch, caplog):
    import collapsewatch.store.writer as writer_mod

    real = writer_mod.pq.write_table
    fail = {"on": True}

    def flaky(*a, **k):
        if fail["on"]:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    mon = Monitor(store, run="full", detectors=False, flush_steps=1)
    monkeypatch.setattr(writer_mod.pq, "write_table", flaky)
    for step in range(3):
        mon.observe(random_batch(seed=step), step=step)  # never raises
    mon.flush()
    assert mon.writer.write_errors >= 1
    assert sum("No space left" in r.getMessage() for r in caplog.records) == 1  # reported once, loudly
    fail["on"] = False
    mon.close()
    con = connect(store)
    assert con.execute("SELECT count(*) FROM steps").fetchone() == (3,)  # the kept rows were written later
    assert con.execute("SELECT write_errors > 0 FROM runs").fetchone() == (True,)


def test_drop_policy_counts_drops(store):
    mon = Monitor(store, run="drop", detectors=False, queue_size=1, on_full="drop")
    for step in range(200):
        mon.observe(random_batch(B=64, T=64, seed=step), step=step)
    mon.close()
    con = connect(store)
    dropped, n = con.execute("SELECT r.dropped_batches, (SELECT count(*) FROM steps) FROM runs r").fetchone()
    assert dropped > 0 and dropped + n == 200  # every batch is either stored or counted as dropped


def test_nan_batch_is_recorded_not_fatal(store):
    b = random_batch()
    b.logp[:] = float("nan")
    with Monitor(store, run="nan", detectors=False) as mon:
        mon.observe(b, step=0)
        mon.observe(random_batch(), step=1)
    con = connect(store)
    assert con.execute("SELECT step, first_nonfinite, nonfinite_logp, ratio_p50_pos FROM steps ORDER BY step"
                       ).fetchall()[0] == (0, "logp", 8 * 14, None)
    assert con.execute("SELECT probe_errors FROM runs").fetchone() == (0,)


def test_live_compaction_merges_small_then_compact_segments_and_keeps_every_row(store):
    w = StoreWriter(store, "lc", heartbeat_s=3600, compact_every=3)
    folder = store / "lc" / "scalars"

    def flush_step(step: int) -> None:
        w.append("scalars", {"run": ["lc"], "rank": [0], "step": [step], "key": ["loss"], "value": [float(step)]})
        w.flush()

    def files() -> tuple[int, int]:
        names = [f.name for f in folder.glob("*.parquet")]
        return sum("-compact-" in n for n in names), sum("-compact-" not in n for n in names)

    for step in range(7):  # flushes 1–3 → compact A, 4–6 → compact B, 7 stays small
        flush_step(step)
    assert files() == (2, 1)
    for step in range(7, 9):  # 7–9 → compact C; A, B, C are 3 compact segments → merged into one
        flush_step(step)
    assert files() == (1, 0)
    w.flush("finished")
    con = connect(store)
    assert con.execute("SELECT count(*), sum(value) FROM scalars WHERE run = 'lc'").fetchone() == (9, sum(range(9)))
    with pytest.raises(ValueError, match="compact_every must be 0"):
        StoreWriter(store, "bad", compact_every=1)
