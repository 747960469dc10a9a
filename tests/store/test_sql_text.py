"""The SQL the store builds leans on no parser leniency: a subquery in FROM is a real SELECT, never a
parenthesised bare name (duckdb 2.0.1 refuses ``FROM (run_ranks)``, which 2.0.0 accepted: issue 21)."""

import re
from pathlib import Path

import duckdb
import pytest

from collapsewatch.store.migrations import TABLES
from collapsewatch.store.views import episodes_sql, runs_sql, view_sql

BARE_NAME_IN_PARENS = re.compile(r"\bFROM\s*\(\s*[A-Za-z_][A-Za-z_0-9]*\s*\)", re.IGNORECASE)


def test_view_sql_has_no_parenthesised_bare_name(tmp_path: Path) -> None:
    # Every view over both scan kinds (the whole store, one run's folder) and over table names (compaction's
    # sources): none may read FROM (name), whichever duckdb parses it.
    variants = [view_sql(tmp_path), view_sql(tmp_path, "r"),
                view_sql(tmp_path, "r", sources={t: t for t in TABLES})]
    for sql in variants:
        for name, text in sql.items():
            assert not BARE_NAME_IN_PARENS.search(text), (name, text)


def test_runs_and_episode_rules_run_on_the_installed_duckdb() -> None:
    # Two rank rows of one run, one running and one finished: runs_sql gives one row, status 'running'
    # (not all finished, none crashed); two versions of one episode: episodes_sql keeps the longer (step_end 7).
    con = duckdb.connect()
    con.execute("""CREATE TABLE rr AS SELECT * FROM (VALUES
        ('a', 'running', 0), ('a', 'finished', 1)) t(run, status, rank)""")
    con.execute("""ALTER TABLE rr ADD COLUMN started_at TIMESTAMP; ALTER TABLE rr ADD COLUMN updated_at TIMESTAMP;
        ALTER TABLE rr ADD COLUMN ended_at TIMESTAMP; ALTER TABLE rr ADD COLUMN world_size INT;
        ALTER TABLE rr ADD COLUMN objective VARCHAR; ALTER TABLE rr ADD COLUMN config VARCHAR;
        ALTER TABLE rr ADD COLUMN versions VARCHAR; ALTER TABLE rr ADD COLUMN host VARCHAR;
        ALTER TABLE rr ADD COLUMN dropped_batches INT; ALTER TABLE rr ADD COLUMN dropped_rows INT;
        ALTER TABLE rr ADD COLUMN write_errors INT; ALTER TABLE rr ADD COLUMN probe_errors INT""")
    rows = con.execute(runs_sql("SELECT * FROM rr")).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("a", "running")]
    con.execute("""CREATE TABLE ev AS SELECT * FROM (VALUES
        ('a', 'lld', 'decay', 3, 5, TIMESTAMP '2026-01-01', 0, 'online'),
        ('a', 'lld', 'decay', 3, 7, TIMESTAMP '2026-01-02', 0, 'online'))
        t(run, detector, phase, step_start, step_end, written_at, rank, source)""")
    assert con.execute(f"SELECT step_end FROM ({episodes_sql('SELECT * FROM ev')})").fetchall() == [(7,)]


@pytest.mark.parametrize("bad", ["FROM (run_ranks)", "from ( steps )"])
def test_the_guard_sees_a_bare_name(bad: str) -> None:
    assert BARE_NAME_IN_PARENS.search(f"SELECT * {bad} GROUP BY run")
