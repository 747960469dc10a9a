"""Compaction: merge a run's small segments (per rank, per table) and export the run to one .duckdb file.

Merging writes the new segment first (atomically; on an object store one PUT of the merged segment, published by
itself) and deletes the old ones after (their flush markers last), so a reader sees each
row at least once and at most ... twice only inside that instant: the views deduplicate step rows by
(run, rank, step), and the query layer retries a query whose file vanished under it.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import duckdb

from . import location, mirror
from .location import Location
from .migrations import TABLES, migrate
from .segments import table_files
from .views import view_sql
from .writer import check_run_name, merge_segments

SEGMENT = re.compile(r"^r(\d+)-.*\.parquet$")


def compact_run(store: str | os.PathLike | Location, run: str, rank: int | None = None,
                export: bool | None = None) -> int:
    """Merge segments of ``run`` (one rank, or all); export ``<run>/<run>.duckdb``. Returns files merged.

    ``store`` is a folder, a URL (read through its mirror, synced here) or a ``Location``: a writer passes its
    own, whose spool holds only its rank's segments of an object store, so it merges those and exports nothing
    (``collapsewatch compact URL`` exports the whole run)."""
    where = store if isinstance(store, Location) else mirror.reader(store)
    root = where.local
    check_run_name(run)
    if export is None:
        export = rank in (None, 0) and (where.remote is None or where.mirror)
    merged = 0
    for table in TABLES:
        if table == "runs":
            continue
        by_rank: dict[int, list[Path]] = {}
        good, _, replaced = table_files(root, table, run)  # bad segments are skipped (and left in place)
        for path in replaced:  # inputs of a merge killed before its deletes: their rows are in the merged one
            m = SEGMENT.match(Path(path).name)
            if m and (rank is None or int(m.group(1)) == rank):
                where.remove(path)
        for path, _ in good:
            f = Path(path)
            m = SEGMENT.match(f.name)
            if m and (rank is None or int(m.group(1)) == rank):
                by_rank.setdefault(int(m.group(1)), []).append(f)
        for r, files in by_rank.items():
            if len(files) < 2:
                continue
            merge_segments(table, files, r, where)
            merged += len(files)
    if where.remote is not None:  # markers of flushes whose segments are all merged now
        for rel in location.unmarked_markers(where.remote.list(f"{run}/"), run, rank):
            where.remote.delete(rel)
    if export:
        where.push(export_duckdb(root, run))
    return merged


def export_duckdb(store: str | os.PathLike, run: str) -> Path:
    """Write ``<run>/<run>.duckdb``: the migrated tables holding this run's rows, plus a ``steps`` view."""
    root = Path(store).resolve()
    target = root / run / f"{run}.duckdb"
    tmp = root / run / f".{run}.{uuid.uuid4().hex[:8]}.duckdb.tmp"
    sql = view_sql(root, run)
    con = duckdb.connect(str(tmp))
    try:
        migrate(con)
        sources = {"runs": sql["run_ranks"], "step_metrics": sql["step_metrics"], "scalars": sql["scalars"],
                   "sequences": sql["sequences"], "tokens": sql["tokens"], "events": sql["events"],
                   "sentinels": sql["sentinels"]}
        for table, select in sources.items():
            cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
            names = ", ".join(cols)
            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM ({select})")
        con.execute(f"CREATE VIEW steps AS {view_sql(root, run, sources={t: t for t in TABLES})['steps']}")
        con.close()
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
        wal = Path(str(tmp) + ".wal")
        if wal.exists():
            wal.unlink()
    return target


STALE_TMP_S = 600.0
"""A hidden ``.tmp`` file older than this was left by a killed writer or export (a live one is seconds old)."""


class StoreNotWritableError(PermissionError):
    """Compaction needs to write the store (a read-only mount, a copy without write permission)."""


def compact_store(store: str | os.PathLike) -> list[str]:
    """Compact every run of a store that is not running, and remove the temporary files of killed writers
    and exports (segment ``.tmp`` files, ``.<run>.*.duckdb.tmp``). Returns the runs compacted."""
    from .opening import open_location
    from .views import connect

    where = open_location(store)  # not a store: said of the folder or URL as given, not of a URL's mirror
    con = connect(where.local)
    runs = [r[0] for r in con.execute("SELECT run FROM runs WHERE status <> 'running' ORDER BY run").fetchall()]
    con.close()
    for run in runs:
        try:
            compact_run(where, run)
            _remove_stale_tmp(where.local / run)
        except (OSError, duckdb.IOException) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise StoreNotWritableError(f"cannot compact run {run!r}: the store {str(store)!r} is not writable "
                                        f"({first})") from e
    return runs


def _remove_stale_tmp(run_dir: Path) -> None:
    now = time.time()
    for tmp in [*run_dir.glob("*/.*.tmp"), *run_dir.glob(".*.duckdb.tmp*")]:
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except FileNotFoundError:
            pass
