"""What an object store's mirror holds: the run rows always, a run's other tables when a read needs them, a size bound.

A reader's mirror (``mirror.py``) is not a copy of the bucket. Every sync lists the whole prefix and keeps the
listing (``STATE``, in the mirror's root), but downloads only

* every object that is not a segment of a **lazy table** (``LAZY_TABLES``: every table but ``runs``): the run rows,
  ``_schema``, offline events' run rows, tokenizers — what opening a store and the runs rows read;
* the new objects of every **scope** (``<run>/<table>`` of a lazy table) the mirror already holds, so that all held
  scopes are one listing's state (a query's files are one listing's whole state, as before).

A read of a table (``segments.table_files``, and before it takes the mirror's shared lock ``need``) asks for its
scopes — one run's, or every run's for a store-wide view — and ``need`` fetches those the mirror lacks, at the
kept listing (an object gone by then: a full sync, which lists again). A scope's objects are installed before the
scope is marked held; a read that finds a scope not held while it holds the shared lock raises ``NotHeld`` (a
``FileNotFoundError``: the read is retried as a race with a writer, ``segments.read_until_stable``).

**Size bound.** Held scopes' bytes are kept under ``COLLAPSEWATCH_MIRROR_MAX_BYTES`` (default ``DEFAULT_MAX_BYTES``):
after a fetch the least recently used scopes (as recorded by the readers that fetched) are removed, under the
exclusive lock, never the ones the fetch was for. A query reading an evicted file meanwhile fails as a race and is
read again (that file fetched again). Run rows and ``_schema`` are never evicted.

``FETCHED``: bytes and objects this process downloaded from the bucket (the bench and the tests read it); the mirror's
``STATE`` keeps the total over every process that used it (``fetched``).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .migrations import TABLES

LAZY_TABLES = frozenset(TABLES)
KEPT = "runs"  # a table whose scopes are never evicted (run rows: small, and read by every runs page)
STATE = ".lazy.json"  # url, held scopes, bytes fetched: rewritten at each fetch
LISTING = ".lazy-listing.json"  # the kept listing: rewritten at each sync only (O(objects) to parse)
MAX_BYTES_ENV = "COLLAPSEWATCH_MIRROR_MAX_BYTES"
DEFAULT_MAX_BYTES = 20 * 2**30
FETCHED = {"bytes": 0, "objects": 0}
_persisted = {"bytes": 0, "objects": 0}  # of FETCHED, what was added to a STATE's total already
_lock = threading.Lock()
_local = threading.local()  # depth of shared install locks this thread holds on mirrors
_cache: dict[str, tuple[tuple[int, ...], State]] = {}
_listings: dict[str, tuple[tuple[int, int], dict[str, list[int]]]] = {}
_touched: dict[str, dict[str, float]] = {}  # mirror -> scope -> when this process last read it


class NotHeld(FileNotFoundError):
    """A read listed a scope the mirror does not hold (evicted since its ``need``): read again."""


def scope(rel: str) -> str | None:
    """``<run>/<table>`` of a table's segment (a run's tokenizer files: ``<run>/tokens``, fetched with the token rows
    they decode), None for an object every sync fetches (``_schema``)."""
    parts = rel.split("/")
    if parts[0] == "_schema" or len(parts) < 3:
        return None
    if parts[1] == "tokenizer":
        return f"{parts[0]}/tokens"
    return f"{parts[0]}/{parts[1]}" if len(parts) == 3 and parts[1] in LAZY_TABLES else None


def count(nbytes: int, objects: int = 1) -> None:
    with _lock:
        FETCHED["bytes"] += nbytes
        FETCHED["objects"] += objects


def max_bytes() -> int:
    value = os.environ.get(MAX_BYTES_ENV)
    if not value:
        return DEFAULT_MAX_BYTES
    try:
        return max(0, int(float(value)))
    except ValueError:
        raise ValueError(f"{MAX_BYTES_ENV}={value!r} is not a number of bytes") from None


class State:
    """The kept listing (published objects after the broken-flush rule: rel -> [size, mtime]), the held scopes
    (scope -> last used, epoch seconds) and the bytes fetched into this mirror over every process."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        data = data or {}
        self.url: str = data.get("url", "")
        self.listing: dict[str, list[int]] = data.get("listing", {})
        self.held: dict[str, float] = data.get("held", {})
        self.fetched: list[int] = data.get("fetched", [0, 0])
        self.scopes: dict[str, list[str]] = {}
        for rel in self.listing:
            s = scope(rel)
            if s is not None:
                self.scopes.setdefault(s, []).append(rel)

    def runs(self) -> list[str]:
        return sorted({rel.split("/", 1)[0] for rel in self.listing if rel.split("/")[1:2] == ["runs"]})

    def size(self, s: str) -> int:
        return sum(self.listing[rel][0] for rel in self.scopes.get(s, []))

    def wanted(self, tables: list[str] | tuple[str, ...], run: str | None) -> set[str]:
        """The scopes of ``tables`` (of ``run``, or of every run) that have objects in the listing."""
        runs = [run] if run is not None else self.runs()
        return {f"{r}/{t}" for r in runs for t in tables if f"{r}/{t}" in self.scopes}


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def files_key(mirror: Path) -> tuple | None:
    """What changes whenever the mirror's files do (a sync or a fetch rewrites ``STATE``; a sync, ``LISTING``):
    their stats; None for a folder store or a mirror not synced."""
    key, lkey = _stat(mirror / STATE), _stat(mirror / LISTING)
    return None if key is None or lkey is None else (*key, *lkey)


