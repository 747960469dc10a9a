"""verl, driver side: per-sequence fields added to the batch verl sends to its actor workers, so each worker's
per-token rows carry the sequence id, group, reward, truncation and zero-std flag the built-in trainer records.

verl computes rewards, ``uid`` groups and advantages on the driver (``RayPPOTrainer.fit``); the workers' loss
function sees none of them. :func:`annotate` adds them to the ``DataProto`` as (B,) tensors (``collapsewatch_*``,
so they follow verl's own dispatch, shuffle and micro-batch split) plus the step as meta info; the worker tap
(:mod:`.verl`) reads them back from the micro-batch. Installed around ``RayPPOTrainer._update_actor`` by
:func:`install` (the ``verl.plugins`` entry point does it when ``COLLAPSEWATCH_STORE`` is set).

Definitions (verl 0.9.1's own, ``trainer/ppo/metric_utils.py``): reward = Σ_t ``token_level_scores`` (the
``critic/score`` of the sequence, before any KL-in-reward); truncated = the response filled
``responses.shape[-1]`` tokens (verl's ``response_length/clip_ratio`` rule); group = the prompt's ``uid``; turns
(multi-turn agent runs, where ``response_mask`` is 0 on tool observations) = maximal runs of model tokens, by the
TRL tap's ``turn_ids_from_tool_mask`` (sent only when a batch has tool tokens: a (B, T) tensor is not free).

The same hook adds the ``collapsewatch/…`` series (:mod:`collapsewatch.series`) to the metrics ``_update_actor``
returns, which ``RayPPOTrainer.fit`` merges into the step's metrics and logs through its ``Tracking`` backends: read
from the store the workers write (rank 0's finished steps; the driver has no Monitor), one small query per step on
the driver, none on the workers. ``COLLAPSEWATCH_LOG_SIGNALS=0`` turns it off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from typing import Any

import numpy as np
import torch

from ..batch import group_zero_std
from ..series import Feed, StoreSnapshots
from ._trl_tap import turn_ids_from_tool_mask
from .verl import ENV_RUN, ENV_SIGNALS, ENV_STORE, KEY
from .verl_sentinels import DriverSentinels

log = logging.getLogger("collapsewatch")
TRAINER_MODULE = "verl.trainer.ppo.ray_trainer"
ROW_BITS = 32  # seq_id = step · 2³² + row: unique over the run, stable across the mini-batches / epochs of a step


def annotate(batch: Any, step: int, *, bypass: bool = False, mini_batches: int = 1, epochs: int = 1,
             last: bool = False) -> None:
    """Add the collapsewatch fields of one training step to verl's ``batch`` (a ``DataProto``), in place.
    ``mini_batches``: optimizer steps per epoch (B / (ppo_mini_batch_size · n)), so the worker knows the epoch;
    ``epochs``: verl's ppo_epochs; ``last``: the run's last step (the workers close their Monitors after it)."""
    t = batch.batch
    if "token_level_scores" not in t.keys() or "responses" not in t.keys():
        raise ValueError("annotate: verl batch lacks 'token_level_scores' or 'responses' (call it after the "
                         "reward and advantage computation, as RayPPOTrainer._update_actor is)")
    B, T = t["responses"].shape  # (B, T) response tokens
    device = t["responses"].device
    rows = torch.arange(B, dtype=torch.int64, device=device)  # (B,)
    reward = t["token_level_scores"].sum(-1).float()  # (B,)
    uid = batch.non_tensor_batch.get("uid")
    if uid is not None:
        _, inverse = np.unique(np.asarray(uid, dtype=object).astype(str), return_inverse=True)
        group = torch.as_tensor(inverse, dtype=torch.int64, device=device)  # (B,) index of the prompt's uid
    else:  # no uid (not a grouped estimator): each sequence is its own group
        group = rows
    base = int(step) << ROW_BITS
    t[KEY + "seq_id"] = base + rows
    t[KEY + "group_id"] = base + group
    t[KEY + "reward"] = reward
    t[KEY + "group_zero_std"] = group_zero_std(group, reward)
    if "attention_mask" in t.keys():
        in_response = t["attention_mask"][:, -T:]  # (B, T) 1 on response tokens, tool observations included
        t[KEY + "truncated"] = in_response.sum(-1) >= T
        model = t["response_mask"] if "response_mask" in t.keys() else None  # (B, T) 0 on tool tokens (multi-turn)
        if model is not None and bool((in_response.bool() & ~model.bool()).any()):  # tool tokens: turns exist
            t[KEY + "turn_ids"] = turn_ids_from_tool_mask(in_response, model).to(torch.int32)  # (B, T)
    batch.meta_info[KEY + "step"] = int(step)
    batch.meta_info[KEY + "bypass"] = bool(bypass)
    batch.meta_info[KEY + "mini_batches"] = max(int(mini_batches), 1)
    batch.meta_info[KEY + "epochs"] = max(int(epochs), 1)
    batch.meta_info[KEY + "last"] = bool(last)


def _mini_batches(trainer: Any, batch_size: int) -> int:
    """verl's optimizer steps per epoch: the batch over ppo_mini_batch_size · rollout.n (``_update_actor``'s rule)."""
    arr = trainer.config.actor_rollout_ref
    return batch_size // (arr.actor.ppo_mini_batch_size * arr.rollout.n)


def _bypass_mode(trainer: Any) -> bool:
    """verl's bypass mode (old_log_probs = rollout log-probs, never recomputed): no mini-batch is on-policy."""
    rc = trainer.config.algorithm.get("rollout_correction", None)
    return bool(rc and rc.get("bypass_mode", False))


