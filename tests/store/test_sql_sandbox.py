"""User SQL is read-only by construction: attacks through the CLI and the dashboard's SQL callback leave every
file of the store byte-identical and every view answering; time and size limits hold.

Issue 16's attacks (``EXPLAIN ANALYZE COPY … OVERWRITE`` emptied a run, ``EXPLAIN ANALYZE DROP VIEW`` poisoned
the dashboard's pooled connections) come first, then one statement of every kind DuckDB parses, bare and wrapped.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collapsewatch import Monitor
from collapsewatch.cli import app as cli_app
from collapsewatch.store import ReadOnlyQueryError, Store
from collapsewatch.store.sandbox import Limits, check_select_only
from tests.conftest import random_batch

RUN = "victim"
N_STEPS = 2


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sandbox") / "store"
    with Monitor(root, run=RUN, detectors=False) as mon:
        for step in range(N_STEPS):
            mon.observe(random_batch(seed=step), step=step)
    (root / RUN / "tokenizer").mkdir()
    (root / RUN / "tokenizer" / "tokenizer.json").write_text("{}")  # a run folder holds more than segments
    return root


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _attacks(root: Path) -> list[str]:
    seg = sorted((root / RUN / "step_metrics").glob("*.parquet"))[0]
    fake_run = "SELECT 'victim' AS run, 0 AS rank, 'crashed' AS status"
    copies = [f"COPY (SELECT 1 AS k, 2 AS v) TO '{root}/{RUN}' (FORMAT parquet, PARTITION_BY (k), OVERWRITE)",
              f"COPY (SELECT 1 AS step) TO '{seg}' (FORMAT parquet)",
              f"COPY ({fake_run}) TO '{root}/{RUN}/runs/r0.parquet' (FORMAT parquet)",
              f"COPY steps TO '{root}/leak.csv'"]
    ddl = ["DROP VIEW steps", "CREATE OR REPLACE VIEW runs AS SELECT 'fake' AS run", "CREATE TABLE t AS SELECT 1",
           "ALTER VIEW steps RENAME TO s2", "CREATE MACRO m() AS 1", "CREATE SEQUENCE q", "CREATE TYPE e AS ENUM ('a')",
           "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')", "INSERT INTO scalars VALUES ('a', 0, 0, 'k', 1)",
           "UPDATE runs SET status = 'crashed'", "DELETE FROM steps", "TRUNCATE steps",
           "MERGE INTO steps USING steps s ON true WHEN MATCHED THEN DELETE"]
    other = [f"ATTACH '{root}/{RUN}/{RUN}.duckdb' AS x", "DETACH memory", "USE system", "INSTALL httpfs", "LOAD httpfs",
             "SET enable_external_access = true", "RESET lock_configuration", "SET VARIABLE v = 1",
             "PRAGMA enable_profiling", "CALL checkpoint()", "CHECKPOINT", "VACUUM", "ANALYZE", "BEGIN TRANSACTION",
             "PREPARE p AS SELECT 1", "EXECUTE p", f"EXPORT DATABASE '{root}/dump'", f"IMPORT DATABASE '{root}'",
             "COPY FROM DATABASE memory TO memory", "PIVOT steps ON run USING count(*)", "EXPLAIN SELECT 1"]
    wrapped = [f"EXPLAIN ANALYZE {s}" for s in copies + ddl[:3]] + [f"EXPLAIN {s}" for s in copies[:1] + ddl[:1]]
    in_select = [
        f"SELECT * FROM query('{copies[1].replace(chr(39), chr(39) * 2)}')",
        "SELECT * FROM query_table('steps')",
        "WITH x AS (SELECT * FROM query('SELECT 1')) SELECT * FROM x",
        "SELECT (SELECT count(*) FROM read_text('/etc/passwd'))",
        f"SELECT * FROM read_parquet('{seg}')", f"SELECT * FROM '{seg}'", "SELECT * FROM '/etc/passwd'",
        f"SELECT * FROM glob('{root}/*')", "SELECT * FROM read_blob('/etc/hostname')",
        f"DESCRIBE '{seg}'", "SHOW '/etc/passwd'", "SUMMARIZE (SELECT * FROM read_csv('/etc/passwd'))",
        "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
        "SELECT json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
        "SELECT getenv('HOME')", "SELECT nextval('q')", "SELECT setseed(0.5)", "SELECT write_log('x')",
        "SELECT * FROM checkpoint()", "SELECT * FROM other.main.steps", "SELECT * FROM steps, LATERAL read_csv('x')",
        f"SELECT * FROM steps; COPY steps TO '{root}/leak.csv'", "SELECT 1; DROP VIEW steps",
        f"SELECT * FROM read_text('{Path.cwd()}/.tmp/x')",
    ]
    return copies + ddl + other + wrapped + in_select


def _cli(root: Path, sql: str):
    return CliRunner().invoke(cli_app, ["sql", str(root), sql, "--json"])


def _dashboard(root: Path, sql: str):
    from collapsewatch.dashboard import create_app, state

    if state._path != root.resolve():
        create_app(root)
    from collapsewatch.dashboard.pages import sql as page

    return page.run_query(1, sql)


def _views_answer(root: Path) -> None:
    s = Store(root)
    assert s.query("SELECT count(*) AS n FROM steps")["n"].tolist() == [N_STEPS]
    assert s.query("SELECT run, status FROM runs").values.tolist() == [[RUN, "finished"]]
    s.close()
    from collapsewatch.dashboard import state
    from collapsewatch.store import queries

    if state._path == root.resolve():  # every pooled connection still has the real views
        with state.borrow() as pooled:
            assert queries.run_names(pooled) == [RUN]
            assert pooled.query("SELECT count(*) AS n FROM steps")["n"].tolist() == [N_STEPS]


def test_every_attack_is_refused_and_changes_nothing(store, tmp_path, monkeypatch):
    """Each attack through both doors: refused with a one-line message naming the rule, no file changed or
    created (store, working directory), views intact in a fresh and in the dashboard's pooled connections."""
    monkeypatch.chdir(tmp_path)  # DuckDB's default temp directory would be ./.tmp
    before = _files(store)
    attacks = _attacks(store)
    assert len(attacks) == 71  # the count docs/store.md and the README quote
    import duckdb

    kinds = {st.type.name for sql in attacks for st in duckdb.connect().extract_statements(sql)}
    # DuckDB 2.0's parser reports ANALYZE as VACUUM, CREATE MACRO as CREATE, INSTALL as LOAD, SET VARIABLE as SET
    # and COPY FROM DATABASE as PRAGMA (each text is in the list), and never yields INVALID / RELATION / LOGICAL_PLAN
    never_from_text = {"INVALID", "RELATION", "LOGICAL_PLAN", "ANALYZE", "CREATE_FUNC", "EXTENSION", "VARIABLE_SET",
                       "COPY_DATABASE"}
    assert kinds == set(duckdb.StatementType.__members__) - never_from_text  # every kind is attacked
    for sql in attacks:
        out = _cli(store, sql)
        assert out.exit_code == 1, (sql, out.output)
        assert out.output.startswith("error: refused") and len(out.output.strip().splitlines()) == 1, (sql, out.output)
        rows, _, msg, cls, *_ = _dashboard(store, sql)
        assert rows == [] and cls == "msg error" and msg.startswith("refused"), (sql, msg)
        assert _files(store) == before, sql
        assert list(tmp_path.iterdir()) == [], sql
        _views_answer(store)


