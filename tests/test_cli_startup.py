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


def test_a_command_still_imports_what_it_uses() -> None:
    # the check can fail: `sql`'s refusal path imports the sandbox, which needs duckdb to parse the query
    code = """
from collapsewatch.cli import main
try:
    main(["sql", ".", "DROP TABLE runs"])
except SystemExit:
    pass
"""
    assert "duckdb" in _loaded(code)
