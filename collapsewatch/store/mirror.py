"""A reader's mirror of an object store: every published flush whole or not at all, however the bucket changes.

``sync`` copies the published objects of one listing that the mirror holds or is asked for (``lazy``: run rows and
segments of the runs and tables a read needs, a size bound) into the local mirror folder. The bucket keeps changing while
it does (a writer publishes, compacts, retires markers), so it

1. **lists, then downloads** what is new to hidden temporary names; an object **gone** by its GET (merged into a
   compact segment uploaded after the listing) means the listing is stale: it **lists again**, until one listing's
   objects all arrive (``SYNC_ROUNDS`` tries, else the mirror stays as it was until the next sync). Skipping such an
   object would lose the rows of every flush merged between the listing and the GETs (a burst after an outage);
2. **checks every published flush** against its marker, which lists the flush's segments (``<table>/<name>``): a
   segment neither listed nor named by a listed merged segment (``collapsewatch.replaces``) is missing, so none of
   that flush's segments is installed (all or nothing), a warning names the marker once per process, and
   ``collapsewatch check`` reports it (``broken_flushes``). A listed merged segment whose footer is gone by its read
   (merged again) makes it list again too: taken for "replaces nothing", it would hide every flush it holds;
3. **installs** the downloads by rename, then removes what the listing no longer holds, under an exclusive lock
   (``INSTALL_LOCK``) that readers take shared while they list the mirror (``install_lock``, in ``views.view_sql``
   and the sandbox): a reader's file list is one listing's whole state, never a flush half installed.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from . import lazy
from .location import (
    FLUSH_SEGMENT,
    PUBLISHED,
    REPLACES_KEY,
    Location,
    Remote,
    _parquet_tail,
    is_url,
    mirror_dir,
    not_found,
    parse_url,
    published,
)

log = logging.getLogger("collapsewatch.store")
SYNC_WORKERS = 8
SYNC_ROUNDS = 10
INSTALL_LOCK = ".install.lock"  # in a mirror's root: held exclusively while a sync renames and removes files
BROKEN = ".broken-flushes.json"  # in a mirror's root: the published flushes its last sync found missing a segment
GONE = "gone"
_markers: dict[tuple[str, str], list[str]] = {}  # (bucket url, marker rel) -> its lines: markers never change
_warned: set[str] = set()


@contextmanager
def install_lock(mirror: Path, exclusive: bool) -> Iterator[None]:
    """Held exclusively by a sync while it installs, shared by a reader while it lists (no-op on a folder store)."""
    path = mirror / INSTALL_LOCK
    if not exclusive and not path.exists():
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        lazy.enter_shared(0 if exclusive else 1)  # a scope missing now cannot be fetched: ``lazy.NotHeld``
        try:
            yield
        finally:
            lazy.enter_shared(0 if exclusive else -1)
            fcntl.flock(f, fcntl.LOCK_UN)


def is_mirror(root: Path) -> bool:
    return (root / INSTALL_LOCK).exists()


@contextmanager
def _sync_lock(mirror: Path) -> Iterator[None]:
    """One sync or fetch at a time per mirror folder, over every process."""
    mirror.mkdir(parents=True, exist_ok=True)
    (mirror / INSTALL_LOCK).touch()
    with open(mirror / ".sync.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def sync(remote: Remote, mirror: Path, want: set[str] | None = None) -> bool:
    """Make ``mirror`` hold exactly the published, complete flushes of one listing of ``remote`` for the objects
    it fetches (``lazy``: every object but lazy tables' segments, and those of the scopes it holds and of ``want``),
    and keep that listing (module docstring); True when a file changed."""
    with _sync_lock(mirror):
        return _sync(remote, mirror, set(want or ()))


def _sync(remote: Remote, mirror: Path, want: set[str]) -> bool:
    state = lazy.load(mirror) or lazy.State()
    held = set(state.held) | want
    staged: dict[str, tuple[Path, int, int]] = {}  # rel -> (downloaded temporary, size, mtime listed)
    try:
        for _ in range(SYNC_ROUNDS):
            listing = remote.list()
            visible = published(listing)
            fetch = {rel: v for rel, v in visible.items() if lazy.scope(rel) in held or lazy.scope(rel) is None}
            if _download(remote, mirror, fetch, staged):
                continue  # an object of this listing is gone: list again
            if (broken := _broken(remote, mirror, listing, staged)) is None:
                continue  # a merged segment of this listing is gone: list again
            for marker in broken:
                run, stem = marker.split("/", 1)[0], marker.rsplit("/", 1)[-1]
                for rel in [r for r in visible if r.startswith(f"{run}/") and r.endswith(f"/{stem}.parquet")]:
                    del visible[rel]
            new = lazy.State({"url": remote.url, "listing": {r: list(v) for r, v in visible.items()},
                              "held": state.held, "fetched": state.fetched})
            return _install(mirror, visible, staged, broken, new, want)
        log.warning("collapsewatch: %s changed under %d listings in a row; the mirror keeps its last state",
                    remote.url, SYNC_ROUNDS)
        return False
    finally:
        for tmp, _, _ in staged.values():
            tmp.unlink(missing_ok=True)


def fetch_scopes(mirror: Path, tables: list[str], run: str | None) -> None:
    """Fetch the scopes of ``tables`` (of ``run`` or every run) the mirror lacks, at its kept listing; an object
    of it gone by now: a full sync (lists again, updates every held scope with them)."""
    with _sync_lock(mirror):
        state = lazy.load(mirror)
        if state is None:
            return
        missing = state.wanted(tables, run) - state.held.keys()
        if not missing:
            return
        remote = parse_url(state.url)
        todo = {rel: (size, mtime) for s in missing for rel in state.scopes[s]
                for size, mtime in [state.listing[rel]]}
        staged: dict[str, tuple[Path, int, int]] = {}
        try:
            try:
                gone = _download(remote, mirror, todo, staged) or len(staged) < sum(
                    1 for rel, (size, mtime) in todo.items() if not _have(mirror, rel, size, mtime))
            except OSError as e:
                raise FileNotFoundError(f"store {remote.url!r} cannot be read: {str(e).splitlines()[0]}") from e
            if gone:  # gone, or re-PUT since the listing: list again
                _sync(remote, mirror, missing)
                return
            with install_lock(mirror, exclusive=True):
                for rel in list(staged):
                    os.replace(staged.pop(rel)[0], mirror / rel)
                lazy.mark_held(mirror, state, missing)
                lazy.save(mirror, state)
        finally:
            for tmp, _, _ in staged.values():
                tmp.unlink(missing_ok=True)


def _have(mirror: Path, rel: str, size: int, mtime: int) -> bool:
    try:
        st = (mirror / rel).stat()
    except FileNotFoundError:
        return False
    return st.st_size == size and st.st_mtime_ns == mtime


def _download(remote: Remote, mirror: Path, visible: dict[str, tuple[int, int]],
              staged: dict[str, tuple[Path, int, int]]) -> bool:
    """Download every visible object the mirror and ``staged`` lack at its listed size and mtime into ``staged``;
    True when one was gone by its GET."""
    todo = []
    for rel, (size, mtime) in visible.items():
        if (rel in staged and staged[rel][1:] == (size, mtime)) or _have(mirror, rel, size, mtime):
            continue
        todo.append((rel, size, mtime))
    with ThreadPoolExecutor(SYNC_WORKERS) as pool:
        results = list(pool.map(lambda item: _stage(remote, mirror, *item), todo))
    gone = False
    for (rel, size, mtime), got in zip(todo, results, strict=True):
        if got == GONE:
            gone = True
        elif isinstance(got, Path):
            old = staged.pop(rel, None)
            if old is not None:
                old[0].unlink(missing_ok=True)
            staged[rel] = (got, size, mtime)
    return gone


def _stage(remote: Remote, mirror: Path, rel: str, size: int, mtime: int) -> Path | str | None:
    """Download one object to a hidden temporary beside its place in the mirror: the temporary's path, ``GONE``
    when the object no longer exists, None when it is not the listed ``size`` (re-PUT since: a run row; the next
    sync fetches it, the mirror keeps the old one meanwhile)."""
    try:
        data = remote._read(rel)
    except OSError:
        # S3 says RESOURCE_NOT_FOUND, not FileNotFoundError; any other failure is the endpoint's and is raised
        if remote.fs.get_file_info(remote.key(rel)).type == not_found():
            return GONE
        raise
    lazy.count(len(data))
    if len(data) != size:
        return None
    if rel.endswith(".parquet") and not _parquet_tail(data) and remote._read(rel) != data:
        return None  # cut short by a re-PUT between the size lookup and the read (a corrupt object reads alike)
    target = mirror / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_bytes(data)
    os.utime(tmp, ns=(time.time_ns(), mtime))  # the object's mtime: a re-PUT object is fetched again
    return tmp


def _replaced(local: Path) -> set[str]:
    """The file names a merged segment replaces (its ``collapsewatch.replaces`` metadata); none if unreadable."""
    import pyarrow.parquet as pq

    try:
        return set(json.loads((pq.read_schema(local).metadata or {}).get(REPLACES_KEY, b"[]")))
    except (OSError, ValueError, TypeError):
        return set()


def _broken(remote: Remote, mirror: Path, listing: dict[str, tuple[int, int]],
            staged: dict[str, tuple[Path, int, int]]) -> dict[str, str] | None:
    """Marker rel -> what is missing, for each listed marker naming a segment that is neither listed nor replaced by
    a listed merged segment of its folder; None when such a merged segment is gone by its footer read (the listing is
    stale). Markers of older writers (bare names, no table) are not checked."""
    markers = [rel for rel in listing if rel.split("/")[1:2] == [PUBLISHED]]
    unknown = [rel for rel in markers if (remote.url, rel) not in _markers]
    with ThreadPoolExecutor(SYNC_WORKERS) as pool:
        for rel, lines in zip(unknown, pool.map(_marker_lines(remote), unknown), strict=True):
            if lines is not None:
                _markers[(remote.url, rel)] = lines
    folders: dict[str, set[str]] = {}
    out: dict[str, str] = {}
    for marker in markers:
        run = marker.split("/", 1)[0]
        for line in _markers.get((remote.url, marker), []):
            if "/" not in line or f"{run}/{line}" in listing:
                continue
            folder, name = f"{run}/{line.rsplit('/', 1)[0]}", line.rsplit("/", 1)[1]
            if folder not in folders:
                folders[folder] = set()
                for rel in listing:
                    if rel.startswith(f"{folder}/") and rel.endswith(".parquet") and \
                            not FLUSH_SEGMENT.match(rel.rsplit("/", 1)[1]):
                        local = staged[rel][0] if rel in staged else mirror / rel
                        if (names := _replaced(local) if local.exists() else _replaced_remote(remote, rel)) is None:
                            return None
                        folders[folder] |= names
            if name not in folders[folder]:
                out[marker] = f"published flush is missing {line}"
                break
    for marker, why in out.items():
        if marker not in _warned:
            _warned.add(marker)
            log.warning("collapsewatch: %s/%s: %s; the flush's other segments are not read (all of a flush or "
                        "none); collapsewatch check STORE reports it", remote.url, marker, why)
    return out


_footers: dict[tuple[str, str], set[str]] = {}  # (bucket url, merged segment rel) -> what it replaces


def _replaced_remote(remote: Remote, rel: str) -> set[str] | None:
    """What a merged segment not in the mirror replaces, from its footer alone (two ranged reads); None when it is
    gone (merged again since listed), nothing for an unreadable footer; an endpoint's failure is raised."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (remote.url, rel) not in _footers:
        try:
            with remote.fs.open_input_file(remote.key(rel)) as f:
                size = f.size()
                f.seek(size - 8)
                length = int.from_bytes(f.read(4), "little")
                f.seek(size - 8 - length)
                tail = f.read(length + 8)
            lazy.count(len(tail) + 8, 0)
            meta = pq.read_schema(pa.BufferReader(b"PAR1" + tail)).metadata or {}
            _footers[(remote.url, rel)] = set(json.loads(meta.get(REPLACES_KEY, b"[]")))
        except OSError:
            if remote.fs.get_file_info(remote.key(rel)).type == not_found():
                return None
            raise  # the endpoint's failure: this sync fails, the mirror stays as it was
        except (ValueError, TypeError, pa.ArrowException):
            return set()
    return _footers[(remote.url, rel)]


def _marker_lines(remote: Remote):
    def read(rel: str) -> list[str] | None:
        try:
            data = remote._read(rel)
            lazy.count(len(data))
            return data.decode(errors="replace").split("\n")
        except OSError:  # retired meanwhile: its flush is merged, nothing to check
            return None
    return read


def _install(mirror: Path, visible: dict[str, tuple[int, int]], staged: dict[str, tuple[Path, int, int]],
             broken: dict[str, str], state: lazy.State, want: set[str]) -> bool:
    changed = False
    with install_lock(mirror, exclusive=True):
        for rel in [r for r in staged if r in visible]:
            tmp, _, _ = staged.pop(rel)
            os.replace(tmp, mirror / rel)
            changed = True
        for dirpath, _, files in os.walk(mirror):
            for name in files:
                path = Path(dirpath) / name
                if not name.startswith(".") and path.relative_to(mirror).as_posix() not in visible:
                    path.unlink(missing_ok=True)
                    changed = True
        tmp = mirror / f".{BROKEN}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps(sorted(broken.items())))
        os.replace(tmp, mirror / BROKEN)
        changed |= bool(lazy.mark_held(mirror, state, want & state.scopes.keys()))
        lazy.save(mirror, state, listing=True)
        _run_folders(mirror, set(state.runs()))
    return changed


def _run_folders(mirror: Path, runs: set[str]) -> None:
    """Each listed run's ``runs`` folder, empty until its run rows are read (a run is a folder with ``runs`` to
    every reader), and no such empty folder of a run the bucket no longer holds."""
    for run in runs:
        (mirror / run / lazy.KEPT).mkdir(parents=True, exist_ok=True)
    for e in os.scandir(mirror):
        if e.is_dir() and e.name not in runs and not e.name.startswith((".", "_")):
            for folder in (Path(e.path) / lazy.KEPT, Path(e.path)):
                try:
                    folder.rmdir()  # only when empty
                except OSError:
                    break


def broken_flushes(mirror: Path) -> list[tuple[str, str]]:
    """(marker rel path, what is missing) of each published flush the mirror's last sync left out."""
    try:
        return [(m, why) for m, why in json.loads((mirror / BROKEN).read_text())]
    except (OSError, ValueError):
        return []


def reader(store: str | os.PathLike) -> Location:
    """The location a reader uses: the folder itself, or for a URL its mirror, synced now."""
    if not is_url(store):
        return Location(Path(store).expanduser().resolve())
    remote = parse_url(store)
    loc = Location(mirror_dir(remote), remote, mirror=True)
    refresh(loc)
    return loc


_synced: dict[Path, tuple[float, int, float]] = {}  # mirror -> (when this process last synced it, generation, took)
SYNC_SHARE = 4.0  # syncs ≥ this × the last one's duration apart: listing takes ≤ 1/5 of a reader's time, any bucket

def refresh(loc: Location, max_age: float = 0.0) -> int:
    """Sync a reader's mirror unless this process synced it less than ``max_age`` (> 0: or ``SYNC_SHARE`` × that
    sync's duration) seconds ago; returns the mirror's generation, which changes when its files do. No-op (0) for a
    folder store; an unreachable endpoint or bucket is one clear error."""
    if loc.remote is None:
        return 0
    when, generation, took = _synced.get(loc.local, (float("-inf"), 0, 0.0))
    if time.monotonic() - when < (max(max_age, SYNC_SHARE * took) if max_age > 0 else 0.0):
        return generation
    start = time.monotonic()
    try:
        changed = sync(loc.remote, loc.local)
    except OSError as e:
        raise FileNotFoundError(f"store {loc.remote.url!r} cannot be read: {str(e).splitlines()[0]}") from e
    generation += changed
    _synced[loc.local] = (time.monotonic(), generation, time.monotonic() - start)
    return generation


def need(mirror: Path, tables: list[str] | tuple[str, ...], run: str | None = None) -> None:
    """Make the mirror hold the scopes of ``tables`` (of ``run``, or of every run) that the kept listing has: a
    no-op on a folder store and for ``runs``; fetched now, or ``NotHeld`` while this thread holds the shared lock."""
    wanted_tables = [t for t in tables if t in lazy.LAZY_TABLES]
    if not wanted_tables:
        return
    state = lazy.load(mirror)
    if state is None:
        return
    wanted = state.wanted(wanted_tables, run)
    lazy.touch(mirror, wanted)
    if wanted <= state.held.keys():
        return
    if lazy.shared_held():
        missing = ", ".join(sorted(wanted - state.held.keys())[:3])
        raise lazy.NotHeld(f"{mirror}: {missing} not in the mirror; read again")
    fetch_scopes(mirror, wanted_tables, run)
