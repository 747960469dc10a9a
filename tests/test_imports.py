"""The package's import structure — ``collapsewatch/`` and the dashboard (installed as ``collapsewatch.dashboard``
from ``dashboard/``): no import cycles, between modules or between subpackages; adapters that do not reach into the
built-in trainer's code; and a product that does not lean on its lab.

Edges are read from the source (``ast``), function-level imports included: a lazy import inside a function still ties
two modules together, it only hides the cycle from the interpreter at start-up. Imports under ``if TYPE_CHECKING:``
are left out: they name a type for the checker and never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import collapsewatch
import collapsewatch.dashboard

ROOTS = {"collapsewatch": Path(collapsewatch.__file__).parent,
         "collapsewatch.dashboard": Path(collapsewatch.dashboard.__file__).parent}
"""Package name → its folder (the dashboard is a folder of its own, mapped in by pyproject's package-dir)."""


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for package, root in ROOTS.items():
        for f in root.rglob("*.py"):
            parts = [*package.split("."), *f.relative_to(root).with_suffix("").parts]
            is_pkg = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def import_graph() -> dict[str, set[str]]:
    """module → the collapsewatch modules it imports (``from .x import y`` points at ``.x.y`` if that is a module)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        deps: set[str] = set()
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                prefix = ".".join(base + ([node.module] if node.module else []))
                deps.update(f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix for a in node.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                found.append(sorted([v, *comp]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _subpackages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731  collapsewatch.models.tiny -> collapsewatch.models
    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(top(m), set()).update(top(d) for d in deps if top(d) != top(m))
    return out


def test_cycle_finder_finds_a_cycle():
    # a → b → c → a and d → a: one cycle {a, b, c}; d is outside it
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others():
    # was: trainer.checkpoint imported trainer.setup (lazily) and setup imported checkpoint
    assert cycles(import_graph()) == []


def test_no_subpackage_cycles():
    # was: collapsewatch.models (warmstart) → rollout and rollout (bench.py) → models
    assert cycles(_subpackages(import_graph())) == []


def test_adapters_do_not_depend_on_the_builtin_trainer():
    # the TRL adapter fills a TokenBatch from TRL's tensors; the built-in models, rollout, env and trainer are not its
    # business (integrations/trl_tiny.py, which built a tiny GRPOTrainer on the built-in model, moved to tests/)
    deps = _subpackages(import_graph())["collapsewatch.integrations"]
    assert not deps & {"collapsewatch.models", "collapsewatch.rollout", "collapsewatch.env", "collapsewatch.trainer"}
    assert "collapsewatch.rollout.bench" not in import_graph()  # the rollout benchmark is bench/bench_rollout.py


def test_the_dashboard_is_in_the_graph():
    # the two circles the scan did not see while it read collapsewatch/ only: dashboard.live ↔ dashboard.history
    # (history.clear imported live) and dashboard.app → demo → dashboard.waiting (port_in_use lived in demo)
    graph = import_graph()
    assert "collapsewatch.dashboard.history" in graph["collapsewatch.dashboard.live"]
    assert "collapsewatch.dashboard.waiting" in graph["collapsewatch.demo"]


def test_only_the_lab_imports_the_lab():
    # the lab uses the product (reward rule, detectors, store), never the reverse; the one exception is the CLI,
    # which mounts the lab's command group (`collapsewatch lab ...`)
    lab = "collapsewatch.lab"
    users = {m for m, deps in import_graph().items()
             if not (m == lab or m.startswith(lab + ".")) and any(d == lab or d.startswith(lab + ".") for d in deps)}
    assert users == {"collapsewatch.cli"}