def load(mirror: Path) -> State | None:
    """The mirror's state (cached while its files are unchanged); None for a folder store or a mirror not synced."""
    key, lkey = _stat(mirror / STATE), _stat(mirror / LISTING)
    if key is None or lkey is None:
        return None
    hit = _cache.get(str(mirror))
    if hit is not None and hit[0] == (*key, *lkey):
        return hit[1]
    try:
        data = json.loads((mirror / STATE).read_text())
        listed = _listings.get(str(mirror))
        if listed is None or listed[0] != lkey:
            listed = (lkey, json.loads((mirror / LISTING).read_text()))
            _listings[str(mirror)] = listed
    except (OSError, ValueError):
        return None
    state = State({**data, "listing": listed[1]})
    _cache[str(mirror)] = ((*key, *lkey), state)
    return state


def _write(path: Path, data: Any) -> None:
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def save(mirror: Path, state: State, listing: bool = False) -> None:
    """Write ``state`` (under the sync lock; its listing too with ``listing``, at a sync), with this process's reads
    and new fetches merged in."""
    with _lock:
        add = [FETCHED["bytes"] - _persisted["bytes"], FETCHED["objects"] - _persisted["objects"]]
        _persisted.update(FETCHED)
        for s, when in _touched.pop(str(mirror), {}).items():
            if s in state.held:
                state.held[s] = max(state.held[s], when)
    state.fetched = [state.fetched[0] + add[0], state.fetched[1] + add[1]]
    if listing:
        _write(mirror / LISTING, state.listing)
    _write(mirror / STATE, {"url": state.url, "held": state.held, "fetched": state.fetched})


def shared_held() -> bool:
    return getattr(_local, "depth", 0) > 0


def enter_shared(delta: int) -> None:
    _local.depth = getattr(_local, "depth", 0) + delta


def touch(mirror: Path, scopes: set[str]) -> None:
    """Record that this process reads ``scopes`` now (the size bound evicts the least recently read)."""
    now = time.time()
    with _lock:
        touched = _touched.setdefault(str(mirror), {})
        for s in scopes:
            touched[s] = now


def mark_held(mirror: Path, state: State, scopes: set[str]) -> list[str]:
    """Mark ``scopes`` held (used now) and evict the least recently used others past the size bound; their
    folders are removed here (the caller holds the exclusive lock). Returns the evicted scopes."""
    now = time.time()
    for s in scopes:
        state.held[s] = now
    for s, when in _touched.get(str(mirror), {}).items():
        if s in state.held:
            state.held[s] = max(state.held[s], when)
    state.held = {s: t for s, t in state.held.items() if s in state.scopes}
    total = sum(state.size(s) for s in state.held)
    bound = max_bytes()
    evicted = []
    for s in sorted(state.held, key=lambda x: state.held[x]):
        if total <= bound:
            break
        if s in scopes or s.endswith(f"/{KEPT}"):
            continue
        for rel in state.scopes[s]:
            (mirror / rel).unlink(missing_ok=True)
        shutil.rmtree(mirror / s, ignore_errors=True)
        total -= state.size(s)
        del state.held[s]
        evicted.append(s)
    return evicted


def fetched(mirror: Path) -> tuple[int, int]:
    """(bytes, objects) fetched into the mirror by every process that used it (each saves its own at each fetch)."""
    state = load(mirror)
    return (0, 0) if state is None else (state.fetched[0], state.fetched[1])


def held_bytes(mirror: Path) -> int:
    """Bytes of the lazy tables' segments the mirror holds (the size bound's measure)."""
    state = load(mirror)
    return 0 if state is None else sum(state.size(s) for s in state.held)
