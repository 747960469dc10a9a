"""User SQL costs what it reads: the worker lists and scans only the tables of the views a query names
(``sandbox.read_tables``: ``SELECT 1`` none) with the same rows as the package's own views, the worker starts
without pandas, NumPy or scipy (and answers every result type as DuckDB does), and a worker started ahead (``sqlproc.prestart``, what the CLI's ``sql`` does first) is
the one that answers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from collapsewatch import Monitor
from collapsewatch.store import Store, sqlproc
from collapsewatch.store.limits import Limits
from collapsewatch.store.migrations import TABLES
from collapsewatch.store.sandbox import read_tables
from tests.conftest import random_batch

RUNS = ("a", "b")
N_STEPS = 3
B = 8  # sequences per step (random_batch's default)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reads") / "store"
    for run in RUNS:
        with Monitor(root, run=run, detectors=False) as mon:
            for step in range(N_STEPS):
                mon.observe(random_batch(B=B, seed=step), step=step)
    return root


@pytest.mark.parametrize(("sql", "tables"), [
    ("SELECT 1", []),  # no view: no table listed
    ("SELECT step FROM steps WHERE run = 'a'", ["step_metrics", "scalars"]),  # steps = step metrics + scalars
    ("SELECT run FROM runs", ["runs"]),  # runs reads run_ranks, which reads the runs table
    ("SELECT count(*) FROM sequences s JOIN events e USING (run)", ["sequences", "events"]),
    ("SELECT 1 WHERE EXISTS (SELECT 1 FROM tokens)", ["tokens"]),  # a subquery's view counts
    ("WITH tokens AS (SELECT 1 AS x) SELECT x FROM tokens", ["tokens"]),  # a CTE of a view's name: more, never fewer
    ("SELECT table_name FROM information_schema.tables", list(TABLES)),  # the catalogue: every view
])
def test_a_folder_store_reads_the_tables_a_query_names(store, sql, tables):
    assert read_tables(store, sql) == tables


def test_user_sql_gives_the_rows_of_the_views(store):
    s = Store(store)
    try:
        # by hand: 2 runs × steps 0..2, one row each; B = 8 sequences per step → 24 per run
        df, cut = s.sql("SELECT run, step FROM steps ORDER BY run, step")
        assert not cut and list(df.itertuples(index=False, name=None)) == [(r, k) for r in RUNS
                                                                           for k in range(N_STEPS)]
        df, _ = s.sql("SELECT run, count(*) AS n FROM sequences GROUP BY run ORDER BY run")
        assert df.to_dict("list") == {"run": ["a", "b"], "n": [N_STEPS * B, N_STEPS * B]}
        one, _ = s.sql("SELECT step, reward_mean FROM steps WHERE run = 'b' ORDER BY step")
        trusted = s.query("SELECT step, reward_mean FROM steps WHERE run = 'b' ORDER BY step")
        assert one.equals(trusted) and len(one) == N_STEPS
        df, _ = s.sql("SELECT 1 AS x")
        assert df["x"].tolist() == [1]
    finally:
        s.close()


WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from collapsewatch.store import sqlproc
    sys.meta_path.insert(0, sqlproc._NotHere())  # what the worker's main does before its imports
    from collapsewatch.store import sandbox, views
    table, cut = sandbox.run_checked(Path(sys.argv[1]), "SELECT run, count(*) AS n FROM steps GROUP BY run "
                                     "ORDER BY run", sandbox.Limits(), 30.0)
    print(json.dumps({"rows": table.to_pylist(), "loaded": sorted({m.split(".")[0] for m in sys.modules}
                                                                   & {"pandas", "numpy", "scipy", "torch"})}))
""")


def test_the_worker_answers_without_pandas_numpy_or_scipy(store):
    out = subprocess.run([sys.executable, "-c", WORKER, str(store)], capture_output=True, text=True, check=True,
                         timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"rows": [{"run": r, "n": N_STEPS} for r in RUNS], "loaded": []}


TYPES = ("SELECT 1::TINYINT a, 2::HUGEINT b, 1.5::DECIMAL(4,2) c, 'x'::BLOB d, [1, NULL, 3] e, {'k': 1} f, "
         "TIMESTAMPTZ '2026-11-29 03:00:00+00' g, TIMESTAMP_NS '2026-11-29 03:00:00.123456789' h, "
         "INTERVAL 3 DAY i, DATE '2026-11-29' j, TIME '03:00:00' k, uuid() IS NOT NULL l, NULL::DOUBLE m, "
         "'nan'::DOUBLE n, MAP {'a': 1} o, 'a'::ENUM('a', 'b') p")


def test_the_worker_answers_every_result_type_as_duckdb_does(store):
    # the worker runs without NumPy (sqlproc._NotHere); each column's Arrow type and values must still be the ones
    # DuckDB gives this process (which has NumPy), compared as Python values
    import duckdb

    expected = duckdb.connect().sql(TYPES).to_arrow_table()
    got, cut = sqlproc.user_query(store, TYPES)
    assert not cut and got.schema.names == expected.schema.names
    assert [f.type for f in got.schema] == [f.type for f in expected.schema]
    got_rows, want_rows = got.to_pylist(), expected.to_pylist()
    nan = got_rows[0].pop("n"), want_rows[0].pop("n")
    assert got_rows == want_rows and all(x != x for x in nan)  # NaN equals nothing, itself included


