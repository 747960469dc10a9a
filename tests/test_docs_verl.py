"""docs/verl.md as a verl user follows it: every variable its shell lines read is set on the page, and its list of
tests is the real one (each file it names exists, each real-verl test file is described, no stale count)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "verl.md").read_text()


def _shell() -> str:
    return "\n".join(re.findall(r"^```(?:bash|sh)\n(.*?)^```$", PAGE, flags=re.M | re.S))


def test_every_variable_the_shell_lines_read_is_set_on_the_page():
    shell = _shell()
    read = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", shell))
    set_here = set(re.findall(r"^export ([A-Z_][A-Z0-9_]*)=", shell, flags=re.M))
    # was: the ingest line read $VERL_FILE_LOGGER_PATH, which nothing on the page set (empty: ingest read ".")
    assert "VERL_FILE_LOGGER_PATH" in read
    assert read <= set_here, sorted(read - set_here)


def test_the_list_of_tests_is_the_real_one():
    named = set(re.findall(r"tests/[\w/]+\.py", PAGE))
    assert all((ROOT / n).is_file() for n in named), sorted(n for n in named if not (ROOT / n).is_file())
    real = {f"tests/integrations/{f.name}" for f in (ROOT / "tests" / "integrations").glob("test_verl*.py")}
    assert real <= named, sorted(real - named)  # was: test_verl_rollout_corr.py missing from the list
    assert not re.search(r"\b\d+ passed\b", PAGE)  # a count goes stale with the next test; the command gives it
