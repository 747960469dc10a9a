"""Process state of the dashboard: which store it serves, a pool of read connections, and token decoders
found from a run's config (the segment caches are in ``history``).

A DuckDB connection must not be used by two threads at once and the server answers requests on many
threads, so each request borrows a ``Store`` from a pool (a fresh connection costs a few milliseconds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from collapsewatch.store.location import is_url
from collapsewatch.store.queries import Store

_lock = threading.Lock()
_path: str | Path | None = None  # a resolved folder, or an object-store URL (read through its mirror)
_pool: list[Store] = []
TOKENIZER_KEYS = ("tokenizer", "tokenizer_path", "tokenizer_dir", "model_path", "model_dir", "model", "path")


def configure(store: str | Path) -> Path:
    """Serve ``store`` (checked by opening it once; raises if it is not a store)."""
    global _path
    path = str(store) if is_url(store) else Path(store).expanduser().resolve()
    Store(path).close()
    with _lock:
        for s in _pool:
            s.close()
        _pool.clear()
        _path = path
    return path


def store_path() -> str | Path:
    if _path is None:
        raise RuntimeError("the dashboard has no store: call create_app(store) first")
    return _path


@contextmanager
def borrow() -> Iterator[Store]:
    """A Store for this thread's exclusive use until the block ends."""
    path = store_path()
    with _lock:
        s = _pool.pop() if _pool else None
    if s is None or s.path != path:
        s = Store(path)
    try:
        yield s
    finally:
        with _lock:
            if s.path == _path and len(_pool) < 8:
                _pool.append(s)
            else:
                s.close()


RUN_TOKENIZER_DIRS = ("tokenizer", "checkpoint")
"""Folders of a run (``<store>/<run>/…``) searched for a tokenizer when the config names none that exists: the
built-in trainer saves its tokenizer into ``tokenizer/``, so a store copied to another machine still decodes."""


def _has_tokenizer(p: Path) -> bool:
    return (p / "tokenizer.json").is_file() or (p / "tokenizer_config.json").is_file()


def tokenizer_dir(config: Any, run_dir: Path | None = None) -> Path | None:
    """The first directory named in a run's config (``model_path``, ``tokenizer`` … at any depth) that
    holds a tokenizer (tokenizer.json or tokenizer_config.json); else one of ``RUN_TOKENIZER_DIRS`` in the
    run's folder ``run_dir``."""
    found: list[Path] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str) and k in TOKENIZER_KEYS:
                    p = Path(v).expanduser()
                    if _has_tokenizer(p):
                        found.append(p)
                else:
                    walk(v)

    walk(config)
    if run_dir is not None:
        found += [run_dir / d for d in RUN_TOKENIZER_DIRS if _has_tokenizer(run_dir / d)]
    return found[0] if found else None


@lru_cache(maxsize=8)
def _decoder(path: str) -> Callable[[list[int]], list[str]] | None:
    p = Path(path)
    if (p / "tokenizer.json").is_file():  # the fast path: no transformers import
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(p / "tokenizer.json"))
        if _byte_level(p / "tokenizer.json"):  # pieces → bytes → text, a character split over tokens kept whole
            from .token_view import byte_level_texts

            special = {t.content for t in tok.get_added_tokens_decoder().values()}
            return lambda ids: byte_level_texts([tok.id_to_token(i) for i in ids], special)
        return lambda ids: [tok.decode([i], skip_special_tokens=False) for i in ids]
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception:
        return None
    return lambda ids: [hf.decode([i], skip_special_tokens=False) for i in ids]


def _byte_level(path: Path) -> bool:
    """Whether a tokenizer.json decodes byte-level BPE (GPT-2's byte alphabet: Qwen, SmolLM, ours)."""
    import json

    try:
        dec = json.loads(path.read_text()).get("decoder") or {}
    except (OSError, ValueError):
        return False
    kinds = [dec.get("type")] + [d.get("type") for d in dec.get("decoders") or [] if isinstance(d, dict)]
    return "ByteLevel" in kinds


def decoder_for(config: Any, run_dir: Path | None = None) -> Callable[[list[int]], list[str]] | None:
    """Token decoder of a run (from its config or its folder ``run_dir``), or None: the page then shows ids."""
    d = tokenizer_dir(config, run_dir)
    return _decoder(str(d.resolve())) if d is not None else None
