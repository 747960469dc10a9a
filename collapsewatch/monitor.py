"""Monitor: the object a training loop holds (one per rank).

    with Monitor("runs/", run="exp1", config=cfg) as mon:
        mon.observe(TokenBatch(...), step=step)       # after each forward of a (micro-)batch
        mon.log(step, {"grad_norm": g, "lr": lr})      # any step scalars

``observe`` validates shapes, copies the tensors (detached, on their device; see ``snapshot``) and enqueues
them; the probe, the step metrics, the online detectors and the store writes all run on the recorder thread.
A Monitor claims its (run, rank) and refuses a run name already used unless ``resume=True`` (``runlock``).
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .batch import TokenBatch, from_numpy
from .probe import ClipSpec
from .recorder import Close, Flush, Log, Observe, Recorder, Sampling, SentinelRows
from .runlock import RunLock, refuse_reuse
from .sentinels import SentinelScores
from .series import Snapshot
from .sinks import Sink, Sinks, run_verdict
from .store.writer import StoreWriter, check_run_name

if TYPE_CHECKING:  # imported when a Monitor has sinks (it reads pandas)
    from .collapse_news import CollapseNews

log = logging.getLogger("collapsewatch")


def _rank_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for pkg in ("collapsewatch", "transformers", "trl", "duckdb"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


_WIDEN = (torch.float16, torch.bfloat16)
MAX_STEP = 2**63 - 1  # steps are BIGINT in the store


def check_step(step: object, call: str) -> int:
    """``step`` as an int once it is one: a Python or numpy integer, or a one-element integer tensor. A bool, a
    float (even 3.0), a string or a step beyond BIGINT raises TypeError / ValueError here, at the call, not on the
    recorder thread, where 2.5 would be truncated to 2 or the step lost unseen."""
    if isinstance(step, torch.Tensor) and step.numel() == 1 and not step.is_floating_point() \
            and not step.is_complex() and step.dtype != torch.bool:
        step = step.item()
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"{call}: step must be an integer, got {type(step).__name__} {step!r}")
    if not 0 <= int(step) <= MAX_STEP:
        raise ValueError(f"{call}: step must be between 0 and 2**63 - 1, got {int(step)}")
    return int(step)


def snapshot(batch: TokenBatch) -> TokenBatch:
    """The copy the recorder keeps: every field detached and copied on the batch's device (``logp``'s). 16-bit floats
    become float32 — numpy has no bfloat16, and a 16-bit copy would cost its rows later — in the same one kernel the
    copy needs anyway (no device sync); numpy arrays become tensors; a list or tuple is refused naming the field;
    other values (None, flags such as ``on_policy``) are kept for TokenBatch's own validator."""
    device = batch.logp.device
    out: dict[str, Any] = {}
    for f in fields(batch):
        v = getattr(batch, f.name)
        if isinstance(v, np.ndarray):  # set after the batch was built (TokenBatch converts its own)
            v = from_numpy(f"observe: TokenBatch.{f.name}", v)
        elif isinstance(v, (list, tuple)):
            raise TypeError(f"observe: TokenBatch.{f.name} must be a torch.Tensor (or numpy array), got "
                            f"{type(v).__name__}")
        if not isinstance(v, torch.Tensor):
            out[f.name] = v
            continue
        if v.is_complex():  # the probe would read its real part only
            raise TypeError(f"observe: TokenBatch.{f.name} is a complex tensor ({v.dtype}); pass real values")
        v = v.detach()
        # a cast or a cross-device move copies already; only a tensor `to` returns unchanged needs a clone
        w = v.to(device, torch.float32 if v.dtype in _WIDEN else v.dtype, non_blocking=device.type != "cpu")
        out[f.name] = w.clone() if w is v else w
    return TokenBatch(**out)  # validates the shapes again: fields may have been replaced after construction


def _default_detectors(enabled: bool | Any) -> Any | None:
    if enabled is False or enabled is None:
        return None
    from .detectors import DetectorConfig, DetectorSuite

    return DetectorSuite(enabled if isinstance(enabled, DetectorConfig) else DetectorConfig())


