"""Watch a TRL ``GRPOTrainer`` run with collapsewatch.

    from collapsewatch.integrations.trl import watch
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=...)
    watch(trainer, store="runs/", run="trl-exp")
    trainer.train()

Two layers, usable apart:

* :class:`CollapsewatchCallback` — a plain ``TrainerCallback`` that works with any TRL version (and any HF
  ``Trainer``): opens a :class:`~collapsewatch.Monitor` at train begin (rank and world size from the run's
  accelerate state, the trainer's arguments as the run config), stores every scalar ``on_log`` sees under its
  original key (``clip_ratio/region_mean``, ``learning_rate`` …) plus catalogue aliases (``learning_rate`` → ``lr``),
  and closes the Monitor at train end. It also adds the ``collapsewatch/…`` series (:mod:`collapsewatch.series`:
  the A>0 ratio tail, sentinel L and I, entropy of correct and incorrect responses, zero-std group share, the worst
  severity) to the ``logs`` dict every ``report_to`` backend receives; :func:`watch` puts it first among the
  trainer's callbacks so that they see them (``log_signals=False``: not added).
* the per-token tap (:mod:`._trl_tap`), installed by :func:`watch` for TRL in :data:`SUPPORTED_TRL`: captures the
  log-probs, entropies, old / sampling / reference log-probs, advantages and loss masks TRL computed for each
  micro-batch — no extra forward — so the store gets the same token, sequence and step metrics as the built-in
  trainer. Outside the supported range :func:`watch` refuses with :class:`UnsupportedTRLVersion`; ``per_token=False``
  keeps the scalar path.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from transformers import TrainerCallback

from ..ingest.keys import TRL_ALIASES
from ..monitor import Monitor
from ..probe import ClipSpec
from ..runlock import RunExistsError, refuse_restart, refuse_reuse
from ..sentinels import Sentinel, due, text_sentinels
from ..sentinels import score as score_sentinels
from ..series import Feed
from ..store.location import is_url
from ..store.restart import max_seq_id
from ..store.writer import check_run_name
from ._trl_tap import REPLAY_STRIDE, GRPOTap, clip_spec, objective_name, on_policy_note

log = logging.getLogger("collapsewatch")

SUPPORTED_TRL = SpecifierSet(">=1.10,<1.17")
"""TRL versions whose ``GRPOTrainer`` internals the per-token tap was checked against (docs/trl.md says how)."""



class UnsupportedTRLVersion(RuntimeError):
    """The installed TRL is outside :data:`SUPPORTED_TRL`, or its Liger loss bypasses the tapped method."""


class AlreadyWatched(RuntimeError):
    """:func:`watch` was called a second time on the same trainer."""


FINAL_LOG_KEY = "train_runtime"
"""A key of the summary HF's ``Trainer.train`` logs once after its last step (``speed_metrics("train", …)``)."""

SET_BY_WATCH = ("store", "run", "config", "objective", "clip", "rank", "world_size")
"""Monitor arguments the callback fills itself (from the trainer and ``watch``'s own arguments)."""


def check_monitor_kwargs(monitor_kwargs: dict[str, Any], caller: str = "watch()") -> None:
    """Raise TypeError naming any ``**monitor_kwargs`` key :class:`~collapsewatch.Monitor` does not take (or that
    the callback sets itself), when ``caller`` (``watch()`` or ``CollapsewatchCallback()``, named in the message) is
    called rather than when ``train()`` opens the Monitor."""
    params = inspect.signature(Monitor).parameters
    accepted = [name for name in params if name not in SET_BY_WATCH]
    for name in monitor_kwargs:
        if name in SET_BY_WATCH:
            raise TypeError(f"{caller}: {name!r} is set by {caller} itself (from the trainer and its own arguments); "
                            f"do not pass it as a Monitor argument")
        if name not in params:
            raise TypeError(f"{caller}: unknown Monitor argument {name!r}; Monitor takes: {', '.join(accepted)}")


def check_run(store: str | os.PathLike, run: str, rank: int, resume: bool, caller: str = "watch()") -> None:
    """ValueError for a run name the store cannot hold; :class:`~collapsewatch.runlock.RunExistsError` for a run
    ``rank`` already wrote to, unless ``resume`` — as :class:`~collapsewatch.Monitor` refuses them at ``train()``,
    but at ``caller``. The reuse check needs the store's rows: a folder store is read here; an object store's are
    fetched when ``train()`` opens the Monitor, which refuses then."""
    try:
        check_run_name(run)
    except ValueError as e:
        raise ValueError(f"{caller}: {e}") from None
    if not resume and not is_url(store):
        try:
            refuse_reuse(Path(store), run, rank)
        except RunExistsError as e:
            raise RunExistsError(f"{caller}: {e}") from None