def test_a_prestarted_worker_answers_the_next_query(store):
    sqlproc.close_idle()
    sqlproc.prestart(Limits().process_bytes)
    sqlproc.prestart(Limits().process_bytes)  # one waits already: no second one
    assert len(sqlproc._idle) == 1
    pid = sqlproc._idle[0][1].pid
    df, _ = sqlproc.run_user_sql(store, "SELECT 41 + 1 AS x")
    assert df["x"].tolist() == [42]
    assert [proc.pid for _, proc in sqlproc._idle] == [pid]  # the same worker answered and waits again
    sqlproc.close_idle()


@pytest.mark.parametrize(("sql", "run"), [
    ("SELECT step FROM steps WHERE run = 'a' ORDER BY step", "a"),
    ("SELECT count(*) FROM tokens t WHERE step > 0 AND t.run = 'b'", "b"),  # AND, an alias
    ("SELECT * FROM events WHERE 'a' = run", "a"),  # either side
    ("SELECT * FROM runs WHERE runs.run = 'a' AND (status = 'finished' AND run = 'a')", "a"),  # nested AND
    ("SELECT step FROM steps WHERE run = 'a' OR run = 'b'", None),  # OR: two runs
    ("SELECT step FROM steps WHERE run = 'a' AND run = 'b'", None),
    ("SELECT step FROM steps WHERE run <> 'a'", None),
    ("SELECT step FROM steps WHERE run = 'a' COLLATE nocase", None),  # not a plain string constant
    ("SELECT a.step FROM steps a JOIN steps b USING (run, step) WHERE a.run = 'a'", None),  # a join
    ("SELECT step FROM steps WHERE run = 'a' AND step IN (SELECT step FROM scalars)", None),  # a subquery
    ("WITH s AS (SELECT * FROM steps) SELECT step FROM s WHERE run = 'a'", None),  # a CTE
    ("SELECT step FROM steps USING SAMPLE 3 ROWS WHERE run = 'a'", None),  # sampled before WHERE
    ("SELECT step FROM steps WHERE other.run = 'a'", None),  # another table's column
    ("SELECT step FROM steps WHERE run = '../a'", None),  # no run has that name: no folder to read
    ("SELECT 1 WHERE 'a' = 'a'", None),
])
def test_the_run_a_query_reads_alone(sql, run):
    from collapsewatch.store.sandbox import one_run

    assert one_run(sql) == run


VIEWS_OF_ONE_RUN = ("run_ranks", "runs", "steps", "step_metrics", "scalars", "sequences", "tokens", "events",
                    "sentinels")


@pytest.mark.parametrize("view", VIEWS_OF_ONE_RUN)
def test_one_run_read_alone_gives_the_rows_of_every_run_read(store, view, monkeypatch):
    from collapsewatch.store import sandbox, segments

    listed: list[tuple[str, str | None]] = []
    table_files = segments.table_files

    def recorded(root, table, run=None, fetch=True):
        listed.append((table, run))
        return table_files(root, table, run, fetch)

    monkeypatch.setattr(sandbox, "table_files", recorded)
    sql = f"SELECT * FROM {view} WHERE run = 'b'"
    one, cut = sandbox.run_checked(store, sql, sandbox.Limits(), 60.0)
    assert not cut and listed and {run for _, run in listed} == {"b"}  # run b's folder alone was listed
    listed.clear()
    monkeypatch.setattr(sandbox, "one_run", lambda statement: None)  # as before: every run's files
    every, _ = sandbox.run_checked(store, sql, sandbox.Limits(), 60.0)
    assert {run for _, run in listed} == {None}
    assert one.schema == every.schema and one.num_rows == every.num_rows
    assert sorted(map(repr, one.to_pylist())) == sorted(map(repr, every.to_pylist()))


FORKS = textwrap.dedent("""
    import os, subprocess, sys
    from collapsewatch.store.sandbox import check_select_only
    assert check_select_only("SELECT 1") == "SELECT 1"  # this process now holds a parse database
    for _ in range(3):  # a child forked to run Python before its exec (preexec_fn) must not touch it
        subprocess.run(["true"], preexec_fn=lambda: None, check=True)
    pid = os.fork()
    if pid == 0:  # a forked child that parses makes its own database
        ok = check_select_only("SELECT 2 AS two") == "SELECT 2 AS two"
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), check_select_only("SELECT 3") == "SELECT 3")
""")


def test_a_process_that_parsed_sql_forks_safely():
    # was: a fork handler closed the parent's parse database in the child, which crashed a child forked with a
    # preexec_fn (a segmentation fault in `collapsewatch demo`'s and `watch`'s launchers under make test)
    out = subprocess.run([sys.executable, "-c", FORKS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "True"]
