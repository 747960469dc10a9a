"""Which segment files a read may touch: one bad file costs that file, never the store.

A segment is bad when its footer cannot be read (empty, truncated, not Parquet) or its columns are not the
table's (a foreign file, a key column missing, a column of another kind, e.g. ``step`` as text). Each file is
checked once (cached by path, size and mtime, in this process and between processes: ``manifest.FileChecks``) and
a bad one is reported once per process, in one line naming it.

Views scan a table with a glob while every file of it is good (new segments show at the next query) and with
the explicit list of good files when one is bad (``scan_sql``); ``collapsewatch check`` lists the bad files and
moves them to ``<store>/_quarantine/<run>/<table>/`` (out of every glob) with ``--quarantine``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from ..cachedir import cache_dir
from . import mirror
from .location import QUARANTINE, REPLACES_KEY, TABLE_KEY, Location
from .manifest import FileChecks, file_checks
from .migrations import SCHEMA_STAMP, TABLES
from .mirror import is_mirror
from .writer import arrow_schemas, ensure_schema

log = logging.getLogger("collapsewatch.store")

# Messages of a read that raced a writer: a file deleted under the scan (compaction), or replaced by an atomic
# rename of the same name between two opens of one scan (a run row, rewritten at each flush), whose new footer
# does not match the old offsets (DuckDB: "TProtocolException: Invalid data"; Arrow: magic bytes / thrift).
_RACE_MESSAGES = ("No such file", "TProtocolException", "Parquet magic bytes", "deserialize thrift",
                  "Couldn't deserialize", "Invalid data")


def raced(e: BaseException) -> bool:
    """Whether a failed read of the store is a race with a writer or a compaction: read again, listing afresh.
    Bad files never raise here (they are checked and skipped before any read), so this is never a lasting fault."""
    import duckdb  # lazily, as elsewhere in the write path's imports

    if isinstance(e, (duckdb.IOException, FileNotFoundError)):
        return True
    return isinstance(e, duckdb.Error) and any(m in str(e) for m in _RACE_MESSAGES)


SCHEMA = "_schema"  # the store's typed empty tables (writer.ensure_schema); not a run
KEYS = ("run", "rank", "step")
T = TypeVar("T")
STABLE_TRIES = 3  # races against one unchanged listing before a failed read is taken for a lasting fault
RACE_DEADLINE_S = 300.0  # and however the store changes, a read stops retrying after this long


def read_until_stable(root: Path, read: Callable[[], T], also: tuple[type[BaseException], ...] = ()) -> T:
    """``read()`` (a read that lists the store afresh each time), run again while it fails on a race with a writer
    or a compaction (``raced``, or one of ``also``) and the store's files changed since the failure before: under
    any load a read ends once the store holds still for one try, never after a fixed number of tries that a fast
    compaction can use up. Raised: a race against one unchanged listing ``STABLE_TRIES`` times in a row (a lasting
    fault), or after ``RACE_DEADLINE_S``."""
    deadline = time.monotonic() + RACE_DEADLINE_S
    last: tuple | None = None
    same = 0
    while True:
        try:
            return read()
        except Exception as e:
            if not (raced(e) or isinstance(e, also)):
                raise
            now = _signature(root)  # only on a failure: a read that succeeds lists nothing more
            same = same + 1 if now == last else 0
            if same >= STABLE_TRIES - 1 or time.monotonic() > deadline:
                raise
            last = now
            time.sleep(0.01 * (1 + same))


def _signature(root: Path) -> tuple:
    """The store's files as reads see them: every table's good and replaced segments."""
    return tuple((t, *table_files(root, t, fetch=False)[0::2]) for t in TABLES)

_lock = threading.Lock()
_verdicts: dict[tuple[str, int, int], tuple[str | None, tuple[str, ...]]] = {}
_reported: set[str] = set()


def _kind(t: pa.DataType) -> str:
    for name, test in (("integer", pa.types.is_integer), ("float", pa.types.is_floating),
                       ("text", lambda x: pa.types.is_string(x) or pa.types.is_large_string(x)),
                       ("bool", pa.types.is_boolean), ("timestamp", pa.types.is_timestamp)):
        if test(t):
            return name
    return str(t)


def schema_problem(schema: pa.Schema, table: str) -> str | None:
    """Why a file of this Arrow schema cannot be a segment of ``table`` (None when it can). Older segments
    may lack newer columns (read as NULL); integer or float widths may differ. Columns this package does not know
    are a foreign file's, unless the file is stamped as a segment of ``table`` (``TABLE_KEY``): then they are a
    newer collapsewatch's additions, and the file is read."""
    want = arrow_schemas()[table]
    foreign = [n for n in schema.names if n not in want.names]
    if foreign and (schema.metadata or {}).get(TABLE_KEY) != table.encode():
        return f"columns not in table {table}: {', '.join(foreign[:5])}"
    missing = [k for k in KEYS if k in want.names and k not in schema.names]
    if missing:
        return f"key column(s) missing: {', '.join(missing)}"
    for f in schema:
        if f.name not in want.names:  # a newer collapsewatch's column (stamped above)
            continue
        expected = want.field(f.name).type
        if not pa.types.is_null(f.type) and _kind(f.type) != _kind(expected):
            return f"column {f.name} is {f.type}, table {table} has {expected}"
    return None


