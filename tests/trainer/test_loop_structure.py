"""The loop's shape: generic (no objective named), drills only through the listed hooks, small functions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from collapsewatch.objectives import objective_names
from collapsewatch.trainer.drills import HOOKS, Drill

TRAINER = Path(__file__).resolve().parents[2] / "collapsewatch" / "trainer"
LOOP_MODULES = ("loop.py", "batches.py", "step.py", "forward.py", "setup.py")
"""The generic loop: the recipe (loop.py), the batch it trains on, one micro-batch (step.py), the forward passes,
set-up and tear-down."""


def _source(name: str) -> str:
    return (TRAINER / name).read_text()


@pytest.mark.parametrize("module", LOOP_MODULES)
def test_the_loop_names_no_objective(module):
    # an objective's bookkeeping comes back from the objective (ObjectiveOutput.scalars); e.g. a line
    # `if cfg.objective == "bapo":` or an import of objectives.bapo in these modules fails here
    names = objective_names()
    assert "bapo" in names and "grpo" in names  # the registry is loaded: the check below is not vacuous
    src = _source(module)
    found = sorted({n for n in names if re.search(rf"\b{n}\b", src, flags=re.IGNORECASE)})
    assert not found, f"trainer/{module} names objective(s) {found}"


def test_the_loop_uses_exactly_the_listed_drill_hooks():
    used = set()
    for module in LOOP_MODULES:
        used |= set(re.findall(r"\bdrill\.([a-z_]+)", _source(module)))
    assert used == set(HOOKS)  # a new hook call without a line in HOOKS (and the docstring's table) fails
    doc = _source("drills.py").split('"""')[1]
    for hook in HOOKS:
        assert callable(getattr(Drill, hook)) and f"``{hook}``" in doc, hook


def _depth(node: ast.AST, d: int = 0) -> int:
    blocks = (ast.For, ast.While, ast.If, ast.With, ast.Try)
    return max([d, *(_depth(ch, d + isinstance(ch, blocks)) for ch in ast.iter_child_nodes(node))])


@pytest.mark.parametrize("module", LOOP_MODULES)
def test_loop_functions_are_short_and_shallow(module):
    # the loop before its split: train() was 125 lines at nesting depth 6 (for/while/if/with/try blocks)
    tree = ast.parse(_source(module))
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        lines = fn.end_lineno - fn.lineno + 1
        assert lines <= 60 and _depth(fn) <= 3, f"trainer/{module}:{fn.name}: {lines} lines, depth {_depth(fn)}"
