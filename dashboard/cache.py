"""Server-side caches over a run's segments, so that a poll or a drill-down costs the same at step 100 and
at step 100,000 (the dashboard's own; they index the store's segment files).

A store's segments are immutable Parquet files with unique names, replaced only by compaction (new
names, old ones deleted). So:

* ``SegmentIndex`` reads each segment's step range once, from its footer;
* ``StepHistory`` keeps a run's step rows; a refresh re-reads only the segments that hold steps at or after
  its *frontier* (the last step whose probe row has arrived) plus new segments: one or two files;
* ``Partials`` keeps results of additive queries (token step summaries, heatmap sums) per batch of files
  and computes only batches not seen before.

A segment that vanishes (compaction) drops whatever was computed from it, and it is read again in its
merged form; one that vanishes *during* a read makes the cache list the folder again and read again
(never the stale list twice).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd

from collapsewatch.store import queries, segments
from collapsewatch.store.queries import Store
from collapsewatch.store.views import EPISODE_KEY, EPISODE_ORDER

T = TypeVar("T")


def complete_rows(df: pd.DataFrame, running: bool) -> pd.DataFrame:
    """The rows a live view may draw now.

    The recorder writes a step's probe row when the next step starts, while the trainer's scalars for the
    current step may already be on disk. A running run's rows after its last probe row are held back
    (they come with a later poll); a run without any probe rows (scalars only) shows everything."""
    if not running or df.empty or "has_metrics" not in df.columns or not df["has_metrics"].any():
        return df
    last = df.loc[df["has_metrics"].astype(bool), "step"].max()
    return df[df["step"] <= last]


def _relisting(store: Store, read: Callable[[], T]) -> T:
    """``read()`` (which lists the folder first); when a file it listed vanished under it (compaction), run it
    again: a fresh listing, never the stale list twice, for as long as the store keeps changing
    (``segments.read_until_stable``)."""
    return segments.read_until_stable(store.root, read)


Key = tuple[str, int]  # (segment path, size)


class SegmentIndex:
    """Step range of each segment of one run's table (from Parquet footers, once per segment)."""

    def __init__(self, run: str, table: str) -> None:
        self.run, self.table = run, table
        self.ranges: dict[Key, tuple[int, int]] = {}

    def update(self, store: Store) -> bool:
        """Re-list the folder; True when a segment seen before has vanished (compaction)."""
        current = set(queries.segment_files(store, self.run, self.table))
        vanished = any(k not in current for k in self.ranges)
        self.ranges = {k: v for k, v in self.ranges.items() if k in current}
        unknown = [k for k in sorted(current) if k not in self.ranges]
        if unknown:
            sizes = dict(unknown)
            found = queries.segment_steps(store, [p for p, _ in unknown], relist=False)
            for r in found.itertuples():
                self.ranges[(r.file, sizes[r.file])] = (int(r.min_step), int(r.max_step))
            for k in unknown:  # a segment without rows has no statistics: never holds a step
                self.ranges.setdefault(k, (-1, -2))
        return vanished

    def keys(self) -> set[Key]:
        return set(self.ranges)

    def holding(self, step: int) -> list[str]:
        return sorted(p for (p, _), (lo, hi) in self.ranges.items() if lo <= step <= hi)

    def from_step(self, step: int) -> list[str]:
        return sorted(p for (p, _), (lo, hi) in self.ranges.items() if hi >= step)


class StepHistory:
    """The step rows (``columns``) of one rank of a run, kept current by re-reading only its frontier."""

    def __init__(self, run: str, rank: int, columns: tuple[str, ...]) -> None:
        self.run, self.rank, self.columns = run, rank, columns
        self.index = {t: SegmentIndex(run, t) for t in ("step_metrics", "scalars")}
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.rows = pd.DataFrame()
        self.frontier = 0          # rows with step < frontier are final
        self.read_key: Any = None  # the segments read last time; the same set again needs no read

    def rows_for(self, store: Store, running: bool) -> pd.DataFrame:
        """All complete rows of the run now (see ``complete_rows``)."""
        with self.lock:
            return _relisting(store, lambda: self._refresh(store, running))

    def _refresh(self, store: Store, running: bool) -> pd.DataFrame:
        if any([ix.update(store) for ix in self.index.values()]):
            self._reset()
        files = self._frontier_files()
        if self._key(files) != self.read_key:
            fresh = queries.step_rows(store, self.run, self.columns, after=self.frontier - 1, rank=self.rank,
                                      files=files)
            kept = self.rows[self.rows["step"] < self.frontier] if len(self.rows) else self.rows
            self.rows = pd.concat([kept, fresh], ignore_index=True) if len(kept) else fresh
            probed = self.rows.loc[self.rows["has_metrics"].astype(bool), "step"]
            steps = probed if len(probed) else self.rows["step"]  # a run that only logs scalars
            # the frontier step itself is re-read when new segments come (its scalars may be late)
            self.frontier = int(steps.max()) if len(steps) else self.frontier
            self.read_key = self._key(self._frontier_files())
        return complete_rows(self.rows, running)

    def _frontier_files(self) -> dict[str, list[str]]:
        return {t: ix.from_step(self.frontier) for t, ix in self.index.items()}

    @staticmethod
    def _key(files: dict[str, list[str]]) -> tuple:
        return tuple(tuple(f) for f in files.values())