@pytest.mark.parametrize("sql, expected", [
    ("SELECT count(*) AS n FROM steps", [{"n": N_STEPS}]),
    ("FROM (SELECT step FROM steps ORDER BY step)", [{"step": 0}, {"step": 1}]),
    ("WITH s AS (SELECT max(step) AS m FROM steps) SELECT m FROM s", [{"m": 1}]),
    ("SELECT 2 AS b;", [{"b": 2}]),  # a trailing ";" ends the one statement
    ("SELECT ';' AS s -- ; SELECT 2", [{"s": ";"}]),  # a ";" in a string literal or a comment splits nothing
    ("SELECT sum(range)::BIGINT AS s FROM range(4)", [{"s": 6}]),  # 0+1+2+3
    # the nine views, and the seven raw segment relations they read (_segments_<table>, Arrow datasets, no files)
    ("SELECT count(*) AS n FROM (SHOW TABLES)", [{"n": 16}]),
])
def test_plain_selects_answer_through_both_doors(store, sql, expected):
    import json

    out = _cli(store, sql)
    assert out.exit_code == 0 and json.loads(out.output) == expected, out.output
    rows, _, msg, cls, *_ = _dashboard(store, sql)
    assert rows == expected and cls == "msg ok"


def test_more_than_one_statement_is_refused_through_both_doors(store):
    # was: only the last statement's rows ("2"), exit 0, the first result hidden
    for sql in ("SELECT 1 AS a; SELECT 2 AS b", "SELECT 1; SELECT 2;", "select 1;select 2; select 3"):
        n = sql.rstrip(";").count(";") + 1  # 2, 2 and 3 statements
        out = _cli(store, sql)
        assert (out.exit_code, out.output) == (1, f"error: one statement per query: got {n} (run them one at a "
                                                  "time)\n"), sql
        rows, _, msg, cls, *_ = _dashboard(store, sql)
        assert rows == [] and cls == "msg error" and msg == f"one statement per query: got {n} (run them one at a time)"


