"""The README's objective list and docs/objectives.md's table name exactly the registered objectives."""

import re
from pathlib import Path

from collapsewatch.objectives import objective_names

ROOT = Path(__file__).resolve().parents[2]


def test_readme_lists_the_registry():
    text = (ROOT / "README.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("`grpo`"))
    assert sorted(re.findall(r"`([a-z_]+)`", line)) == sorted(objective_names())


def test_objectives_doc_table_is_the_registry():
    rows = [ln for ln in (ROOT / "docs" / "objectives.md").read_text().splitlines() if ln.startswith("| `")]
    assert sorted(re.match(r"\| `([a-z_]+)`", ln).group(1) for ln in rows) == sorted(objective_names())
