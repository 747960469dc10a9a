"""``--help`` as a person reads it (``cli_common.tidy_help``, on every Typer app of the CLI): a plain flag shows no
value type, help text is printed as written (not eaten as Rich markup), and a command's summary is one line."""

from __future__ import annotations

import os
import subprocess
import sys

import typer
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.trainer.cli import app as train_app


def _paths(cmd, prefix: tuple[str, ...] = ()):
    yield prefix
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _paths(sub, (*prefix, name))


def test_no_plain_flag_shows_a_value_type():
    # was: "--once <bool>", "--json <bool>", "--help <bool>" on every command, as if `--once true` were the syntax
    helps = {}
    for path in _paths(typer.main.get_command(app)):
        if path == ("train",):  # hands its arguments to the trainer's own app (below)
            continue
        out = CliRunner().invoke(app, [*path, "--help"])
        assert out.exit_code == 0, (path, out.output)
        helps[path] = out.output
    helps[("train",)] = CliRunner().invoke(train_app, ["--help"]).output
    assert len(helps) > 10 and all("--help" in h for h in helps.values())
    assert [p for p, h in helps.items() if "<bool>" in h] == []
    # options that take a value keep their type
    assert "<float>" in helps[("watch",)] and "<path>" in helps[("sql",)] and "<int>" in helps[("train",)]


def test_square_brackets_in_help_are_text():
    # was: "Grid TOML ( + [] axes)": Rich read [base] and [grid] as style tags and dropped them
    out = CliRunner().invoke(app, ["lab", "run", "--help"]).output
    assert "Grid TOML ([base] + [[grid]] axes)" in out


def test_each_command_summary_is_one_line():
    # was: "…on the views only, on a throwaway" then "connection with …" on the next line: the docstring's own line
    # break. Wide enough that no summary needs wrapping, each command's summary is one line of the list.
    env = {**os.environ, "TERMINAL_WIDTH": "400"}
    out = subprocess.run([sys.executable, "-m", "collapsewatch", "--help"], capture_output=True, text=True, env=env,
                         check=True).stdout
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ ") and len(line.split()) > 2}
    assert "over the views only, on a throwaway connection with a time and a size limit" in rows["sql"]
    assert "wrong columns), missing or corrupt _schema files" in rows["check"]
    assert "(stored ones when these rules found them, else computed now;" in rows["detect"]