def check_trainer(trainer: Any, per_token: bool) -> None:
    """TypeError unless ``trainer`` can be watched (a ``trl.GRPOTrainer`` per token, any HF ``Trainer`` for
    scalars); :class:`AlreadyWatched` if :func:`watch` was called on it before."""
    from transformers import Trainer

    if per_token:
        from trl import GRPOTrainer

        if not isinstance(trainer, GRPOTrainer):
            raise TypeError(f"watch(): per-token capture needs a trl.GRPOTrainer, got {type(trainer).__name__}; "
                            "use per_token=False to record the logged scalars of any transformers Trainer")
    elif not isinstance(trainer, Trainer):
        raise TypeError(f"watch(): expected a transformers Trainer (e.g. trl.GRPOTrainer), got {type(trainer).__name__}")
    watched = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, CollapsewatchCallback)]
    if watched:
        raise AlreadyWatched(f"watch(): this trainer is already watched (run {watched[0].run!r}); call watch() once "
                             "per trainer — a later train() on it is recorded as a new run by the same callback")


def check_trl(trainer: Any | None = None, version: str | None = None) -> None:
    """Raise :class:`UnsupportedTRLVersion` unless the per-token tap supports this TRL (and ``trainer``'s loss path;
    its type is :func:`check_trainer`'s business)."""
    if version is None:
        import trl

        version = trl.__version__
    hint = ("Use watch(trainer, ..., per_token=False) to record TRL's logged scalars only (works with any TRL "
            "version), or install a supported TRL: pip install 'trl" + str(SUPPORTED_TRL) + "'.")
    if _release(version) not in SUPPORTED_TRL:
        raise UnsupportedTRLVersion(f"collapsewatch's per-token TRL integration supports trl{SUPPORTED_TRL}; "
                                    f"trl {version} is installed. {hint}")
    if trainer is not None and getattr(trainer, "use_liger_kernel", False) and _release(version) < Version("1.14"):
        raise UnsupportedTRLVersion("TRL < 1.14 computes the Liger GRPO loss outside _compute_loss, so there are no "
                                    f"per-token tensors to capture; set use_liger_kernel=False. {hint}")


def _release(version: str) -> Version:
    """1.16.0.dev0 / 1.16.0+local → 1.16.0: a pre-release or local build counts as its release."""
    return Version(".".join(map(str, (Version(version).release + (0, 0))[:3])))


def catalogue_scalars(logs: dict[str, Any], beta: float | None = None,
                      kl_ratio_weighted: bool = False) -> dict[str, float | None]:
    """TRL's logged values (numbers only) under their own keys, plus the catalogue aliases.

    ``kl_ratio_weighted``: TRL's ``use_bias_correction_kl`` (default True) — its ``kl`` is then the mean of r · k3, not
    of k3, and is also stored as ``kl_ref_ratio_weighted_mean`` so it is not mistaken for ``kl_ref_mean``.
    """
    out: dict[str, float | None] = {}
    for key, value in logs.items():
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            out[str(key)] = None if value is None else float(value)
    for key, alias in TRL_ALIASES.items():
        if key in out and alias not in out:
            out[alias] = out[key]
    if beta and out.get("kl") is not None and "loss_kl" not in out:
        out["loss_kl"] = beta * out["kl"]  # catalogue: loss_kl is β · KL; TRL logs the KL itself
    if kl_ratio_weighted and "kl" in out:
        out["kl_ref_ratio_weighted_mean"] = out["kl"]
    return out


def _run_config(args: Any, model: Any, extra: dict | None) -> dict[str, Any]:
    import trl

    config: dict[str, Any] = {"trl_version": trl.__version__, "trl_args": args.to_dict()}
    model_config = getattr(model, "config", None)
    if model_config is not None and hasattr(model_config, "to_dict"):
        config["model_config"] = model_config.to_dict()
    if extra:
        config.update(extra)
    return config