def _verdict(path: str, table: str, size: int, mtime_ns: int, checks: FileChecks | None = None
             ) -> tuple[str | None, tuple[str, ...]]:
    """``check_file`` without the report: (why the file is not a segment of ``table`` or None, what it replaces);
    from ``checks`` (kept between processes) when that file was checked there at this size and mtime."""
    key = (path, size, mtime_ns)
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
    known = checks.get(path, size, mtime_ns) if checks is not None else None
    if known is not None:
        with _lock:
            _verdicts[key] = known
        return known
    replaces: tuple[str, ...] = ()
    if not os.path.exists(path):  # compacted away after listing: neither good nor bad, and not cached
        return "gone", ()
    try:
        if size == 0:
            problem: str | None = "empty file"
        else:
            schema = pq.read_schema(path)
            problem = schema_problem(schema, table)
            replaces = tuple(json.loads((schema.metadata or {}).get(REPLACES_KEY, b"[]")))
    except FileNotFoundError:
        return "gone", ()
    except (OSError, ValueError, pa.ArrowException) as e:
        if not os.path.exists(path):  # deleted while its footer was read (compaction): not a bad file
            return "gone", ()
        problem = f"not a readable Parquet file ({str(e).splitlines()[0][:120]})"
    with _lock:
        _verdicts[key] = (problem, replaces)
    if checks is not None:
        checks.put(path, size, mtime_ns, problem, replaces)
    return problem, replaces


def check_file(path: str, table: str, size: int | None = None, mtime_ns: int | None = None,
               checks: FileChecks | None = None) -> tuple[str | None, tuple[str, ...]]:
    """(why ``path`` is not a readable segment of ``table`` or None, the file names it replaces when it is
    a merged segment); cached per (path, size, mtime) in this process and in ``checks`` (the store's checks kept
    between processes, ``manifest.FileChecks``); a bad file is reported once per process, in one line."""
    if size is None or mtime_ns is None:
        st = os.stat(path)
        size, mtime_ns = st.st_size, st.st_mtime_ns
    problem, replaces = _verdict(path, table, size, mtime_ns, checks)
    with _lock:
        report = problem not in (None, "gone") and path not in _reported
        _reported.add(path)
    if report:
        log.warning("collapsewatch: skipping bad segment %s: %s (collapsewatch check STORE --quarantine moves "
                    "it aside)", path, problem)
    return problem, replaces


def _folders(root: Path, table: str, run: str | None) -> list[Path]:
    if run is not None:
        return [root / run / table]
    try:
        return [Path(e.path) / table for e in os.scandir(root) if e.is_dir() and e.name not in (QUARANTINE, SCHEMA)]
    except FileNotFoundError:
        return []