class Monitor:
    """Watches one rank of one run and writes what it sees into a store folder.

    Args:
        store: store folder (created if missing).
        run: run name (letters, digits, ``._-``); several ranks share it.
        config: the run's configuration, stored as JSON in ``runs.config``.
        objective: objective name shown in the runs table.
        clip: clip settings used for clip flags (``eps_low``, ``eps_high``, ``dual_clip``, success threshold).
        sampling: which sequences keep per-token rows.
        flush_steps / flush_seconds: write a segment after this many steps or seconds, whichever first. A SIGKILL
            loses at most the last ``flush_steps + 1`` steps: with ``on_full="block"`` the first ``observe`` /
            ``log`` of a step waits while the recorder is further behind (docs/store.md).
        compact_every: merge every this many segments of a table into one while the run goes on (0: only at
            ``close``), so long runs keep queries fast (``StoreWriter``).
        queue_size / on_full: bounded queue to the recorder; ``"block"`` waits, ``"drop"`` drops and counts.
        detectors: True (default config), False, or a ``DetectorConfig``.
        on_event: called on the training thread (inside ``observe`` / ``log`` / ``flush``) for each new or
            extended detector event.
        resume: continue a run this rank already wrote (after a restart from a checkpoint); without it an
            existing run name is refused (``RunExistsError``) instead of merging two runs.
        sinks: trackers and webhooks that get each episode (once per severity it reaches) and the run's verdict at
            ``close``; a reward collapse (``Sink.collapse``, the message a webhook posts) once, when the flushed
            rows first show it (``collapse_news.py``) — :class:`collapsewatch.sinks.Sink` objects or ``--to``
            strings (``"tensorboard:DIR"``, ``"wandb"``, ``"slack:https://…"``; docs/trackers.md). Rank 0 only; a
            sink that errors is logged once and never stops training; a missing library is refused here, in one line.

    Raises ``RunInUseError`` when another live Monitor writes the same run and rank.
    """

    def __init__(self, store: str | os.PathLike, run: str, config: dict | None = None, *,
                 objective: str | None = None, clip: ClipSpec | None = None, sampling: Sampling | None = None,
                 flush_steps: int = 10, flush_seconds: float = 5.0, compact_every: int = 64, queue_size: int = 64,
                 on_full: str = "block",
                 detectors: bool | Any = True, on_event: Callable[[Any], None] | None = None,
                 rank: int | None = None, world_size: int | None = None, enabled: bool = True,
                 resume: bool = False, sinks: Iterable[str | Sink] = ()) -> None:
        if on_full not in ("block", "drop"):
            raise ValueError(f"on_full must be 'block' or 'drop', got {on_full!r}")
        if flush_steps < 1 or flush_seconds <= 0 or queue_size < 1:
            raise ValueError("flush_steps, queue_size must be >= 1 and flush_seconds > 0")
        r, w = _rank_world()
        self.rank = r if rank is None else rank
        self.world_size = w if world_size is None else world_size
        self.store = Path(store)
        self.run = check_run_name(run)
        self.clip = clip or ClipSpec()
        self.on_event = on_event
        self.events: list[Any] = []
        self.enabled = enabled
        self._closed = False
        self._sinks = Sinks(sinks if enabled and self.rank == 0 else ())  # a missing library: refused before anything
        self._collapse_news: CollapseNews | None = None
        if not enabled:  # a no-op monitor: same API, nothing recorded (to measure the monitor's overhead)
            return
        self.writer = StoreWriter(store, run, self.rank, self.world_size, heartbeat_s=flush_seconds,
                                  compact_every=compact_every)
        self._lock = RunLock.claim(self.writer.root, run, self.rank)
        try:
            if not resume:
                refuse_reuse(self.writer.root, run, self.rank, self.writer.where.show(self.writer.root))
            self.writer.resume_cut = resume  # the replayed steps replace the old ones in every table
            suite = _default_detectors(detectors)
            versions = _versions() if suite is None else dict(_versions(), detector_rules=suite.rules)
            self.writer.set_run_info(objective=objective, config=config or {}, versions=versions)
            self.writer.flush()  # the run is listed (status running) before the first step
            if self._sinks:  # a reward collapse is said to them while the run trains (collapse_news.py)
                from .collapse_news import CollapseNews

                self._collapse_news = CollapseNews(self._verdict, self._stored_rewards() if resume else ((), ()))
            self._recorder = Recorder(self.writer, sampling or Sampling(), queue_size=queue_size, on_full=on_full,
                                      flush_steps=flush_steps, flush_seconds=flush_seconds, detectors=suite,
                                      collapse_news=self._collapse_news)
            self._recorder.start()
        except BaseException:  # a Monitor that failed to start holds nothing
            self._lock.release()
            raise
        atexit.register(self._atexit)

    # -- the API a training loop calls ------------------------------------------------------------
    def observe(self, batch: TokenBatch, step: int, *, eps_low: float | None = None, eps_high: float | None = None,
                dual_clip: float | None = None) -> None:
        """Record one (micro-)batch of ``step``. Shape errors raise ValueError here; values never raise."""
        if not isinstance(batch, TokenBatch):
            raise TypeError(f"observe expects a TokenBatch, got {type(batch).__name__}")
        step = check_step(step, "observe")
        self._check_open()
        if not self.enabled:
            return
        clip = self.clip
        if eps_low is not None or eps_high is not None or dual_clip is not None:
            clip = ClipSpec(eps_low if eps_low is not None else clip.eps_low,
                            eps_high if eps_high is not None else clip.eps_high,
                            dual_clip if dual_clip is not None else clip.dual_clip, clip.success_threshold)
        self._recorder.put(Observe(step, snapshot(batch), clip))
        self._deliver()

    def keep_tokenizer(self, tokenizer: Any) -> None:
        """Save the run's tokenizer into its store folder (``<store>/<run>/tokenizer``; rank 0, once) so the
        dashboard decodes token rows wherever the store is opened. Anything with ``save_pretrained`` (an HF
        tokenizer or processor) works; a failure is logged and costs only the decoding."""
        if not self.enabled or self.rank != 0 or not hasattr(tokenizer, "save_pretrained"):
            return
        target = self.writer.root / self.run / "tokenizer"  # an object store's: the spool, then uploaded
        try:
            if not (target / "tokenizer_config.json").is_file():
                tokenizer.save_pretrained(target)
                for f in sorted(p for p in target.rglob("*") if p.is_file()):
                    self.writer.where.push(f)
        except Exception as exc:  # the run goes on: the token page then shows ids
            log.warning("collapsewatch: could not save the tokenizer into %s: %s", target, exc)

    def log(self, step: int, scalars: dict[str, float | int | torch.Tensor | None]) -> None:
        """Record step scalars (grad_norm, lr, loss terms ... under any key): numbers, one-element tensors or numpy
        values, None for NULL. Anything else raises a TypeError naming the key (never stored as NULL).

        A reward logged here (``reward_mean``, or an alias such as ``reward``: ``ingest.keys``) fills the step's
        ``reward_mean`` where its observed batches carry no reward — for the detectors and the ``steps`` view alike;
        so do ``reward_std``, ``correct_frac``, ``zero_std_group_frac``, ``response_length_mean``,
        ``truncated_frac`` and ``entropy_mean`` (``catalogue.LOGGED_STANDINS``). An observed value wins."""
        step = check_step(step, "log")
        self._check_open()
        if not self.enabled:
            return
        clean: dict[str, float | None] = {}
        for k, v in scalars.items():
            if isinstance(v, torch.Tensor):
                v = v.detach()
            elif isinstance(v, np.ndarray) and v.size == 1:
                v = v.reshape(())
            if isinstance(v, (complex, np.complexfloating)) or (isinstance(v, (torch.Tensor, np.ndarray))
                                                                and (v.dtype.is_complex if isinstance(v, torch.Tensor)
                                                                     else np.iscomplexobj(v))):
                raise TypeError(f"log: scalar {k!r} is complex ({v!r}); pass a real number")
            try:
                clean[str(k)] = None if v is None else float(v)
            except (TypeError, ValueError, RuntimeError) as e:  # e.g. a vector, a string, a list
                raise TypeError(f"log: scalar {k!r} must be a number (or a one-element tensor), got "
                                f"{type(v).__name__}{tuple(getattr(v, 'shape', ()))}") from e
        self._recorder.put(Log(step, clean))
        self._deliver()

    def log_sentinels(self, step: int, scores: SentinelScores, seconds: float | None = None) -> None:
        """Record one scoring of the sentinel set (``collapsewatch.sentinels``): its step scalars
        (``sentinel_logp_correct_mean`` …, ``sentinel_time`` = ``seconds``) and one ``sentinels`` row per sentinel."""
        self._check_open()
        if not self.enabled:
            return
        self.log(step, scores.step_scalars(seconds))
        self._recorder.put(SentinelRows(int(step), scores.rows()))
        self._deliver()

    def flush(self) -> None:
        """Finish the current step and write everything pending (blocks until written)."""
        self._check_open()
        if not self.enabled:
            return
        self._recorder.call(Flush)
        self._deliver()

    def close(self, status: str = "finished", compact: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        try:
            self._recorder.call(Close, status)
            if self._collapse_news is not None:
                self._collapse_news.wait()  # a verdict read after the last flush is said before the final one
            self._deliver()
            if compact:
                from .store.compact import compact_run

                try:
                    if self.writer.unpublished():  # an object store that did not answer: leave the spool as it is
                        log.error("collapsewatch: %d flush(es) of run %s could not be uploaded; they stay in %s",
                                  self.writer.unpublished(), self.run, self.writer.root)
                    else:
                        compact_run(self.writer.where, self.run, rank=self.rank)
                        self.writer.drop_spool()  # an object store's: every segment is in the bucket now
                except Exception:
                    log.exception("collapsewatch: compaction of run %s failed; segments are intact", self.run)
            self._close_sinks()
        finally:
            self._lock.release()  # after compaction: a resumed writer must not start inside it

    def _close_sinks(self) -> None:
        if not self._sinks:
            return
        try:
            verdict = self._verdict()
            self._sinks.verdict(verdict)
            if self._collapse_news is not None and self._collapse_news.say(verdict):  # not said while it trained
                self._sinks.collapse(verdict)  # a webhook takes no verdict: the collapse is its message
        except Exception as exc:  # the run is written whatever the verdict's reading does
            log.warning("collapsewatch: the sinks got no verdict for run %s: %s", self.run, exc)
        self._sinks.close()

    def _stored_rewards(self) -> tuple[list[int], list[Any]]:
        """(steps, ``reward_mean``) this rank already has in the store (a resumed run's; empty where it has none)."""
        from .offline import run_steps
        from .store import Store

        store = Store(self.writer.where.show(self.writer.root))
        try:
            rows = run_steps(store, self.run, self.rank)  # the one query of a rank's step rows
        except Exception as exc:  # a run with no stored steps yet (nothing to go on from), or a store not readable
            log.warning("collapsewatch: the resumed run's stored rewards could not be read (%s): a collapse said "
                        "before may be said again", exc)
            return [], []
        finally:
            store.close()
        return rows["step"].astype(int).tolist(), rows["reward_mean"].tolist()

    def _verdict(self) -> dict[str, Any]:
        """The run's verdict object as the store has it now, under this Monitor's detector rules."""
        suite = self._recorder.detectors if self._recorder is not None else None
        return run_verdict(self.writer.where.show(self.writer.root), self.run, suite.config if suite else None)

    @property
    def latest(self) -> dict[str, Any]:
        """Step metrics of the last step the recorder finished (a step behind the trainer)."""
        return self._recorder.latest if self.enabled else {}

    @property
    def series(self) -> Snapshot | None:
        """The ``collapsewatch/…`` series after the last step the recorder finished (:mod:`collapsewatch.series`):
        read, never waited for; None before the first step is finished."""
        return self._recorder.series if self.enabled else None

    @property
    def should_stop(self) -> bool:
        """True once a critical event was seen (a trainer may check it to stop early)."""
        return any(getattr(e, "severity", None) == "critical" for e in self.events)

    # -- plumbing -----------------------------------------------------------------------------------
    def _deliver(self) -> None:
        got = []
        while True:
            try:
                ev = self._recorder.events_out.get_nowait()
            except Exception:
                break
            got.append(ev)
        if got and self._sinks:
            self._sinks.events([dict(ev.as_row(), run=self.run) for ev in got])
        for verdict in self._collapse_news.take() if self._collapse_news is not None else ():
            if self._collapse_news.say(verdict):
                self._sinks.collapse(verdict)
        for ev in got:
            self.events.append(ev)
            if self.on_event is not None:
                try:
                    self.on_event(ev)
                except Exception:
                    log.exception("collapsewatch: on_event callback raised; ignored")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"Monitor for run {self.run!r} is closed")

    def _atexit(self) -> None:
        if not self._closed:
            log.warning("collapsewatch: Monitor for run %s was not closed; marking it crashed", self.run)
            self.close(status="crashed", compact=False)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(status="finished" if exc_type is None else "crashed")
