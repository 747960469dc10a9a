"""verl, worker side: the registered policy loss ``collapsewatch`` that returns exactly the loss of the mode it wraps
and records what verl passed it as a :class:`~collapsewatch.TokenBatch`, rank-local, from inside each Ray worker.

    actor_rollout_ref.actor.policy_loss.loss_mode=collapsewatch          # wraps "vanilla" (or $COLLAPSEWATCH_WRAPPED)
    actor_rollout_ref.actor.policy_loss.loss_mode=collapsewatch.gspo     # wraps verl's "gspo"

verl finds this module through the ``verl.plugins`` entry point of the collapsewatch package (``import verl`` loads
it in the driver and in every worker), so no import line is needed. Read against verl 0.9.1 (PyPI), where
``verl.workers.utils.losses.ppo_loss`` calls ``policy_loss_fn(old_log_prob=, log_prob=, advantages=, response_mask=,
loss_agg_mode=, config=, rollout_is_weights=)`` on padded (B, T) tensors of one micro-batch (docs/verl.md).

What the loss function is not given, and where it comes from (none of it costs a device sync):

* per-sequence fields (sequence id, group, reward, truncation, zero-std group, the step) are (B,) tensors and
  non-tensor values the driver hook (:mod:`.verl_driver`) adds to verl's batch; they travel with it into the
  micro-batch ``TensorDict``, which is found by walking up the Python stack (a few frames; no copy);
* the entropy verl computed for its entropy bonus is ``ppo_loss``'s local ``entropy`` (when present);
* rollout log-probs and the response token ids are the micro-batch's ``rollout_log_probs`` / ``responses`` fields,
  padded as ``ppo_loss`` pads its own fields; the tokenizer (for the dashboard) is verl's ``config.model_config``'s.

The worker's Monitor (one per process, rank = the torch.distributed rank) opens on the first call when
``COLLAPSEWATCH_STORE`` and ``COLLAPSEWATCH_RUN`` are set; otherwise the loss only passes through. A failure inside
the tap is logged once and counted: the monitor never takes a training step down.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import torch
from torch import Tensor
from torch.optim.optimizer import register_optimizer_step_post_hook
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, get_policy_loss_fn, register_policy_loss
from verl.utils import tensordict_utils as tu

from ..batch import TokenBatch
from ..probe import ClipSpec
from ._trl_tap import REPLAY_STRIDE
from .verl_sentinels import decode as decode_sentinels

log = logging.getLogger("collapsewatch")

LOSS_MODE = "collapsewatch"
KEY = "collapsewatch_"  # prefix of the fields the driver hook adds to verl's batch (one home: verl_driver imports it)
ENV_STORE, ENV_RUN, ENV_WRAPPED = "COLLAPSEWATCH_STORE", "COLLAPSEWATCH_RUN", "COLLAPSEWATCH_WRAPPED"
ENV_SUCCESS, ENV_RESUME = "COLLAPSEWATCH_SUCCESS_THRESHOLD", "COLLAPSEWATCH_RESUME"
ENV_SIGNALS = "COLLAPSEWATCH_LOG_SIGNALS"  # "0": the driver adds no collapsewatch/… series to verl's metrics
TOKEN_CLIP_MODES = ("vanilla",)
"""verl loss modes that PPO-clip the token ratio at 1 − clip_ratio_low / 1 + clip_ratio_high (dual clip c for A < 0):
clip flags are computed for these only; for the others (gspo clips the sequence ratio, sapo / cispo / gpg … do not
clip tokens) they are NULL."""
MAX_FRAMES = 8  # how far up the stack the micro-batch TensorDict is looked for (verl 0.9.1: 2 frames)


def wrapped_mode(loss_mode: str) -> str:
    """The verl loss mode wrapped by ``loss_mode`` (``collapsewatch`` → $COLLAPSEWATCH_WRAPPED or ``vanilla``)."""
    mode = loss_mode[len(LOSS_MODE) + 1:] if loss_mode.startswith(LOSS_MODE + ".") else \
        os.environ.get(ENV_WRAPPED, "vanilla")
    if mode == LOSS_MODE or mode.startswith(LOSS_MODE + "."):
        raise ValueError(f"policy_loss.loss_mode={loss_mode!r} wraps {mode!r}: collapsewatch cannot wrap itself")
    return mode


def clip_spec(config: Any, mode: str) -> ClipSpec:
    """verl's clip settings as a ClipSpec (eps None: flags NULL where ``mode`` does not clip token ratios)."""
    success = float(os.environ.get(ENV_SUCCESS, 1.0))
    if mode not in TOKEN_CLIP_MODES or config is None:
        return ClipSpec(eps_low=None, eps_high=None, dual_clip=None, success_threshold=success)
    eps = config.clip_ratio
    low = config.clip_ratio_low if config.clip_ratio_low is not None else eps
    high = config.clip_ratio_high if config.clip_ratio_high is not None else eps
    return ClipSpec(eps_low=float(low), eps_high=float(high), dual_clip=float(config.get("clip_ratio_c", 3.0)),
                    success_threshold=success)


