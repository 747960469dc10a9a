"""StoreWriter: buffers rows of one (run, rank) and flushes them as immutable Parquet segments.

Every segment is written to a hidden temporary name and ``os.replace``d into place, so readers see a
segment whole or not at all. A failed flush (full disk, permissions) keeps the rows for the next try,
counts the failure and reports it once; it never raises into the training loop. The segments of one flush share
its number (``r<rank>-<flush>-<uid>``). On an object store (``location.py``) they are written to a local spool,
uploaded under their final names, and the flush is published by its marker, written last (``publisher.py``); an
upload that fails leaves the spooled files to a later flush.

Live compaction: a long run would leave thousands of small segments (one per table every flush), and every
query and cold dashboard load reads every file's footer. So once ``compact_every`` segments of a table have been
written by this writer, they are merged into one ``r<rank>-compact-*`` segment (written first, then the small ones
deleted: a reader sees each row at least once, and twice only inside that instant — the views deduplicate step
rows, the dashboard re-reads a vanished segment); once ``compact_every`` of those exist, they are merged again.
A merged segment names the files it replaces in its Parquet metadata (``REPLACES_KEY``): a process killed
after the rename and before the deletes leaves inputs that readers skip and the next compaction deletes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from . import location, restart
from .location import REPLACES_KEY, Location
from .manifest import announce
from .migrations import SCHEMA_STAMP
from .publisher import Publisher
from .tables import ROW_GROUP_ROWS, arrow_schemas, atomic_write_table, conform  # noqa: F401  (re-exported)

log = logging.getLogger("collapsewatch.store")
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_PENDING_ROWS = 5_000_000  # per table; beyond this, oldest buffered batches are dropped and counted


def valid_run_name(run: object) -> bool:
    return isinstance(run, str) and RUN_NAME.match(run) is not None


def check_run_name(run: str) -> str:
    if not valid_run_name(run):
        raise ValueError(f"run name {run!r} is invalid: use letters, digits, '.', '_' or '-' "
                         "(starting with a letter or digit, at most 128 characters)")
    return run


def write_merged(table: str, files: list[Path], rank: int) -> Path:
    """Write ``files`` (segments of one table and rank, in step order) as one ``r<rank>-compact-*`` segment
    next to them that names them in its metadata (``REPLACES_KEY``); the inputs are left in place."""
    schema = arrow_schemas()[table]
    data = pa.concat_tables([conform(pq.read_table(f), schema) for f in files])
    # the inputs and what they replaced in turn: a reader can still tell that a flush merged twice is accounted for
    names = {f.name for f in files}.union(*(json.loads((pq.read_schema(f).metadata or {}).get(REPLACES_KEY, b"[]"))
                                            for f in files))
    data = data.replace_schema_metadata({**(schema.metadata or {}), REPLACES_KEY: json.dumps(sorted(names))})
    target = files[0].parent / f"r{rank}-compact-{uuid.uuid4().hex[:8]}.parquet"
    atomic_write_table(data, target)
    return target


def merge_segments(table: str, files: list[Path], rank: int, where: Location | None = None) -> Path:
    """``write_merged`` (uploaded, for an object store: one PUT, published by itself), then delete the inputs;
    returns the new segment. Nothing is deleted if the write fails; a kill before the deletes end leaves inputs
    that every reader already skips."""
    target = write_merged(table, files, rank)
    if where is not None:
        where.push(target)
    for f in files:
        if where is not None:
            where.remove(f)
        else:
            f.unlink(missing_ok=True)
    return target


def _is_template(path: Path, schema: pa.Schema) -> bool:
    """Whether ``path`` is the typed empty table of ``schema`` (readable, no rows, exactly these columns)."""
    try:
        meta = pq.read_metadata(path)
        return meta.num_rows == 0 and meta.schema.to_arrow_schema().remove_metadata().equals(schema.remove_metadata())
    except (OSError, ValueError, pa.ArrowException):
        return False


def ensure_schema(root: Path) -> list[Path]:
    """Create, upgrade or repair ``root/_schema``: one typed, empty Parquet file per table, each rewritten atomically
    when it is missing, corrupt or of another schema, then ``VERSION``. Returns the files written (none when all
    were right). Writers call it; readers never do (they read the package's own, ``segments.schema_file``)."""
    marker = root / "_schema" / "VERSION"
    try:
        current = marker.read_text().strip() == SCHEMA_STAMP
    except (OSError, UnicodeDecodeError):
        current = False
    written = []
    for table, schema in arrow_schemas().items():
        path = root / "_schema" / table / "empty.parquet"
        if current and _is_template(path, schema):
            continue
        atomic_write_table(schema.empty_table(), path)
        written.append(path)
    if written or not current:
        tmp = marker.parent / f".VERSION.{uuid.uuid4().hex[:8]}"
        tmp.write_text(SCHEMA_STAMP)
        os.replace(tmp, marker)
        written.append(marker)
    return written


def init_store(root: Path) -> None:
    """Make ``root`` a store (``_schema`` in place). A folder that does not exist yet appears by one rename with its
    ``_schema`` inside, so a process killed here never leaves an empty folder that readers reject."""
    if not root.exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = root.parent / f".{root.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            ensure_schema(tmp)
            os.rename(tmp, root)
        except OSError:
            if not root.is_dir():  # else another process (rank) created it meanwhile: use theirs
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    ensure_schema(root)


def init_remote(where: Location) -> None:
    """Upload ``_schema`` to an object store that lacks it at this version or lacks one of its files, or holds one
    of another size (corrupt); ``VERSION`` last: a reader that sees it sees every table's file. Every rank may do
    this at once: the objects are identical."""
    if where.remote is None:
        return
    ensure_schema(where.local)
    files = [where.local / "_schema" / table / "empty.parquet" for table in arrow_schemas()]
    listed = where.remote.list("_schema")
    stale = [f for f in files if listed.get(where.rel(f), (-1, 0))[0] != f.stat().st_size]
    try:
        with where.remote.fs.open_input_file(where.remote.key("_schema/VERSION")) as f:
            if f.read().decode(errors="replace").strip() == SCHEMA_STAMP and not stale:
                return
    except FileNotFoundError:
        pass
    except OSError:  # S3 reports a missing key as a plain OSError
        if where.remote.fs.get_file_info(where.remote.key("_schema/VERSION")).type != pafs.FileType.NotFound:
            raise
    for f in stale:
        where.push(f)
    where.push(where.local / "_schema" / "VERSION")


NAN_KEPT = frozenset({"scalars", "step_metrics"})
"""Tables whose NaN is a value the run logged (a NaN loss: the non-finite rule reads it, live and on read), kept as
NaN; None is NULL there (not logged). In the others (per-sequence and per-token measurements, events, sentinels) a
NaN means "not measurable" and is stored as NULL."""


def to_arrow(table: str, columns: dict[str, Any]) -> pa.Table:
    """Columns (lists / numpy arrays) → an Arrow table of ``table``'s schema; absent columns are NULL, None is
    NULL, NaN is NULL except in the ``NAN_KEPT`` tables."""
    schema = arrow_schemas()[table]
    unknown = set(columns) - set(schema.names)
    if unknown:
        raise ValueError(f"table {table!r} has no column(s) {sorted(unknown)}")
    n = len(next(iter(columns.values())))
    nan_is_null = table not in NAN_KEPT
    arrays = []
    for f in schema:
        col = columns.get(f.name)
        arrays.append(pa.nulls(n, f.type) if col is None else pa.array(col, type=f.type, from_pandas=nan_is_null))
    return pa.Table.from_arrays(arrays, schema=schema)


def replace_segment(root: str | os.PathLike, run: str, table: str, name: str, columns: dict[str, Any]) -> Path:
    """Write (or atomically replace) one named segment of a run, outside any rank's writer.

    Used for rows derived after the fact, e.g. offline detector events (``offline-r0.parquet``); the name
    does not start with ``r<rank>-``, so compaction leaves it alone and a re-run replaces it whole.
    """
    check_run_name(run)
    where = location.writer(root)
    if where.remote is not None:
        init_remote(where)
    path = where.local / run / table / f"{name}.parquet"
    table_rows = to_arrow(table, columns) if columns else arrow_schemas()[table].empty_table()
    atomic_write_table(table_rows, path)
    where.push(path)  # one PUT replaces the object whole: an object store needs no rename here
    return path


class StoreWriter:
    """Buffered, append-only writer of one run's rows for one rank."""

    def __init__(self, root: str | os.PathLike, run: str, rank: int = 0, world_size: int = 1,
                 heartbeat_s: float = 5.0, compact_every: int = 64, spool: str | os.PathLike | None = None,
                 upload_retry_s: float = 30.0) -> None:
        if compact_every < 0 or compact_every == 1:
            raise ValueError(f"compact_every must be 0 (never) or >= 2, got {compact_every}")
        # a folder store is written in place; an object store through a local spool (location.writer)
        self.where = location.writer(root, spool)
        self.root = self.where.local
        self.run = check_run_name(run)
        self.rank, self.world_size, self.heartbeat_s = rank, world_size, heartbeat_s
        try:
            init_store(self.root)
            # a run folder that was there (a resumed run, a rank joining): its first run row is announced
            self._announce = (self.root / run).is_dir()
            (self.root / run).mkdir(exist_ok=True)
            init_remote(self.where)
            self._hydrate()
        except OSError as e:
            raise ValueError(f"store {str(root)!r} is not writable: {str(e).splitlines()[0]}") from e
        self._pending: dict[str, list[pa.Table]] = defaultdict(list)
        self._flush_n = 0
        self._uid = uuid.uuid4().hex[:8]
        self.compact_every = compact_every
        self._small: dict[str, list[Path]] = defaultdict(list)   # segments this writer flushed, not yet merged
        self._merged: dict[str, list[Path]] = defaultdict(list)  # its compact segments, not yet merged again
        self.publisher = Publisher(self.where, run, upload_retry_s)  # object stores: uploads and markers
        self.resume_cut = False  # a resumed run (Monitor(resume=True)): cut the old branch at the first flush
        self.write_errors = 0
        self.dropped_rows = 0
        self.dropped_batches = 0
        self.probe_errors = 0
        self._reported = False
        self._last_beat = float("-inf")
        self.run_info: dict[str, Any] = {
            "run": run, "rank": rank, "world_size": world_size, "status": "running",
            "started_at": datetime.now(timezone.utc), "ended_at": None, "host": socket.gethostname(),
            "pid": os.getpid(), "objective": None, "config": None, "versions": None,
        }

    def _hydrate(self) -> None:
        """Object stores: copy this rank's run row of this run into the spool when the bucket has one, so that a
        new writer on another machine sees that the rank already wrote the run (``runlock.refuse_reuse``)."""
        if self.where.remote is None:
            return
        rel = f"{self.run}/runs/r{self.rank}.parquet"
        try:
            self.where.remote.get(rel, self.root / rel)
        except FileNotFoundError:
            pass
        except OSError:  # S3 reports a missing key as a plain OSError: the run is new here
            if self.where.remote.fs.get_file_info(self.where.remote.key(rel)).type != pafs.FileType.NotFound:
                raise

    def set_run_info(self, *, objective: str | None = None, config: dict | None = None,
                     versions: dict | None = None) -> None:
        if objective is not None:
            self.run_info["objective"] = objective
        if config is not None:
            self.run_info["config"] = json.dumps(config, default=str, sort_keys=True)
        if versions is not None:
            self.run_info["versions"] = json.dumps(versions, sort_keys=True)

    def append(self, table: str, columns: dict[str, Any] | pa.Table) -> None:
        t = columns if isinstance(columns, pa.Table) else to_arrow(table, columns)
        if t.num_rows:
            self._pending[table].append(t)
            self._bound(table)

    def _bound(self, table: str) -> None:
        while sum(t.num_rows for t in self._pending[table]) > MAX_PENDING_ROWS and len(self._pending[table]) > 1:
            dropped = self._pending[table].pop(0)
            self.dropped_rows += dropped.num_rows

    def flush(self, status: str | None = None) -> bool:
        """Write every pending table as one segment each (one flush), publish it, then the heartbeat row.
        True when everything is written and published (an object store in its pause after a failure: False)."""
        ok = True
        staged: list[tuple[str, Path]] = []
        tables = [t for t in self._pending if self._pending[t]]
        if self.resume_cut and tables and not restart.before_first_flush(self, tables):
            return False  # a resumed run's old branch is cut first (restart.py); its rows wait for the next flush
        if tables:
            self._flush_n += 1
        for table in tables:
            data = pa.concat_tables(self._pending[table])
            path = self.root / self.run / table / f"r{self.rank}-{self._flush_n:06d}-{self._uid}.parquet"
            try:
                atomic_write_table(data, path)
                self._pending[table] = []
            except OSError as e:
                ok = False
                self._failed(e)
                continue
            staged.append((table, path))
        published, error = self.publisher.publish(staged, force=status is not None)
        if error is not None:
            ok = False
            self._failed(error)
        for table, path in published:
            self._small[table].append(path)
            self._compact(table)
        if status is not None:
            self.run_info["status"] = status
            if status in ("finished", "crashed"):
                self.run_info["ended_at"] = datetime.now(timezone.utc)
        # the heartbeat row is rewritten at most twice per heartbeat interval, and at every status change
        if status is not None or not ok or time.monotonic() - self._last_beat > self.heartbeat_s / 2:
            try:
                self._write_run_row(force=status is not None)
                self._last_beat = time.monotonic()
            except (OSError, pa.ArrowException) as e:
                ok = False
                self._failed(e if isinstance(e, OSError) else OSError(str(e)))
        return ok and not self.unpublished()

    def _compact(self, table: str) -> None:
        """Live compaction (module docstring): merge this writer's small segments, then its compact ones."""
        if not self.compact_every:
            return
        for level, nxt in ((self._small, self._merged), (self._merged, None)):
            if len(level[table]) < self.compact_every:
                return
            try:
                merged = merge_segments(table, level[table], self.rank, self.where)
            except (OSError, pa.ArrowException) as e:  # the small segments stay: nothing is lost
                self._failed(e if isinstance(e, OSError) else OSError(str(e)))
                return
            try:
                self.publisher.retire(level[table])
            except OSError as e:
                self._failed(e)
            level[table] = []
            (nxt if nxt is not None else self._merged)[table].append(merged)

    def unpublished(self) -> int:
        """Flushes written but not yet published (object stores whose uploads failed; always 0 for a folder)."""
        return self.publisher.unpublished()

    def drop_spool(self) -> None:
        """Object stores: delete this rank's spooled segments of the run once every flush is published (the
        bucket holds them; the spool would otherwise keep a copy of everything the rank wrote). No-op otherwise."""
        if self.where.remote is None or self.unpublished():
            return
        for f in (self.root / self.run).glob(f"*/r{self.rank}-*.parquet"):
            f.unlink(missing_ok=True)
        self._small.clear()
        self._merged.clear()

    def _write_run_row(self, force: bool = False) -> None:
        row = dict(self.run_info, updated_at=datetime.now(timezone.utc), heartbeat_s=self.heartbeat_s,
                   dropped_batches=self.dropped_batches, dropped_rows=self.dropped_rows,
                   write_errors=self.write_errors, probe_errors=self.probe_errors)
        table = to_arrow("runs", {k: [v] for k, v in row.items()})
        path = self.root / self.run / "runs" / f"r{self.rank}.parquet"
        atomic_write_table(table, path)
        if self._announce:  # readers that look at settled runs in turn look at every run once (manifest.announce)
            self._announce = False
            announce(self.root)
        self.publisher.push(path, force)  # an object store replaces it by one PUT, never by a rename

    def _failed(self, e: OSError) -> None:
        self.write_errors += 1
        if not self._reported:
            self._reported = True
            log.error("collapsewatch: cannot write to store %s (%s); training continues, rows are kept for "
                      "retry and failures are counted in runs.write_errors", self.where.show(self.root), e)
