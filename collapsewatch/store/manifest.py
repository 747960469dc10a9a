"""What a reader learned about a store, kept between processes: ``$COLLAPSEWATCH_CACHE/readers/<store>/``.

Segments are immutable with unique names, so what a reader derives from one file (its check: readable, of its
table, what it replaces) or from one run's set of files (its verdict and episodes under one set of rules) holds for
as long as those files are there unchanged. Each process used to derive it again (every segment's footer read
once per process: 2–3 ms a file). This module keeps it on local disk:

* ``FileChecks``: one JSON file per store, ``checks.json``: relative path → [size, mtime_ns, problem, replaces].
  An entry counts only for the same size and mtime (a file replaced under its name is checked again); entries of
  files no longer there are dropped when it is saved;
* ``load_record`` / ``save_record``: one JSON file per run and kind (``<kind>/<run>.json``) holding a key and a
  value; the value is returned only for an equal key (callers key by what the value was derived from).

Never in the store (reading never writes to it); one folder per store (the resolved folder or the mirror of a URL).
A cache that cannot be read or written costs the time it saves, never an answer: a write is a temporary file and a
rename (a concurrent reader sees the old or the new file), and a lost race between two processes costs a check.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cachedir import cache_dir

VERSION = 1  # of the files' layout: a reader of another layout ignores them
SAVE_EVERY_S = 2.0


def store_dir(root: Path) -> Path:
    """The folder of one store's reader caches (its resolved path, hashed)."""
    path = str(root)
    return _store_dir(path, "" if os.path.isabs(path) else os.getcwd(), str(cache_dir()))


@functools.lru_cache(maxsize=256)
def _store_dir(path: str, cwd: str, cache: str) -> Path:
    """(memoised: ``runs`` asks for every run's records, and resolving a path stats each of its parts)"""
    resolved = str(Path(cwd, path).resolve())
    digest = hashlib.sha1(resolved.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(resolved).name)[:40]
    return Path(cache) / "readers" / f"{name}-{digest}"


def _read(path: Path) -> Any:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data.get("data") if isinstance(data, dict) and data.get("version") == VERSION else None


def _write(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(json.dumps({"version": VERSION, "data": data}, allow_nan=True))
        os.replace(tmp, path)
    except OSError:  # a full or read-only cache folder: the next process checks again
        pass


class FileChecks:
    """Checks of one store's segment files, loaded once per process and saved after a listing found new files."""

    def __init__(self, root: Path) -> None:
        self.root = str(Path(root).resolve()).rstrip("/") + "/"
        self.path = store_dir(root) / "checks.json"
        loaded = _read(self.path)
        self.entries: dict[str, list] = loaded if isinstance(loaded, dict) else {}
        self.dirty = self.pending = False
        self.saved = float("-inf")
        self.lock = threading.Lock()

    def _rel(self, path: str) -> str | None:
        return path[len(self.root):] if path.startswith(self.root) else None

    def get(self, path: str, size: int, mtime_ns: int) -> tuple[str | None, tuple[str, ...]] | None:
        """(problem, replaces) as checked before, when ``path`` is the same size and mtime; else None."""
        rel = self._rel(path)
        entry = self.entries.get(rel) if rel is not None else None
        if not entry or entry[0] != size or entry[1] != mtime_ns:
            return None
        return entry[2], tuple(entry[3])

    def put(self, path: str, size: int, mtime_ns: int, problem: str | None, replaces: tuple[str, ...]) -> None:
        rel = self._rel(path)
        if rel is not None:
            with self.lock:
                self.entries[rel] = [size, mtime_ns, problem, list(replaces)]
                self.dirty = True

    def save(self, now: bool = False) -> None:
        """Write the checks if a listing added one, without the files no longer in the store: at most every
        ``SAVE_EVERY_S`` (a live run adds files at each flush) unless ``now``, and at the process's exit."""
        with self.lock:
            if not self.dirty:
                return
            if not now and time.monotonic() - self.saved < SAVE_EVERY_S:
                if not self.pending:
                    self.pending = True
                    atexit.register(self.save, True)
                return
            self.saved = time.monotonic()
            self.entries = {rel: e for rel, e in self.entries.items() if os.path.exists(self.root + rel)}
            self.dirty = False
            data = dict(self.entries)
        _write(self.path, data)


_checks: dict[str, FileChecks] = {}
_lock = threading.Lock()


def file_checks(root: Path) -> FileChecks:
    """This process's ``FileChecks`` of the store at ``root`` (loaded from disk on first use)."""
    key = str(root)
    with _lock:
        if key not in _checks:
            _checks[key] = FileChecks(root)
        return _checks[key]


def _record_path(root: Path, kind: str, run: str) -> Path:
    return store_dir(root) / kind / f"{run}.json"


def load_record(root: Path, kind: str, run: str, key: Any) -> Any:
    """The value saved for ``run`` under ``kind`` with an equal ``key`` (JSON-comparable), else None."""
    data = _read(_record_path(root, kind, run))
    if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)):
        return None
    return data.get("value")