def micro_batch_fields(frame: Any, batch_size: int) -> tuple[Any, Tensor | None]:
    """(the micro-batch TensorDict that carries the driver's fields, or None; ppo_loss's ``entropy`` or None),
    found in the callers' frames starting at ``frame`` (ppo_loss's)."""
    entropy = frame.f_locals.get("entropy") if frame is not None else None
    td = None
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        for value in frame.f_locals.values():
            keys = getattr(value, "keys", None)
            if type(value).__name__ == "TensorDict" and callable(keys) and KEY + "seq_id" in keys():
                if value.batch_size[:1] == torch.Size([batch_size]):
                    td = value
                    break
        if td is not None:
            break
        frame = frame.f_back
    return td, entropy if isinstance(entropy, Tensor) else None


def _padded(td: Any, key: str, shape: torch.Size) -> Tensor | None:
    """``td[key]`` as a padded (B, T) tensor, as ``ppo_loss`` pads its own fields; None if absent or misshapen."""
    if td is None or key not in td.keys():
        return None
    value = td.select(key).to_padded_tensor()[key]
    return value if value.shape == shape else None


def _non_tensor(td: Any, key: str) -> Any:
    return tu.get_non_tensor_data(td, key, None)


class WorkerTap:
    """The per-process state of the tap: the Monitor, the step clock and the optimizer-step count since the step
    began (on-policy = no optimizer step yet since this step's rollout, π_θ = π_old; told, never inferred). On the
    run's last step (told by the driver) the Monitor is closed as ``finished`` after that step's last optimizer step:
    Ray ends its workers without running their exit handlers."""

    def __init__(self) -> None:
        self.monitor: Any = None
        self.errors = 0
        self._opened = False
        self._step: int | None = None
        self._updates = 0  # optimizer steps since self._step began
        self._total = 0  # optimizer steps since the tap opened (the step clock without the driver hook)
        self._close_after: int | None = None  # on the last step: its number of optimizer steps
        self._hook: Any = None

    def _open(self, config: Any, mode: str) -> Any:
        self._opened = True
        store, run = os.environ.get(ENV_STORE), os.environ.get(ENV_RUN)
        if not store or not run:
            log.warning("collapsewatch: loss_mode=%s without %s / %s set: passing through, nothing recorded",
                        LOSS_MODE, ENV_STORE, ENV_RUN)
            return None
        from ..monitor import Monitor

        self._hook = register_optimizer_step_post_hook(self._count_update)
        # each worker process is one rank of the run (its torch.distributed rank); a restarted job sets $..._RESUME=1
        self.monitor = Monitor(store, run, objective=f"verl:{mode}", clip=clip_spec(config, mode),
                               resume=os.environ.get(ENV_RESUME, "0") == "1")
        # the dashboard decodes token rows with the run's tokenizer: verl's model config loaded it (rank 0 saves it)
        self.monitor.keep_tokenizer(getattr(getattr(config, "model_config", None), "tokenizer", None))
        return self.monitor

    def _count_update(self, *_: Any) -> None:
        self._updates += 1
        self._total += 1
        if self._close_after is not None and self._updates >= self._close_after and self.monitor is not None:
            monitor, self.monitor = self.monitor, None
            self._hook.remove()
            try:
                monitor.close("finished")
            except Exception:
                self.failed()

    def observe(self, mode: str, old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
                config: Any, frame: Any) -> None:
        monitor = self.monitor if self._opened else self._open(config, mode)
        if monitor is None or not torch.is_grad_enabled():  # nothing to record, or a no-grad (eval) pass
            return
        td, entropy = micro_batch_fields(frame, log_prob.shape[0])
        step = _non_tensor(td, KEY + "step") if td is not None else None
        told = step is not None
        if not told:  # no driver hook: each optimizer step is a step, on-policy unknown (docs/verl.md)
            step = self._total
        if step != self._step:
            self._step, self._updates = int(step), 0
            sentinels = _non_tensor(td, KEY + "sentinels") if told else None
            if sentinels and monitor.rank == 0:  # scored by the driver before this step (.verl_sentinels)
                scores, seconds = decode_sentinels(sentinels)
                monitor.log_sentinels(self._step, scores, seconds)
        bypass = bool(_non_tensor(td, KEY + "bypass")) if told else False
        on_policy = (self._updates == 0 and not bypass) if told else None
        # ppo_epochs > 1 trains each sequence once per epoch within one step: its e-th pass is seq_id + e·2⁴⁰ (the
        # TRL tap's replay rule), so sequence rows stay unique and seq_id mod 2⁴⁰ follows the sequence
        mini_batches = (_non_tensor(td, KEY + "mini_batches") or 1) if told else 1
        epoch = self._updates // mini_batches
        if told and _non_tensor(td, KEY + "last"):
            self._close_after = mini_batches * (_non_tensor(td, KEY + "epochs") or 1)
        batch = self.token_batch(old_log_prob, log_prob, advantages, response_mask, td, entropy, on_policy)
        if epoch and batch.seq_ids is not None:
            batch.seq_ids = batch.seq_ids + epoch * REPLAY_STRIDE
        monitor.observe(batch, self._step)

    @staticmethod
    def token_batch(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor, td: Any,
                    entropy: Tensor | None, on_policy: bool | None) -> TokenBatch:
        """The TokenBatch of one verl micro-batch: verl's padded (B, T) tensors plus the driver's (B,) fields."""
        shape = log_prob.shape
        per_seq = {} if td is None else {
            name: td[KEY + name] for name in ("seq_id", "group_id", "reward", "truncated", "group_zero_std")
            if KEY + name in td.keys()}
        return TokenBatch(
            logp=log_prob.detach(), mask=response_mask, logp_old=old_log_prob,
            logp_rollout=_padded(td, "rollout_log_probs", shape), turn_ids=_padded(td, KEY + "turn_ids", shape),
            token_ids=_padded(td, "responses", shape),
            entropy=entropy.detach() if entropy is not None and entropy.shape == shape else None,
            advantages=advantages, seq_ids=per_seq.get("seq_id"), group_ids=per_seq.get("group_id"),
            rewards=per_seq.get("reward"), truncated=per_seq.get("truncated"),
            group_zero_std=per_seq.get("group_zero_std"), on_policy=on_policy,
        )

    def failed(self) -> None:
        self.errors += 1
        if self.errors == 1:
            log.exception("collapsewatch: failed to observe a verl micro-batch; training continues "
                          "(further failures are counted)")