Listing = tuple[list[tuple[str, int]], list[tuple[str, str]], list[str]]


def table_files(root: Path, table: str, run: str | None = None, fetch: bool = True) -> Listing:
    """((path, size) of each good segment, (path, reason) of each bad one, paths of the segments a merged
    segment beside them replaces) of ``table`` in one run's folder or in every run folder of the store
    (``_schema`` is not a run: ``schema_problems``), sorted by path. Replaced segments are not among the good ones.
    On an object store's mirror the table's files are fetched first where it lacks them (``mirror.need``; not with
    ``fetch=False``: what the mirror holds now)."""
    if fetch:
        mirror.need(root, (table,), run)
    good: list[tuple[str, int]] = []
    bad: list[tuple[str, str]] = []
    replaced: list[str] = []
    checks = file_checks(root)
    for folder in _folders(root, table, run):
        found: list[tuple[str, int]] = []
        names: set[str] = set()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if not e.name.endswith(".parquet") or e.name.startswith("."):
                continue
            try:
                st = e.stat()
            except FileNotFoundError:  # compacted away while listing
                continue
            problem, replaces = check_file(e.path, table, st.st_size, st.st_mtime_ns, checks)
            if problem == "gone":
                continue
            if problem is None:
                found.append((e.path, st.st_size))
                names.update(replaces)
            else:
                bad.append((e.path, problem))
        for path, size in found:
            if os.path.basename(path) in names:
                replaced.append(path)
            else:
                good.append((path, size))
    checks.save()
    return sorted(good), sorted(bad), sorted(replaced)


def _q(path: str | Path) -> str:
    return str(path).replace("'", "''")


def files_scan(paths: list[str], empty: Path) -> str:
    """A Parquet scan of exactly ``paths`` plus the table's typed ``empty`` file (no rows), so that a column the
    catalogue gained after those segments were written reads as NULL instead of failing to bind."""
    quoted = ", ".join(f"'{_q(p)}'" for p in dict.fromkeys([*paths, str(empty)]))
    return f"read_parquet([{quoted}], union_by_name = true)"


_current: Path | None = None


def _current_schema_root() -> Path:
    """A folder outside the store holding ``_schema`` as this package's migrations define it: what every read uses
    as each table's typed empty file. One folder per schema, shared by every process of this user and kept between
    them (``$COLLAPSEWATCH_CACHE/schema/<stamp digest>``; ``ensure_schema`` writes each file atomically and repairs
    a damaged one); where the cache cannot be written, a temporary folder removed when the process exits."""
    global _current
    with _lock:
        if _current is None:
            digest = hashlib.sha1(SCHEMA_STAMP.encode()).hexdigest()[:16]
            shared = cache_dir() / "schema" / digest
            try:
                shared.mkdir(parents=True, exist_ok=True)
                if not _schema_intact(shared):
                    ensure_schema(shared)
                _current = shared
            except OSError:
                _current = Path(tempfile.mkdtemp(prefix="collapsewatch-schema-"))
                atexit.register(shutil.rmtree, _current, ignore_errors=True)
                ensure_schema(_current)
        return _current


def _schema_intact(folder: Path) -> bool:
    """Whether a shared schema folder holds what ``ensure_schema`` wrote there: ``VERSION`` is this package's stamp
    and each table's file is readable, empty and stamped with its table's name. The folder is named by the stamp's
    digest and its files are written whole (atomic renames), so this is enough without the migrations' own schemas
    (building them costs a process about 0.1 s of DuckDB); a file that fails it is rewritten by ``ensure_schema``."""
    try:
        if (folder / SCHEMA / "VERSION").read_text().strip() != SCHEMA_STAMP:
            return False
        for table in TABLES:
            meta = pq.read_metadata(folder / SCHEMA / table / "empty.parquet")
            if meta.num_rows or (meta.schema.to_arrow_schema().metadata or {}).get(TABLE_KEY) != table.encode():
                return False
    except (OSError, ValueError, UnicodeDecodeError, pa.ArrowException):
        return False
    return True


