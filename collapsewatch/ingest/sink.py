"""Writes ingested steps as one run of the store.

Every value goes to ``scalars`` under its logged key; a key that means a logged-scalar catalogue metric
(``learning_rate`` → ``lr``, ``LOGGED_SCALARS``) gets a second row under the catalogue's name, which the ``steps``
view pivots; the catalogue's step columns a step's keys fill (``entropy_mean``, ``reward_mean``,
``response_length_mean`` …: :func:`.keys.catalogue_values`) become that step's ``step_metrics`` row — an ingested
run has no probe, so these are its only source. Everything else in ``step_metrics`` is NULL.

A step logged in several rows (TRL's train and eval logs at one step, a live file read in parts) gets one
``step_metrics`` row: values merged with the catalogue's repeat rule (``merge_logged``), written once no later row
can add to it — when a later step has been seen, or at :meth:`RunSink.finish`.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path

from ..catalogue import LOGGED_SCALARS, STEP_METRICS, merge_logged
from ..runlock import rank_has_rows
from ..store.writer import StoreWriter
from .keys import catalogue_values, second_rows
from .maps import MapUse
from .records import IngestError, Step

_LOGGED = {m.name for m in LOGGED_SCALARS}
_STEP_COLUMNS = {m.name for m in STEP_METRICS}


class RunSink:
    """A new run named ``run`` in ``store``, holding what was ingested from ``path`` (format ``fmt``), the user's
    ``maps`` (logged key → catalogue column, checked: :func:`.maps.check_maps`) applied to every step and recorded in
    the run's config (``maps``) beside the file and format."""

    def __init__(self, store: str | os.PathLike, path: Path, run: str, fmt: str,
                 maps: dict[str, str] | None = None) -> None:
        self.run = run
        self.writer = StoreWriter(store, run)
        if rank_has_rows(self.writer.root, run, 0):  # writer.root: the folder, or an object store's local spool
            raise IngestError(f"run {run!r} already exists in {str(store)!r}")
        self.maps = MapUse(dict(maps or {}))
        self.writer.set_run_info(config={"ingested_from": str(path.resolve()), "format": fmt} | (
            {"maps": self.maps.maps} if self.maps.maps else {}))
        self._open: dict[int, tuple[dict[str, float | None], float | None]] = {}  # step → (catalogue values, time)
        self._written: set[int] = set()
        self.steps: set[int] = set()
        self.keys: set[str] = set()
        """Every key logged."""
        self.filled: set[str] = set()
        """The catalogue columns some step's keys gave a value (NULL aside)."""

    def add(self, steps: list[Step], complete: bool = False) -> None:
        """Stage these steps' scalars, and the step_metrics rows of steps before the last one seen — of every step
        seen when the caller knows they are ``complete`` (no later row can add to them)."""
        cols: dict[str, list] = {"run": [], "rank": [], "step": [], "key": [], "value": []}
        for s in steps:
            cat = catalogue_values(s.values, self.maps.maps)
            self.keys.update(s.values)
            self.maps.see(s.step, s.values)
            self.filled.update(k for k, v in cat.items() if v is not None)
            rows = list(s.values.items()) + list(second_rows(s.values, _LOGGED, self.maps.maps).items())
            for key, value in rows:
                for col, v in zip(cols, (self.run, 0, s.step, key, value), strict=True):
                    cols[col].append(v)
            self._merge(s.step, {k: v for k, v in cat.items() if k in _STEP_COLUMNS}, s.wall_time)
            self.steps.add(s.step)
        if cols["step"]:
            self.writer.append("scalars", cols)  # a logged NaN stays NaN (writer.NAN_KEPT)
        if self.steps:
            self._emit(below=max(self.steps) + (1 if complete else 0))

    def _merge(self, step: int, values: dict[str, float | None], wall_time: float | None) -> None:
        if step in self._written:  # a step logged again after its row was written: a second row would replace it
            return
        old, t = self._open.get(step, ({}, None))
        for k, v in values.items():
            old[k] = merge_logged(old.get(k), v) if k in old else v
        self._open[step] = (old, wall_time if t is None else max(t, wall_time or t))

    def _emit(self, below: float) -> None:
        ready = sorted(s for s in self._open if s < below)
        rows = [(s, *self._open.pop(s)) for s in ready if self._open[s][0]]
        for s in ready:
            self._open.pop(s, None)
            self._written.add(s)
        if not rows:
            return
        names = sorted({k for _, values, _ in rows for k in values})
        now = time.time()
        cols: dict[str, list] = {
            "run": [self.run] * len(rows), "rank": [0] * len(rows), "step": [s for s, _, _ in rows],
            "ts": [datetime.fromtimestamp(t if t is not None else now, timezone.utc) for _, _, t in rows]}
        for name in names:
            cols[name] = [values.get(name) for _, values, _ in rows]
        self.writer.append("step_metrics", cols)

    def flush(self, status: str | None = None) -> None:
        self.writer.flush(status)

    def finish(self) -> None:
        """Write the last steps' rows and mark the run finished."""
        self._emit(below=float("inf"))
        self.writer.flush("finished")

    def judged(self, rules: str) -> None:
        """The detectors ran over the finished run under ``rules`` (a digest) and stored their episodes: its run row
        records that digest (``versions.detector_rules``, as a Monitor's does), so readers take the stored episodes —
        none included — as those rules' own (:func:`collapsewatch.judge.stale_reason`)."""
        self.writer.set_run_info(versions={"detector_rules": rules})
        self.writer.flush("finished")
