"""A restart replaces: when a run resumed from a checkpoint replays steps, the rows its rank wrote before for those
steps (and for every later step of the abandoned branch) leave every table, not only the ``steps`` view.

A ``Monitor(..., resume=True)`` does not know which step it restarts from until its first rows arrive. At its
writer's first flush with rows (``StoreWriter.flush``, on the recorder thread, never the training loop's) the
smallest step among them, S, is the restart step, and ``cut`` rewrites each of the rank's earlier segments that
hold a step ≥ S: the rows with step < S (``events``: the episodes that ended before S) go into a new
``r<rank>-compact-*`` segment that names the old one in its metadata (``REPLACES_KEY``), then the old one is
deleted — the merge protocol: a reader sees the old or the new file, never both counted, and a kill between the two
leaves an input that readers skip and the next compaction deletes. This is the final-branch rule the detectors apply
to step rows (``detectors.final_branch``: a later row at step s' discards every earlier row at steps ≥ s'),
applied to the store's rows once, at the restart, so that every table and view, SQL aggregates included, counts each
step once.

Segments untouched: other ranks', ``offline-r<rank>`` events (``detect --write``), segments whose steps all precede S
(from their footers' statistics). On an object store the rank's segments are found by listing the bucket; only those
holding a step ≥ S are downloaded, rewritten and uploaded (one PUT each, published by itself). Rows written before
this existed, in stores already holding both copies, are read as they are (the ``steps`` view keeps the latest
step row; the other tables both copies).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .location import REPLACES_KEY, Location, published
from .location import writer as writer_location
from .migrations import TABLES
from .tables import arrow_schemas, atomic_write_table, conform

if TYPE_CHECKING:
    from .writer import StoreWriter

STEP_COLUMN = {t: "step" for t in TABLES if t not in ("runs", "events")} | {"events": "step_end"}


def _max_step(meta: pq.FileMetaData, column: str) -> int | None:
    """The largest ``column`` value of a segment from its footer's statistics (None: no rows or no such column)."""
    if meta.num_rows == 0:
        return None
    names = meta.schema.names
    if column not in names:
        return None
    i = names.index(column)
    highs = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(i).statistics
        if stats is None or not stats.has_min_max:
            return 2**63 - 1  # no statistics: read it
        highs.append(int(stats.max))
    return max(highs) if highs else None


def _segments(where: Location, run: str, table: str, rank: int | None) -> list[Path]:
    """The rank's (None: every rank's) segments of ``table`` in this run: the local ones, and for an object store the
    bucket's (their would-be paths in the spool; ``cut`` downloads those it rewrites)."""
    prefix = "r" if rank is None else f"r{rank}-"
    if where.remote is None:
        return sorted((where.local / run / table).glob(f"{prefix}*.parquet"))
    # the published ones only: a flush whose marker never came stays unread, never published by a rewrite
    return [where.local / rel for rel in sorted(published(where.remote.list(run)))
            if rel.startswith(f"{run}/{table}/{prefix}") and rel.endswith(".parquet") and rel.count("/") == 2]


def _footer(where: Location, path: Path) -> pq.FileMetaData:
    if path.exists() or where.remote is None:
        return pq.read_metadata(path)
    with where.remote.fs.open_input_file(where.remote.key(where.rel(path))) as f:
        return pq.ParquetFile(f).metadata  # the footer only: ranged reads


def last_step(store: str | Path, run: str, rank: int) -> int | None:
    """The largest step this rank stored in ``run`` (any table; from segment footers), None when it stored none:
    where a resumed writer that starts over at step 1 would replace the whole run (``integrations.trl`` refuses)."""
    where = writer_location(store)
    highs = [_max_step(_footer(where, path), column) for table, column in STEP_COLUMN.items()
             for path in _segments(where, run, table, rank)]
    return max((h for h in highs if h is not None), default=None)


def max_seq_id(store: str | Path, run: str, stride: int) -> int | None:
    """The largest ``seq_id mod stride`` any rank stored in ``run``'s sequences, None when none: where a resumed writer
    must start numbering so that its new sequences never reuse a stored id (``stride``: the offset an adapter adds to
    a repeated sequence's id, e.g. the TRL tap's ``REPLAY_STRIDE``)."""
    where = writer_location(store)
    highs = []
    for path in _segments(where, run, "sequences", None):
        if not path.exists():
            where.remote.get(where.rel(path), path)
        ids = pq.read_table(path, columns=["seq_id"])["seq_id"].drop_null().to_numpy()
        if ids.size:
            highs.append(int((ids % stride).max()))
    return max(highs, default=None)


def cut(where: Location, run: str, rank: int, step: int) -> list[Path]:
    """Rewrite the rank's segments of ``run`` without rows at steps ≥ ``step`` (module docstring); returns the
    new segments. Raises OSError / ArrowException like any write: the caller counts it and tries at its next flush."""
    import pyarrow.compute as pc

    written = []
    for table, column in STEP_COLUMN.items():
        for path in _segments(where, run, table, rank):
            high = _max_step(_footer(where, path), column)
            if high is None or high < step:  # no rows, or all before the restart
                continue
            if not path.exists():
                where.remote.get(where.rel(path), path)
            data = pq.read_table(path)
            replaces = set(json.loads((data.schema.metadata or {}).get(REPLACES_KEY, b"[]"))) | {path.name}
            data = data.filter(pc.less(data[column], step))
            schema = arrow_schemas()[table]
            data = conform(data, schema).replace_schema_metadata(
                {**(schema.metadata or {}), REPLACES_KEY: json.dumps(sorted(replaces))})
            target = path.parent / f"r{rank}-compact-{uuid.uuid4().hex[:8]}.parquet"
            atomic_write_table(data, target)
            where.push(target)
            where.remove(path)
            written.append(target)
    return written


def before_first_flush(w: StoreWriter, tables: list[str]) -> bool:
    """A resumed writer's first flush with rows: ``cut`` at the smallest step among them; whether the flush may go
    on. A failed cut is counted (``write_errors``) and the rows stay pending for the next flush, which tries again:
    nothing of the new branch is written before the old one is cut, so a cut never touches new rows."""
    import pyarrow.compute as pc  # here, not at the top: readers import this module and need no compute kernels

    steps = [pc.min(t["step"]).as_py() for name in tables if name in STEP_COLUMN and name != "events"
             for t in w._pending[name] if "step" in t.column_names and t.num_rows]
    if not steps:
        return False
    try:
        cut(w.where, w.run, w.rank, int(min(steps)))
    except (OSError, pa.ArrowException) as e:
        w._failed(e if isinstance(e, OSError) else OSError(str(e)))
        return False
    w.resume_cut = False
    return True
