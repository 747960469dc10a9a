"""Recorder: the background thread between the training loop and the store.

The training thread only enqueues detached copies of the observed tensors; this thread runs the probe,
finalises each step once all its parts have arrived (a step is complete when anything for a later step
arrives, or on flush / close), runs the online detectors on the step row, and flushes segments every
``flush_steps`` steps or ``flush_seconds`` seconds. Exceptions here are logged once and counted; they
never reach the training loop. The queue carries typed messages (``Observe``, ``Log``, ``Flush``, ``Close``),
and its depth in steps is bounded by back-pressure (``Recorder``), so a SIGKILL loses at most the last
``flush_steps + 1`` steps.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .batch import TokenBatch
from .catalogue import (
    LOGGED_SCALARS,
    LOGGED_STANDINS,
    STEP_METRICS,
    TOKEN_METRICS,
    merge_logged,
    scalar_column,
    with_logged,
)
from .detectors.nonfinite import with_first_nonfinite
from .ingest.keys import second_rows
from .probe import ClipSpec
from .series import Snapshot, after_step
from .step_metrics import ObservedPart, compute_step_metrics, observe_part
from .store.writer import StoreWriter

if TYPE_CHECKING:  # imported by the Monitor only when it has sinks (it reads pandas)
    from .collapse_news import CollapseNews

log = logging.getLogger("collapsewatch")

_SECOND_ROWS = frozenset(m.name for m in LOGGED_SCALARS) | frozenset(LOGGED_STANDINS)
"""Catalogue columns a logged key that means one (``learning_rate``, ``reward`` …) is stored a second time under."""


@dataclass(frozen=True)
class Sampling:
    """Which sequences keep per-token rows (sequence and step rows are always kept). The share rules pick the
    candidates; ``token_seqs_per_step`` caps them, so a cluster-scale batch does not multiply the store's size
    (docs/store.md, *Volume*: 2,560 sequences per step at the LLDS settings)."""

    token_every: int = 10
    """Every N-th step (step % N == 0) keeps token rows for all of its sequences (up to the cap)."""
    token_fraction: float = 0.05
    """Other steps keep token rows for this share of sequences, chosen by a hash of (step, seq_id)."""
    token_seqs_per_step: int = 64
    """At most this many sequences of a step keep token rows, over all ranks: each rank keeps at most
    ⌈N / world_size⌉, the candidates with the lowest hash first. 0: no cap."""

    def __post_init__(self) -> None:
        if self.token_seqs_per_step < 0 or not 0.0 <= self.token_fraction <= 1.0:
            raise ValueError(f"token_seqs_per_step must be >= 0 and token_fraction in [0, 1], got "
                             f"{self.token_seqs_per_step} and {self.token_fraction}")

    @staticmethod
    def hash(step: int, seq_ids: np.ndarray) -> np.ndarray:
        """A value in [0, 1) per sequence, fixed by (step, seq_id)."""
        h = (seq_ids.astype(np.uint64) * np.uint64(2654435761) + np.uint64(step * 40503 + 1)) % np.uint64(2**32)
        return h.astype(np.float64) / 2**32

    def keep(self, step: int, seq_ids: np.ndarray) -> np.ndarray:
        """The candidates (before the cap)."""
        if self.token_every > 0 and step % self.token_every == 0:
            return np.ones(len(seq_ids), dtype=bool)
        return self.hash(step, seq_ids) < self.token_fraction

    def expected_seqs(self, n_seqs: int) -> float:
        """Mean number of a step's ``n_seqs`` sequences (all ranks) that keep token rows, over a long run."""
        every = 1 / self.token_every if self.token_every > 0 else 0.0
        cap = self.token_seqs_per_step or float("inf")
        return every * min(n_seqs, cap) + (1 - every) * min(n_seqs * self.token_fraction, cap)

    def rank_cap(self, world_size: int) -> int | None:
        """Sequences one rank may keep per step (None: no cap)."""
        return -(-self.token_seqs_per_step // max(1, world_size)) if self.token_seqs_per_step else None


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def step_row(parts: list[ObservedPart], n_seqs: int) -> dict[str, Any]:
    """The step's metrics row over its non-empty batches; ``n_seqs`` counts every sequence observed, those of
    T = 0 batches included. A step that saw only empty batches (B = 0 or T = 0) still gets its row: the counts, and
    NULL for every metric (there is no token to measure)."""
    measured = [p for p in parts if p.tok["mask"].numel()]  # an empty batch adds nothing, and lacks every field
    metrics = compute_step_metrics(measured) if measured else {m.name: None for m in STEP_METRICS}
    return metrics | {"n_seqs": n_seqs, "n_model_tokens": metrics["n_model_tokens"] or 0}


@dataclass(frozen=True)
class Observe:
    """One observed (micro-)batch of ``step``: a detached copy owned by the recorder."""

    step: int
    batch: TokenBatch
    clip: ClipSpec


@dataclass(frozen=True)
class Log:
    """Step scalars of ``step`` (NULL where None)."""

    step: int
    scalars: dict[str, float | None]


@dataclass(frozen=True)
class SentinelRows:
    """Per-sentinel scores of ``step`` (columns ``sentinels.SENTINEL_COLUMNS``): rows of the ``sentinels`` table."""

    step: int
    rows: dict[str, list]


@dataclass(frozen=True)
class Flush:
    """Finish the open step and write everything pending; ``done`` is set once written."""

    done: threading.Event


@dataclass(frozen=True)
class Close:
    """As ``Flush``, with the run's final status, and the thread ends."""

    done: threading.Event
    status: str


Message = Observe | Log | SentinelRows | Flush | Close


class Recorder(threading.Thread):
    """The background thread (module docstring). Back-pressure: ``put`` of the first message of a new step waits
    while more than ``flush_steps + 1`` steps sent to the recorder are not yet flushed, so a SIGKILL loses at most
    the last ``flush_steps + 1`` steps (docs/store.md); with ``on_full="drop"`` it never waits."""

    def __init__(self, writer: StoreWriter, sampling: Sampling, *, queue_size: int, on_full: str,
                 flush_steps: int, flush_seconds: float, detectors: Any | None,
                 collapse_news: CollapseNews | None = None) -> None:
        super().__init__(name="collapsewatch-recorder", daemon=True)
        self.writer, self.sampling, self.on_full = writer, sampling, on_full
        self.flush_steps, self.flush_seconds = flush_steps, flush_seconds
        self.max_unflushed_steps = flush_steps + 1
        self.detectors = detectors
        self.collapse_news = collapse_news  # each finished step's reward, checked after each flush (collapse_news.py)
        self.q: queue.Queue[Message] = queue.Queue(maxsize=queue_size)
        self.events_out: queue.SimpleQueue = queue.SimpleQueue()
        # step bookkeeping of the training thread: a "step" is a run of messages with the same step number
        self._sent_step: int | None = None
        self._sent_steps = 0
        # ... and of this thread
        self._step: int | None = None
        self._parts: list[ObservedPart] = []
        self._observed_seqs = 0  # sequences of the open step, empty batches included
        self._token_seqs = 0
        self._scalars: dict[str, float | None] = {}
        self._seen_step: int | None = None
        self._seen_steps = 0
        self._flushed_steps = 0  # steps (in the training thread's count) whose rows a flush has written
        self._flushed = threading.Condition()
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()
        self._error_logged = False
        self.latest: dict[str, Any] = {}  # the last finalised step's metrics (for progress displays)
        self.series: Snapshot | None = None  # the collapsewatch/… series after the last finalised step (series.py)

    # -- called from the training thread ---------------------------------------------------------
    def put(self, msg: Observe | Log | SentinelRows) -> None:
        if msg.step != self._sent_step:
            self._sent_step, self._sent_steps = msg.step, self._sent_steps + 1
            if self.on_full == "block":
                self._wait_for_flush(self._sent_steps - self.max_unflushed_steps)
        if self.on_full == "drop":
            try:
                self.q.put_nowait(msg)
            except queue.Full:
                self.writer.dropped_batches += 1
        else:
            self.q.put(msg)

    def _wait_for_flush(self, steps: int) -> None:
        """Block until the first ``steps`` steps sent are flushed (back-pressure), or the thread is gone."""
        if self._flushed_steps >= steps:  # the usual case: no lock taken
            return
        with self._flushed:
            while self._flushed_steps < steps and self.is_alive():
                self._flushed.wait(timeout=1.0)

    def call(self, kind: type[Flush] | type[Close], *args: Any) -> None:
        """Enqueue a control message and wait until the thread has handled it."""
        done = threading.Event()
        self.q.put(kind(done, *args))
        while not done.wait(timeout=1.0):
            if not self.is_alive():
                return

    # -- the thread ---------------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            try:
                msg = self.q.get(timeout=self.flush_seconds)
            except queue.Empty:
                self._safe(self._flush)
                continue
            if isinstance(msg, (Observe, Log, SentinelRows)):
                self._advance(msg.step)
                handler = {Observe: self._observe, Log: self._log, SentinelRows: self._sentinels}[type(msg)]
                self._safe(handler, msg)
            else:
                self._safe(self._finalize)
                self._safe(self._flush, msg.status if isinstance(msg, Close) else None)
                msg.done.set()
                if isinstance(msg, Close):
                    return
            if time.monotonic() - self._last_flush > self.flush_seconds or self._steps_since_flush >= self.flush_steps:
                self._safe(self._flush)

    def _safe(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception:  # the monitor must never take the training run down
            self.writer.probe_errors += 1
            if not self._error_logged:
                self._error_logged = True
                log.exception("collapsewatch: failed to process an observed batch; training continues "
                              "and further failures are counted in runs.probe_errors")

    def _advance(self, step: int) -> None:
        """Count the message's step as ``put`` does, and finish the open step when a new one begins. A failure to
        finish it costs that step's row only: it is caught here, so the new step still opens and its batch is
        recorded."""
        if step != self._seen_step:
            self._seen_step, self._seen_steps = step, self._seen_steps + 1
        if self._step is not None and step != self._step:
            self._safe(self._finalize)
        if step != self._step:
            self._token_seqs = 0  # sequences of this step that kept token rows (Sampling.token_seqs_per_step)
        self._step = step

    def _observe(self, msg: Observe) -> None:
        b = msg.batch
        B = b.logp.shape[0]
        seq_ids = b.seq_ids if b.seq_ids is not None else torch.arange(self._observed_seqs, self._observed_seqs + B)
        self._observed_seqs += B
        part = observe_part(b, msg.clip, seq_ids)
        self._parts.append(part)
        self._write_sequences(msg.step, b, part)
        self._write_tokens(msg.step, b, part)

    def _log(self, msg: Log) -> None:
        scalars = msg.scalars | second_rows(msg.scalars, _SECOND_ROWS)  # `reward` → also `reward_mean`
        keys = list(scalars)
        vals = [scalars[k] for k in keys]
        for k, v in zip(keys, vals, strict=True):  # logged twice in a step: the steps view's rule
            name = scalar_column(k)
            self._scalars[name] = merge_logged(self._scalars.get(name), v)
        w = self.writer
        self.writer.append("scalars", {"run": [w.run] * len(keys), "rank": [w.rank] * len(keys),
                                       "step": [msg.step] * len(keys), "key": keys, "value": vals})

    def _sentinels(self, msg: SentinelRows) -> None:
        n, w = len(msg.rows["sentinel"]), self.writer
        self.writer.append("sentinels", {"run": [w.run] * n, "rank": [w.rank] * n, "step": [msg.step] * n,
                                         **msg.rows})

    def _write_sequences(self, step: int, b: TokenBatch, part: ObservedPart) -> None:
        B = part.tok["mask"].shape[0]
        cols: dict[str, Any] = {k: _np(v) for k, v in part.seq.items()}
        cols.update(run=[self.writer.run] * B, rank=np.full(B, self.writer.rank), step=np.full(B, step),
                    seq_id=_np(part.seq_ids))
        if b.group_ids is not None:
            cols["group_id"] = _np(b.group_ids)
        self.writer.append("sequences", cols)

    def _capped(self, step: int, seq_ids: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """``keep`` within what is left of the step's cap (``Sampling.token_seqs_per_step``), lowest hash first."""
        cap = self.sampling.rank_cap(self.writer.world_size)
        if cap is None:
            return keep
        room = max(0, cap - self._token_seqs)
        if keep.sum() > room:
            idx = np.flatnonzero(keep)
            chosen = idx[np.argsort(Sampling.hash(step, seq_ids[idx]), kind="stable")[:room]]
            keep = np.zeros_like(keep)
            keep[chosen] = True
        self._token_seqs += int(keep.sum())
        return keep

    def _write_tokens(self, step: int, b: TokenBatch, part: ObservedPart) -> None:
        seq_ids = _np(part.seq_ids)
        keep_seq = self._capped(step, seq_ids, self.sampling.keep(step, seq_ids))  # (B,)
        if not keep_seq.any():
            return
        raw = _np(part.tok["raw_mask"])  # (B, T)
        keep = raw.copy()
        if b.turn_ids is not None:
            keep |= _np(b.turn_ids) >= 0  # observation tokens are kept for display (mask 0)
        keep &= keep_seq[:, None]
        rows, pos = np.nonzero(keep)
        cols: dict[str, Any] = {
            "run": [self.writer.run] * len(rows), "rank": np.full(len(rows), self.writer.rank),
            "step": np.full(len(rows), step), "seq_id": seq_ids[rows], "pos": pos, "mask": raw[rows, pos],
        }
        extra = {"token_id": b.token_ids, "turn_id": b.turn_ids, "advantage": part.tok.get("advantage"),
                 "logp_rollout": b.logp_rollout}
        for m in TOKEN_METRICS:  # the catalogue's per-token metrics
            extra.setdefault(m.name, part.tok.get(m.name))
        for name, t in extra.items():
            if t is not None:
                cols[name] = _np(t)[rows, pos]
        self.writer.append("tokens", cols)

    def _finalize(self) -> None:
        if self._step is None:
            return
        step, parts, scalars, n_seqs = self._step, self._parts, self._scalars, self._observed_seqs
        self._step, self._parts, self._scalars, self._observed_seqs = None, [], {}, 0
        self._steps_since_flush += 1
        metrics = step_row(parts, n_seqs) if parts else {}
        self.latest = dict(metrics, step=step)
        if parts:
            row = {"run": [self.writer.run], "rank": [self.writer.rank], "step": [step],
                   "ts": [datetime.now(timezone.utc)]}
            row.update({k: [v] for k, v in metrics.items()})
            self.writer.append("step_metrics", row)
        logged = {m.name: scalars.get(m.name) for m in LOGGED_SCALARS}
        # the same columns the offline `steps` view gives the detectors: a logged reward where none was observed
        row = with_first_nonfinite(dict(with_logged(metrics, scalars), **logged, step=step))
        events = self._detect(row) if self.detectors is not None else None
        if self.collapse_news is not None:
            self.collapse_news.add(step, row.get("reward_mean"))
        # published whole, after the step's events: a reader on the training thread needs no lock
        self.series = after_step(self.series, step, row, None if events is None else [e.severity for e in events])

    def _detect(self, row: dict[str, Any]) -> list[Any]:
        from .detectors.events import events_frame

        events = self.detectors.update(row)
        if events:
            self.writer.append("events", events_frame(self.writer.run, self.writer.rank, events, "online",
                                                         self.detectors.rules))
            for ev in events:
                self.events_out.put(ev)
        return events

    def _flush(self, status: str | None = None) -> None:
        try:
            self.writer.flush(status)
            if self.collapse_news is not None:  # the rows it reads are written now
                self.collapse_news.check()
        finally:
            # every step before the open one is finalised, so this flush wrote its rows; a failed write keeps them
            # pending for the next try and still counts here: back-pressure must not stall training on a full disk
            flushed = self._seen_steps - (self._step is not None)
            with self._flushed:
                self._flushed_steps = flushed
                self._flushed.notify_all()
            self._steps_since_flush = 0
            self._last_flush = time.monotonic()

