"""The command line starts light: importing ``collapsewatch.cli`` and printing ``--help`` (what every command pays
before it runs) import none of the heavy libraries; each command imports what it uses when it runs.

Checked on ``sys.modules`` of a fresh interpreter, not on a timing (the machine's load would decide a time).
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "dash", "duckdb", "pandas", "scipy", "numpy", "pyarrow", "plotly")


def _loaded(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return sorted(set(json.loads(out.strip().splitlines()[-1])) & set(HEAVY))


def test_importing_the_cli_imports_no_heavy_library() -> None:
    assert _loaded("import collapsewatch.cli") == []


def test_help_imports_no_heavy_library() -> None:
    code = """
import contextlib, io
from collapsewatch.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["--help"])
    except SystemExit:
        pass
assert "runs" in out.getvalue() and "lab" in out.getvalue(), out.getvalue()
"""
    assert _loaded(code) == []


def test_a_command_still_imports_what_it_uses(tmp_path) -> None:
    # the check can fail: `runs --json` reads the store through DuckDB and builds its rows with pandas
    from collapsewatch.store.writer import init_store

    init_store(tmp_path / "store")
    code = f"""
from collapsewatch.cli import main
try:
    main(["runs", {str(tmp_path / "store")!r}, "--json"])
except SystemExit:
    pass
"""
    assert {"duckdb", "pandas"} <= set(_loaded(code))


def test_sql_on_a_folder_store_leaves_duckdb_and_pandas_to_its_worker(tmp_path) -> None:
    # `sql` hands the text to its worker, which checks and runs it; this process only decodes the Arrow answer and
    # prints it, so of the heavy libraries it loads pyarrow (and numpy, which pyarrow imports) and nothing else
    from collapsewatch.store.writer import init_store

    init_store(tmp_path / "store")
    code = f"""
import contextlib, io
from collapsewatch.cli import main
out, err = io.StringIO(), io.StringIO()
for sql in ("DROP TABLE runs", "SELECT 41 + 1 AS x"):
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["sql", {str(tmp_path / "store")!r}, sql])
        except SystemExit:
            pass
assert "refused: the store is read-only here" in err.getvalue(), err.getvalue()
assert "│ 42 │" in out.getvalue(), out.getvalue()
"""
    assert _loaded(code) == ["numpy", "pyarrow"]


def test_sql_starts_its_worker_before_the_command_line_imports(tmp_path) -> None:
    # the entry point (`collapsewatch.launch`, the console script and `python -m collapsewatch`) starts the SQL
    # worker before Typer and the commands are imported, so the worker's imports overlap them; the check can fail:
    # with the worker started by the `sql` command itself, typer is already loaded when it spawns
    from collapsewatch.store.writer import init_store

    init_store(tmp_path / "store")
    code = f"""
import contextlib, io, sys
from collapsewatch.store import sqlproc
seen = []
spawn = sqlproc._spawn
sqlproc._spawn = lambda: (seen.append("typer" in sys.modules), spawn())[1]
from collapsewatch.launch import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["sql", {str(tmp_path / "store")!r}, "SELECT 41 + 1 AS x"])
    except SystemExit:
        pass
assert "│ 42 │" in out.getvalue(), out.getvalue()
assert seen == [False], seen  # one worker, started before typer was imported, and it answered
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_other_commands_start_no_worker() -> None:
    code = """
import contextlib, io
from collapsewatch.launch import main
with contextlib.redirect_stdout(io.StringIO()):
    for argv in (["--help"], ["sql", "--help"]):
        try:
            main(argv)
        except SystemExit:
            pass
import sys
assert "collapsewatch.store.sqlproc" not in sys.modules
"""
    assert _loaded(code) == []