def save_record(root: Path, kind: str, run: str, key: Any, value: Any) -> None:
    _write(_record_path(root, kind, run), {"key": key, "value": value})


def clear() -> None:
    """Forget this process's loaded checks and looked-at folders (the files stay)."""
    with _lock:
        _checks.clear()
        _looked.clear()


def run_folders(root: Path) -> list[str]:
    """The names of the store's run folders (those with a ``runs`` folder), sorted."""
    return sorted(runs_folder_mtimes(root))


_looked: dict[str, tuple[int, dict[str, int]]] = {}
"""Store folder → (its mtime, each run's ``runs`` folder mtime) as this process last looked (``runs_folder_mtimes``
with ``fresh``)."""


def runs_folder_mtimes(root: Path, fresh: Callable[[list[str]], set[str]] | None = None) -> dict[str, int]:
    """Each run folder's name → the mtime of its ``runs`` folder (a run row added or replaced changes it).

    With ``fresh`` (a process that asks again and again: the runs page's refresh, a run page's picker), the runs
    folders looked at again are only those ``fresh(names)`` names (running runs, runs in turn: :func:`in_turn`),
    unless the store's own folder changed since this process last looked (a run folder added or removed, or a
    writer started on a run folder that was there: ``announce``) or changed within ``SETTLE_NS``; the others keep
    the mtime last seen. So a refresh costs one ``stat`` per run it names, not one per run of the store."""
    key = str(root)
    try:
        top = os.stat(root).st_mtime_ns
    except OSError:
        return {}
    last = _looked.get(key) if fresh is not None else None
    if last is None or last[0] != top or top > time.time_ns() - SETTLE_NS:
        out = _scan(root)
    else:
        out = dict(last[1])
        for run in fresh(sorted(out)):
            try:
                st = os.stat(f"{key}/{run}/runs")
                out[run] = st.st_mtime_ns
            except OSError:
                out.pop(run, None)
    if fresh is not None:
        _looked[key] = (top, out)
    return dict(out)


IN_TURN = 50
"""Runs a repeated reader looks at in turn each time, changed or not (``in_turn``)."""


def in_turn(names: list[str], turn: int, size: int = IN_TURN) -> set[str]:
    """The ``turn``-th slice of ``size`` of ``names`` (wrapping), so that every name comes within
    ``len(names) / size`` turns: what a refresh looks at whether it changed or not (a file copied into a run's
    folder by hand, which no writer announces)."""
    if not names or size <= 0:
        return set()
    start = turn * size % len(names)
    return set(names[start:start + size]) | set(names[:max(0, start + size - len(names))])


def announce(root: Path) -> None:
    """Change the store folder's mtime (a file made and removed in it), so that readers asking with ``fresh``
    look at every run again: a writer starting on a run folder that was already there (a resumed run, a rank
    joining) calls it once. Never fails: a reader also looks at each run in turn."""
    probe = Path(root) / f".start-{uuid.uuid4().hex}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
    except OSError:
        pass


def _scan(root: Path) -> dict[str, int]:
    out = {}
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return out
    for e in entries:
        if e.name.startswith((".", "_")) or not e.is_dir():
            continue
        try:
            st = os.stat(f"{e.path}/runs")
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            out[e.name] = st.st_mtime_ns
    return out


TABLED = ("runs", "step_metrics", "scalars", "events")
"""A run's folders whose files its runs-table row is read from (run row, step statistics, episodes, verdict)."""
SETTLE_NS = 2_000_000_000  # a folder changed this recently may change again within its mtime's granularity


def run_signature(folder: Path, now: int) -> tuple | None:
    """The mtimes of the run's folder and of its ``TABLED`` folders (a segment added, merged or removed, a run row
    replaced changes its folder's); None while one changed within ``SETTLE_NS``. (Plain string paths: 5 stats a run
    at every refresh, where pathlib's objects cost more than the stat.)"""
    out = []
    base = str(folder)
    for path in (base, *(f"{base}/{t}" for t in TABLED)):
        try:
            m = os.stat(path).st_mtime_ns
        except OSError:
            m = -1
        if m > now - SETTLE_NS:
            return None
        out.append(m)
    return tuple(out)