def install(trainer_cls: Any = None) -> None:
    """Wrap ``RayPPOTrainer._update_actor`` (or ``trainer_cls``'s) to annotate each batch first; idempotent."""
    if trainer_cls is None:
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer as trainer_cls
    orig = trainer_cls._update_actor
    if getattr(orig, "_collapsewatch", False):
        return
    failures = [0, 0, 0]
    sentinels: list[DriverSentinels | None] = []  # read from the env on the first step ($COLLAPSEWATCH_SENTINELS)
    signals: list[DriverSignals | None] = []  # read from the env on the first step

    def _update_actor(self: Any, batch: Any) -> Any:
        try:
            annotate(batch, self.global_steps, bypass=_bypass_mode(self), mini_batches=_mini_batches(self, len(batch)),
                     epochs=self.config.actor_rollout_ref.actor.ppo_epochs,
                     last=self.global_steps >= getattr(self, "total_training_steps", float("inf")))
        except Exception:  # the run goes on without per-sequence fields
            failures[0] += 1
            if failures[0] == 1:
                log.exception("collapsewatch: could not annotate verl's batch; per-sequence fields are NULL")
        try:  # the sentinels, under the policy this step starts from, through verl's own compute_log_prob
            if not sentinels:
                sentinels.append(DriverSentinels.from_env())
            scored = sentinels[0].maybe_score(self, self.global_steps) if sentinels[0] is not None else None
            if scored is not None:
                batch.meta_info[KEY + "sentinels"] = scored
        except Exception:  # the run goes on without sentinel rows
            failures[1] += 1
            if failures[1] == 1:
                log.exception("collapsewatch: could not score the sentinels; the run goes on without them")
        out = orig(self, batch)
        try:  # the collapsewatch/… series into the metrics fit() logs through Tracking
            if not signals:
                signals.append(DriverSignals.from_env())
            if signals[0] is not None:
                signals[0].add_to(out)
        except Exception:  # the run goes on without them
            failures[2] += 1
            if failures[2] == 1:
                log.exception("collapsewatch: could not add the collapsewatch/ series to verl's metrics; the run goes "
                              "on without them")
        return out

    _update_actor._collapsewatch = True  # type: ignore[attr-defined]
    trainer_cls._update_actor = _update_actor


class DriverSignals:
    """The driver's side of the ``collapsewatch/…`` series: the store's newest finished step, once per step."""

    def __init__(self, store: str, run: str) -> None:
        self.snapshots, self.feed = StoreSnapshots(store, run), Feed()

    @classmethod
    def from_env(cls) -> DriverSignals | None:
        """From ``COLLAPSEWATCH_STORE`` / ``COLLAPSEWATCH_RUN``; None without them or with ``COLLAPSEWATCH_LOG_SIGNALS=0``."""
        store, run = os.environ.get(ENV_STORE), os.environ.get(ENV_RUN)
        if not store or not run or os.environ.get(ENV_SIGNALS, "1") == "0":
            return None
        return cls(store, run)

    def add_to(self, output: Any) -> None:
        """Add the new values to ``output.meta_info["metrics"]`` (``_update_actor``'s return: ``fit`` reduces and
        logs that dict); a store the workers have not written yet adds nothing."""
        metrics = output.meta_info.setdefault("metrics", {})
        metrics.update(self.feed.take(self.snapshots.read()))


class _InstallAfterImport(importlib.abc.MetaPathFinder):
    """Runs :func:`install` right after verl's trainer module is imported (the driver imports it inside a Ray
    actor, whose process loads the plugin at ``import verl`` before the trainer module exists)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != TRAINER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_install(module: Any) -> None:
            exec_module(module)
            install(module.RayPPOTrainer)

        spec.loader.exec_module = exec_then_install  # type: ignore[method-assign]
        return spec


def install_on_import() -> None:
    """Install the driver hook now if verl's trainer is imported already, else right after it is."""
    if TRAINER_MODULE in sys.modules:
        install(sys.modules[TRAINER_MODULE].RayPPOTrainer)
    elif not any(isinstance(f, _InstallAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _InstallAfterImport())
