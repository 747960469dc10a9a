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
import os
from dataclasses import asdict
from functools import lru_cache
from importlib import resources

from .config import DetectorConfig

NOT_RULES = ("defaults.py", "__init__.py", "rules.py")
"""Modules of this package that hold no rule (the docs' defaults table generator; the package's lazy re-exports;
this digest): not part of the digest."""


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


def _code_digest_of(sources: list[tuple[str, str]]) -> str:
    h = hashlib.sha1()
    for name, text in sources:
        h.update(name.encode() + b"\0" + code_text(text).encode() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha1 of the rule modules' code (:func:`code_text`), in file-name order. Parsing them costs ~0.25 s, so the
    result is kept in ``$COLLAPSEWATCH_CACHE/rules/``, named by the sha1 of the modules' bytes: the same sources
    read from it, any edit computed afresh (a cache that cannot be read or written is skipped)."""
    files = resources.files("collapsewatch.detectors")
    sources = [(f.name, f.read_text(encoding="utf-8")) for f in sorted(files.iterdir(), key=lambda p: p.name)
               if f.name.endswith(".py") and f.name not in NOT_RULES]
    raw = hashlib.sha1("\0".join(f"{n}\0{t}" for n, t in sources).encode()).hexdigest()
    from ..cachedir import cache_dir

    kept = cache_dir() / "rules" / raw
    try:
        text = kept.read_text(encoding="ascii").strip()
        if len(text) == 40 and all(c in "0123456789abcdef" for c in text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    digest = _code_digest_of(sources)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{raw}.{os.getpid()}")
        tmp.write_text(digest, encoding="ascii")
        os.replace(tmp, kept)
    except OSError:
        pass
    return digest


@lru_cache(maxsize=32)
def _digest(config: DetectorConfig) -> str:
    settings = json.dumps(asdict(config), sort_keys=True, default=list)
    return hashlib.sha1((code_digest() + "\0" + settings).encode()).hexdigest()[:12]


@lru_cache(maxsize=1)
def _default_digest() -> str:
    return _digest(DetectorConfig())


def rules_digest(config: DetectorConfig | None = None) -> str:
    """The digest of ``config`` (default: the built-in settings) under this code: 12 hex digits."""
    return _default_digest() if config is None else _digest(config)