TAP = WorkerTap()


def collapsewatch_policy_loss(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
                              loss_agg_mode: str = "token-mean", config: Any = None,
                              rollout_is_weights: Tensor | None = None, **kwargs: Any) -> tuple[Tensor, dict]:
    """loss, metrics = the wrapped mode's, unchanged (same call, same tensors); the inputs are recorded on the side.

    The wrapped mode comes from ``config.policy_loss.loss_mode`` (``collapsewatch.<mode>``) or $COLLAPSEWATCH_WRAPPED.
    """
    loss_mode = config.policy_loss.get("loss_mode", LOSS_MODE) if config is not None else LOSS_MODE
    mode = wrapped_mode(loss_mode)
    out = get_policy_loss_fn(mode)(old_log_prob=old_log_prob, log_prob=log_prob, advantages=advantages,
                                   response_mask=response_mask, loss_agg_mode=loss_agg_mode, config=config,
                                   rollout_is_weights=rollout_is_weights, **kwargs)
    try:
        TAP.observe(mode, old_log_prob, log_prob, advantages, response_mask, config, sys._getframe(1))
    except Exception:
        TAP.failed()
    return out


def register() -> None:
    """Register ``collapsewatch`` and ``collapsewatch.<mode>`` for every mode verl has registered now."""
    for mode in [m for m in POLICY_LOSS_REGISTRY if not m.startswith(LOSS_MODE)]:
        register_policy_loss(f"{LOSS_MODE}.{mode}")(collapsewatch_policy_loss)
    register_policy_loss(LOSS_MODE)(collapsewatch_policy_loss)


register()