class CollapsewatchCallback(TrainerCallback):
    """Scalars, config and the Monitor's life cycle for any HF / TRL trainer.

    Args:
        store / run: where and under which name the run is stored (see :class:`~collapsewatch.Monitor`).
        config: extra entries for the run's stored config (the trainer arguments are always stored).
        clip / objective: shown in the store; :func:`watch` fills them from the trainer.
        stop_on_critical: ask the trainer to stop once a detector raises a critical event.
        log_signals: add the ``collapsewatch/…`` series to the ``logs`` of each ``on_log`` (the callbacks after this
            one — the ``report_to`` backends when it comes first — log them); False: ``logs`` stay TRL's.
        **monitor_kwargs: passed to :class:`~collapsewatch.Monitor` (``sampling``, ``flush_steps``, ``detectors`` …).
    """

    def __init__(self, store: str | os.PathLike, run: str, config: dict | None = None, *, clip: ClipSpec | None = None,
                 objective: str | None = None, stop_on_critical: bool = False, sentinels: Sequence = (),
                 sentinel_every: int = 10, log_signals: bool = True, **monitor_kwargs: Any) -> None:
        check_monitor_kwargs(monitor_kwargs, "CollapsewatchCallback()")  # a typo fails here, not at train()
        check_run(store, run, 0, resume=True, caller="CollapsewatchCallback()")  # the name only: no rank yet
        if "sinks" in monitor_kwargs:  # made here: a missing tracker library is refused before training starts
            from ..sinks import Sinks

            monitor_kwargs["sinks"] = Sinks(monitor_kwargs["sinks"]).sinks
        if sentinel_every < 1:
            raise ValueError(f"watch(): sentinel_every must be ≥ 1, got {sentinel_every}")
        self.sentinel_pairs, self.sentinel_every = list(sentinels), sentinel_every
        self.sentinels: list[Sentinel] = []  # tokenized at train begin, with the trainer's tokenizer
        self.store, self.run, self.config = store, run, config
        self.clip, self.objective, self.stop_on_critical = clip, objective, stop_on_critical
        self.monitor_kwargs = monitor_kwargs
        self.log_signals = log_signals
        self.feed: Feed | None = None  # what this train()'s logs got of the series (a new one per train())
        self.monitor: Monitor | None = None
        self.tap: GRPOTap | None = None  # set by watch(per_token=True)
        self.beta: float | None = None
        self.kl_ratio_weighted = False
        self.runs: list[str] = []  # the run each train() was recorded as, in order
        self._open = False

    def next_run_name(self) -> str:
        """``run`` for the first ``train()``, ``<run>-train<k>`` for the k-th: HF restarts ``global_step`` at 0 on
        each ``train()`` (unless resuming), so a later call cannot continue the first run's step axis."""
        return self.run if not self.runs else f"{self.run}-train{len(self.runs) + 1}"

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self._open:  # the train() in progress already has its Monitor
            return
        run = self.next_run_name()
        if self.monitor_kwargs.get("resume"):  # continue after the checkpoint's step, or refuse: never start over
            refuse_restart(self.store, run, args.process_index, state.global_step, "watch(..., resume=True)")
            if self.tap is not None and (high := max_seq_id(self.store, run, REPLAY_STRIDE)) is not None:
                self.tap.id_floor = high + 1  # new sequences never reuse a stored id
        if self.runs:
            log.warning("collapsewatch: train() called again on a watched trainer; run %r is closed, recording this "
                        "one as run %r", self.runs[-1], run)
        self.beta = getattr(args, "beta", None)
        self.kl_ratio_weighted = bool(getattr(args, "use_bias_correction_kl", False))  # absent where TRL never weights its kl
        objective = self.objective or (f"trl:{args.loss_type}" if hasattr(args, "loss_type") else None)
        self.monitor = Monitor(self.store, run, _run_config(args, model, self.config), objective=objective,
                               clip=self.clip, rank=args.process_index, world_size=args.world_size,
                               **self.monitor_kwargs)
        self.runs.append(run)
        self._open = True
        self.feed = Feed() if self.log_signals else None
        tokenizer = kwargs.get("processing_class") or kwargs.get("tokenizer")
        if tokenizer is not None:
            self.monitor.keep_tokenizer(tokenizer)
        if self.sentinel_pairs and args.process_index == 0:
            if tokenizer is None and not all(isinstance(p, Sentinel) for p in self.sentinel_pairs):
                raise ValueError("watch(): text sentinels need the trainer's tokenizer (processing_class)")
            self.sentinels = text_sentinels(tokenizer, self.sentinel_pairs)
            self.pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        """Score the sentinels under the policy this optimizer step starts from, every ``sentinel_every`` steps; they
        are stored at ``global_step + 1``, the step number the tap gives the step's micro-batches."""
        if self.monitor is None or not self.sentinels or model is None or not due(state.global_step,
                                                                                  self.sentinel_every):
            return
        t0 = time.perf_counter()
        scores = score_sentinels(model, self.sentinels, float(getattr(args, "temperature", 1.0) or 1.0), self.pad_id)
        self.monitor.log_sentinels(state.global_step + 1, scores, time.perf_counter() - t0)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.monitor is None or not logs:
            return
        self.monitor.log(state.global_step, catalogue_scalars(logs, self.beta, self.kl_ratio_weighted))
        if self.feed is None:
            return
        if FINAL_LOG_KEY in logs:  # train()'s summary, after its last step: finish that step (once, off the hot path)
            self.monitor.flush()
        elif control.should_training_stop or (state.max_steps and state.global_step >= state.max_steps):
            return  # the last step's own log (max_steps, stop_on_critical): the summary log next sends that step
        logs.update(self.feed.take(self.monitor.series))

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_on_critical and self.monitor is not None and self.monitor.should_stop:
            log.warning("collapsewatch: critical event at step %d; asking the trainer to stop", state.global_step)
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        self.close("finished")

    def close(self, status: str = "finished") -> None:
        """Close the Monitor (flush, mark the run ``status``, compact); later calls do nothing."""
        if self.monitor is not None:
            self.monitor.close(status=status)  # idempotent
        self._open = False


