"""The writer's side of the publish rule (``location.py``): a rank's flushes are uploaded and published in order, a
flush's marker after all of its segments, and an endpoint that failed is not tried again for ``retry_s`` seconds.

Why the pause: uploads run on the recorder thread, and the trainer waits for it when it falls more than
``flush_steps + 1`` steps behind (docs/store.md). An endpoint that refuses costs a few seconds per try, one that hangs
up to the request timeout times the SDK's retries; trying at every flush would let a dead endpoint slow training.
Meanwhile flushes only go to the local spool (fast); the next try publishes them all. A final flush (a status
change: finished, crashed) always tries. A folder store publishes at the rename: every flush at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from .location import FLUSH_SEGMENT, Location, marker_rel

Staged = list[tuple[str, Path]]  # (table, spooled segment) of one flush


class Publisher:
    """Flushes written to the spool and not yet published, and the markers still needed (object stores)."""

    def __init__(self, where: Location, run: str, retry_s: float = 30.0) -> None:
        self.where, self.run, self.retry_s = where, run, retry_s
        self._outbox: list[tuple[Staged, set[Path]]] = []  # (a flush's segments, those uploaded so far)
        self._unmerged: dict[str, int] = {}  # flush marker -> its segments not yet merged away
        self._retry_at = float("-inf")

    def unpublished(self) -> int:
        return len(self._outbox)

    def _ready(self, force: bool) -> bool:
        return self.where.remote is None or force or time.monotonic() >= self._retry_at

    def _failed(self, e: BaseException) -> OSError:
        self._retry_at = time.monotonic() + self.retry_s
        return e if isinstance(e, OSError) else OSError(str(e))

    def publish(self, staged: Staged, force: bool = False) -> tuple[Staged, OSError | None]:
        """Queue one flush's segments (may be empty), then upload and publish queued flushes in order while the
        endpoint answers; returns (the segments published now, the error that stopped it or None)."""
        if staged:
            self._outbox.append((staged, set()))
        out: Staged = []
        if not self._ready(force):
            return out, None
        while self._outbox:
            segs, done = self._outbox[0]
            try:
                for _, path in segs:
                    if path not in done:
                        self.where.push(path)
                        done.add(path)
                self.where.publish(self.run, [f"{table}/{p.name}" for table, p in segs])
            except (OSError, pa.ArrowException) as e:
                return out, self._failed(e)
            self._outbox.pop(0)
            if self.where.remote is not None:
                self._unmerged[marker_rel(self.run, segs[0][1].name)] = len(segs)
            out += segs
        return out, None

    def push(self, path: Path, force: bool = False) -> None:
        """Upload one self-published file (the run row) unless the endpoint is in its pause; raises OSError."""
        if not self._ready(force):
            return
        try:
            self.where.push(path)
        except (OSError, pa.ArrowException) as e:
            raise self._failed(e) from e

    def retire(self, merged: list[Path]) -> None:
        """Delete the marker of each flush whose segments are all merged now (markers do not pile up; one left by a
        kill here is swept by ``compact``). Raises OSError."""
        for f in merged:
            key = marker_rel(self.run, f.name) if FLUSH_SEGMENT.match(f.name) else None
            if key not in self._unmerged:
                continue
            self._unmerged[key] -= 1
            if self._unmerged[key] == 0:
                del self._unmerged[key]
                self.where.retire(self.run, f.name)