def test_time_limit_interrupts(store):
    with pytest.raises(ValueError, match="longer than the 0.5 s limit"):
        Store(store).sql("SELECT count(*) FROM range(1000000000000)", Limits(timeout_s=0.5))
    out = CliRunner().invoke(cli_app, ["sql", str(store), "SELECT count(*) FROM range(1000000000000)",
                                       "--timeout", "0.5"])
    assert out.exit_code == 1 and "0.5 s limit" in out.output


def test_size_limit_cuts_bytes_not_only_rows(store):
    s = Store(store)
    # 100 rows of (BIGINT, 1,000-byte string): a head of n rows is 8n + 4(n+1) + 1000n bytes of Arrow buffers
    # (plus a validity bitmap per column), = 1,012n + 4: n = 49 → 49,592 ≤ 50,000 < 50,604 (n = 50), so 49 rows
    df, cut = s.sql("SELECT range AS i, repeat('x', 1000) AS s FROM range(100)", Limits(max_bytes=50_000))
    assert cut and df["i"].tolist() == list(range(49))
    with pytest.raises(ValueError, match="first row is larger"):
        s.sql("SELECT repeat('x', 2000000) AS big", Limits(max_bytes=1_000_000))  # one 2 MB cell, 1 MB cap
    df, cut = s.sql("SELECT range AS i FROM range(10)", Limits(max_rows=4))
    assert df["i"].tolist() == [0, 1, 2, 3] and cut


def test_throwaway_connection_is_locked(store, tmp_path):
    """The second barrier on its own: the connection user SQL runs on cannot reopen file access, spill to a
    temp directory, or read or write any file — the store's own included — even for SQL that never went through
    the parse check."""
    import duckdb

    from collapsewatch.store.sandbox import _lock_down

    con = duckdb.connect(":memory:")
    _lock_down(con, Limits())
    assert con.execute("SELECT current_setting('temp_directory')").fetchone() == ("",)
    root = store.resolve()
    segment = next(root.glob("*/step_metrics/*.parquet"))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    # nothing on disk, the store included: the views read Arrow datasets registered by the process, not files
    for sql in ("SET enable_external_access = true", "SET allowed_directories = ['/']",
                "SELECT * FROM read_text('/etc/hostname')", f"COPY (SELECT 1) TO '{tmp_path}/x.csv'",
                f"SELECT * FROM read_parquet('{segment}')",
                f"COPY (SELECT 1 AS k) TO '{segment.parent}' (FORMAT parquet, PARTITION_BY (k), OVERWRITE)",
                f"COPY (SELECT 1 AS k) TO '{segment}' (FORMAT parquet)"):
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    assert list(tmp_path.iterdir()) == []
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("sql", ["", "  ;  ", "selec 1"])
def test_empty_or_malformed_sql_is_one_clear_error(sql):
    with pytest.raises(ValueError, match="empty SQL|malformed SQL") as e:
        check_select_only(sql)
    assert not isinstance(e.value, ReadOnlyQueryError)
