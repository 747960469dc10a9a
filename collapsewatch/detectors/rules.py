"""The rules digest: which detector rules produced an episode, as one short string stored with it.

    rules_digest(config) = sha1( JSON of the DetectorConfig (every setting, sorted keys)
                                 ‖ the code of every rule module of this package )[:12]

Two readers that get the same digest run the same code with the same settings, so they find the same
episodes (online == offline). A stored episode whose digest differs from the reader's was found by other
rules (older code, other settings): readers then show the current rules' episodes, computed on read
(:mod:`collapsewatch.judge`), and say so. The code part is the detectors' own code, not the package version: a
rule changed between two releases (or on a branch) changes the digest. "Code" is each module's syntax tree with
its docstrings left out (``ast.dump``): comments, docstrings and layout do not change what a rule finds, so
editing them leaves stored episodes current.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import asdict
from functools import lru_cache
from importlib import resources

from .config import DetectorConfig

NOT_RULES = ("defaults.py", "__init__.py")
"""Modules of this package that hold no rule (the docs' defaults table generator; the package's lazy re-exports):
not part of the digest."""


def code_text(source: str) -> str:
    """What of a module's source counts as its rule: the syntax tree without docstrings (a module's, class's or
    function's first statement when it is a string constant), dumped without line numbers."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha1 of the rule modules' code (:func:`code_text`), in file-name order."""
    h = hashlib.sha1()
    files = resources.files("collapsewatch.detectors")
    for f in sorted(files.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".py") and f.name not in NOT_RULES:
            h.update(f.name.encode() + b"\0" + code_text(f.read_text(encoding="utf-8")).encode() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=32)
def _digest(config: DetectorConfig) -> str:
    settings = json.dumps(asdict(config), sort_keys=True, default=list)
    return hashlib.sha1((code_digest() + "\0" + settings).encode()).hexdigest()[:12]


def rules_digest(config: DetectorConfig | None = None) -> str:
    """The digest of ``config`` (default: the built-in settings) under this code: 12 hex digits."""
    return _digest(config or DetectorConfig())