def schema_file(root: Path, table: str) -> Path:
    """The typed empty file of ``table`` a read of the store at ``root`` uses: always the package's own (rebuilt from
    the migrations in a folder of the reader's cache, see _current_schema_root), never the store's, so a store whose ``_schema`` file is missing,
    corrupt or older than the package reads the same, and reading never writes into the store."""
    return _current_schema_root() / SCHEMA / table / "empty.parquet"


def readable_dirs(root: Path) -> list[str]:
    """The folders a read connection of the store may open: the store and the package's schema folder."""
    return [str(root), str(_current_schema_root())]


def schema_problems(root: Path) -> list[tuple[str, str]]:
    """(path, reason) of each file of the store's ``_schema`` that is missing or not a readable empty table of its
    name (``VERSION`` included). Readers do not need them (``schema_file``); ``collapsewatch check`` reports them and
    ``check --repair`` or the next writer rewrites them (``writer.ensure_schema``). An older but readable
    ``_schema`` is no problem."""
    out: list[tuple[str, str]] = []
    for table in TABLES:
        path = root / SCHEMA / table / "empty.parquet"
        try:
            st = path.stat()
        except OSError:
            out.append((str(path), "missing"))
            continue
        problem, _ = _verdict(str(path), table, st.st_size, st.st_mtime_ns)
        if problem not in (None, "gone"):
            out.append((str(path), problem))
    try:
        (root / SCHEMA / "VERSION").read_text()
    except (OSError, UnicodeDecodeError):
        out.append((str(root / SCHEMA / "VERSION"), "missing"))
    return out


def _template_ok(root: Path, table: str) -> bool:
    """Whether the store's own ``_schema`` file of ``table``, which a glob over every folder also matches, reads
    as an empty table of its name (cached per size and mtime; not reported: ``schema_problems``)."""
    path = root / SCHEMA / table / "empty.parquet"
    try:
        st = path.stat()
    except OSError:
        return True  # a glob matches nothing there
    return _verdict(str(path), table, st.st_size, st.st_mtime_ns)[0] is None


def scan_sql(root: Path, table: str, run: str | None = None) -> tuple[str, bool]:
    """(the scan of ``table`` a view reads, whether it is a snapshot list): a glob while every file is good,
    the list of good files while one is bad or replaced by a merged segment."""
    good, bad, replaced = table_files(root, table, run)
    empty = schema_file(root, table)
    if bad or replaced or is_mirror(root):  # a mirror is read as a listed snapshot (mirror.py)
        return files_scan([p for p, _ in good] + [str(empty)], empty), True
    if run is None and not _template_ok(root, table):  # the glob would match a corrupt _schema file
        return files_scan([p for p, _ in good], empty), True
    if not good and (run is not None or not (root / SCHEMA / table / "empty.parquet").is_file()):
        # a glob matching nothing is refused by DuckDB: a run without rows of the table, or a store without its
        # _schema file of it (lost, or a table added since the store was made: migration 0003's sentinels)
        return files_scan([], empty), False
    pattern = root / run / table / "*.parquet" if run is not None else root / "*" / table / "*.parquet"
    return f"read_parquet(['{_q(pattern)}', '{_q(empty)}'], union_by_name = true)", False


def bad_files(root: Path) -> list[tuple[str, str]]:
    """(path, reason) of every bad segment of the store, over all tables and runs."""
    out: list[tuple[str, str]] = []
    for table in TABLES:
        out += table_files(root, table)[1]
    return sorted(out)


def quarantine(root: Path, files: list[str], where: Location | None = None) -> list[Path]:
    """Move each file to ``<root>/_quarantine/<run>/<table>/<name>`` (and its object, for an object store's
    mirror ``where``); returns the new paths."""
    moved = []
    for f in files:
        # the folder resolved, not the file: a symlinked bad file is moved as the link, never followed out of the store
        rel = (Path(f).parent.resolve() / Path(f).name).relative_to(root.resolve())
        target = root / QUARANTINE / rel
        (where or Location(root)).move(f, target)
        moved.append(target)
    return moved