def watch(trainer: Any, store: str | os.PathLike, run: str, *, per_token: bool = True, config: dict | None = None,
          success_threshold: float = 1.0, stop_on_critical: bool = False, sentinels: Sequence = (),
          sentinel_every: int = 10, log_signals: bool = True, **monitor_kwargs: Any) -> CollapsewatchCallback:
    """Attach collapsewatch to ``trainer`` (a TRL ``GRPOTrainer``) before ``trainer.train()``.

    Args:
        trainer: the trainer; its *instance* gets the callback and (``per_token``) five wrapped methods.
        store / run: store folder and run name.
        per_token: capture TRL's per-token tensors (TRL in :data:`SUPPORTED_TRL` only, else
            :class:`UnsupportedTRLVersion`); False records TRL's logged scalars only, with any TRL version.
        config: extra entries for the run's stored config.
        success_threshold: a sequence is ``correct`` when its (weighted, summed) reward ≥ this.
        stop_on_critical: stop training at a critical detector event.
        sentinels / sentinel_every: fixed ``(prompt, response, correct)`` texts (or ``collapsewatch.sentinels.Sentinel``
            objects) scored under the current policy every ``sentinel_every`` optimizer steps, no grad, on rank 0:
            the LLD detector reads their L (``sentinel_logp_correct_mean``) before the batch's (docs/trl.md).
        log_signals: add the ``collapsewatch/…`` series (:mod:`collapsewatch.series`) to the logs TRL sends to every
            ``report_to`` backend (the callback goes first among the trainer's callbacks); False: TRL's logs only.
        **monitor_kwargs: passed to :class:`~collapsewatch.Monitor` (``sampling``, ``flush_steps``, ``detectors``,
            ``on_event`` — a callable given each new or extended detector event on the training thread, e.g.
            ``lambda ev: post_event(url, ev)`` with :func:`collapsewatch.alerts.post_event`; ``sinks`` — trackers
            and webhooks that get each episode and the verdict, docs/trackers.md …).

    Returns the callback; ``callback.monitor`` is the open Monitor during ``train()``. A ``train()`` that raises
    marks the run ``crashed``. Each later ``train()`` is recorded as a new run ``<run>-train<k>`` (``callback.runs``).

    Raises (before anything is attached): TypeError for a trainer of the wrong type or an unknown Monitor argument
    (or one watch sets itself: ``objective``, ``clip``, ``rank`` …), ValueError for an invalid run name,
    :class:`~collapsewatch.runlock.RunExistsError` for a run of a folder store this rank already wrote to (unless
    ``resume=True``), :class:`AlreadyWatched` on a second call, :class:`UnsupportedTRLVersion` for a TRL the tap was
    not checked against (``per_token=False`` works with any version).
    """
    check_monitor_kwargs(monitor_kwargs)  # before the callback's own keywords could collide with them
    check_trainer(trainer, per_token)
    check_run(store, run, trainer.args.process_index, bool(monitor_kwargs.get("resume")))
    clip = ClipSpec(success_threshold=success_threshold)
    objective = None
    if per_token:
        check_trl(trainer)
        clip, objective = clip_spec(trainer, success_threshold), objective_name(trainer)
    callback = CollapsewatchCallback(store, run, config, clip=clip, objective=objective,
                                     stop_on_critical=stop_on_critical, sentinels=sentinels,
                                     sentinel_every=sentinel_every, log_signals=log_signals, **monitor_kwargs)
    # first, so the report_to callbacks (added when the trainer was made) log the series it adds to `logs`
    trainer.callback_handler.callbacks.insert(0, callback)
    if per_token:
        tap = GRPOTap(trainer, lambda: callback.monitor)
        tap.install()
        callback.tap = tap
        if note := on_policy_note(trainer, run):
            log.warning(note)
    _close_on_crash(trainer, callback)
    return callback


def _close_on_crash(trainer: Any, callback: CollapsewatchCallback) -> None:
    train = trainer.train  # the bound method; the instance attribute below shadows it

    def train_and_close(*args: Any, **kwargs: Any) -> Any:
        try:
            return train(*args, **kwargs)
        except BaseException:
            callback.close("crashed")
            raise

    train_and_close.__doc__ = train.__doc__
    trainer.train = train_and_close


__all__ = ["SUPPORTED_TRL", "AlreadyWatched", "CollapsewatchCallback", "UnsupportedTRLVersion", "catalogue_scalars",
           "check_monitor_kwargs", "check_run", "check_trainer", "check_trl", "watch"]