class Partials:
    """Results of an additive query, one per batch of segments; only batches never seen are computed."""

    def __init__(self) -> None:
        self.batches: dict[frozenset[Key], pd.DataFrame] = {}

    def get(self, keys: set[Key], compute: Callable[[list[str]], pd.DataFrame]) -> list[pd.DataFrame]:
        self.batches = {b: df for b, df in self.batches.items() if b <= keys}
        covered = frozenset().union(*self.batches) if self.batches else frozenset()
        missing = sorted(keys - covered)
        if missing:
            self.batches[frozenset(missing)] = compute([p for p, _ in missing])
        return list(self.batches.values())


class TokenIndex:
    """Token rows of one run: which segments hold a step, the steps that kept tokens, heatmap sums."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.tokens = SegmentIndex(run, "tokens")
        self.sequences = SegmentIndex(run, "sequences")
        self.lock = threading.Lock()
        self.step_parts = Partials()
        self.heat_parts: dict[tuple[str, int], Partials] = {}

    def steps(self, store: Store) -> pd.DataFrame:
        """step, n_seqs, max_pos of every step that kept token rows."""
        def read() -> list[pd.DataFrame]:
            self.tokens.update(store)
            return self.step_parts.get(self.tokens.keys(), lambda f: queries.token_steps(store, self.run, files=f))

        with self.lock:
            parts = _relisting(store, read)
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if df.empty:  # a run without token rows (yet)
            return pd.DataFrame({"step": [], "n_seqs": [], "max_pos": []})
        return df.groupby("step", as_index=False).agg(n_seqs=("n_seqs", "sum"), max_pos=("max_pos", "max"))

    def files_for(self, store: Store, step: int) -> dict[str, list[str]]:
        def read() -> dict[str, list[str]]:
            self.tokens.update(store)
            self.sequences.update(store)
            return {"tokens": self.tokens.holding(step), "sequences": self.sequences.holding(step)}

        with self.lock:
            return _relisting(store, read)

    def heatmap(self, store: Store, metric: str, step_bin: int, pos_bin: int, base_pos_bin: int) -> pd.DataFrame:
        """Step × position grid: per-step sums at ``base_pos_bin`` positions, cached per batch, re-binned."""
        def read() -> list[pd.DataFrame]:
            self.tokens.update(store)
            partials = self.heat_parts.setdefault((metric, base_pos_bin), Partials())
            return partials.get(self.tokens.keys(), lambda f: queries.token_heatmap(
                store, self.run, metric, step_bin=1, pos_bin=base_pos_bin, files=f))

        with self.lock:
            parts = _relisting(store, read)
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if df.empty:  # a run without token rows (yet)
            return pd.DataFrame({"step": [], "pos": [], "value": [], "n": []})
        df = df.assign(step=(df["step"] // step_bin) * step_bin, pos=(df["pos"] // pos_bin) * pos_bin)
        g = df.groupby(["step", "pos"], as_index=False).agg(total=("total", "sum"), n=("n", "sum"))
        g["value"] = queries.heatmap_value(metric, g["total"], g["n"])
        return g


class EventLog:
    """Detector episodes of one run: each new event segment is read once and merged into the episodes
    seen so far; the latest extent of each episode (detector, phase, step_start) wins, as in the store's
    view. A vanished segment (compaction) starts the merge over."""

    KEY = [c for c in EPISODE_KEY if c != "run"]  # one run's episodes

    def __init__(self, run: str) -> None:
        self.run = run
        self.lock = threading.Lock()
        self.seen: set[Key] = set()
        self.merged: pd.DataFrame | None = None

    def events(self, store: Store) -> pd.DataFrame:
        with self.lock:
            return _relisting(store, lambda: self._refresh(store))

    def _refresh(self, store: Store) -> pd.DataFrame:
        keys = set(queries.segment_files(store, self.run, "events"))
        if not self.seen <= keys:
            self.seen, self.merged = set(), None
        new = sorted(keys - self.seen)
        if new or self.merged is None:
            fresh = queries.run_events(store, self.run, files=[p for p, _ in new])
            both = fresh if self.merged is None else pd.concat([self.merged, fresh], ignore_index=True)
            # the store's episode rule (views.EPISODE_KEY / EPISODE_ORDER) on the columns the rows carry
            order = [(c, asc) for c, asc in EPISODE_ORDER if c in both.columns]
            both = both.sort_values([c for c, _ in order], ascending=[a for _, a in order], kind="stable")
            both = both.drop_duplicates(self.KEY)
            self.merged = both.sort_values(["step_start", "detector", "phase"], kind="stable").reset_index(drop=True)
            self.seen |= set(new)
        return self.merged


_lock = threading.Lock()
_entries: OrderedDict[tuple, Any] = OrderedDict()
MAX_RUNS = 128  # cached objects (step histories, episode logs, token indexes): a compare of 50 runs holds 100


def _entry(key: tuple, make: Callable[[], Any]) -> Any:
    with _lock:
        if key not in _entries:
            _entries[key] = make()
        _entries.move_to_end(key)
        while len(_entries) > MAX_RUNS:
            _entries.popitem(last=False)
        return _entries[key]


def step_history(store: Store, run: str, rank: int, columns: tuple[str, ...]) -> StepHistory:
    return _entry(("steps", str(store.root), run, rank, columns), lambda: StepHistory(run, rank, columns))


def event_log(store: Store, run: str) -> EventLog:
    return _entry(("events", str(store.root), run), lambda: EventLog(run))


def token_index(store: Store, run: str) -> TokenIndex:
    return _entry(("tokens", str(store.root), run), lambda: TokenIndex(run))


def clear() -> None:
    with _lock:
        _entries.clear()
