"""Per-token capture inside TRL's ``GRPOTrainer``: wraps five methods of one trainer *instance* (never the class)
and turns the tensors TRL already computed into a :class:`~collapsewatch.TokenBatch`. No extra forward pass.

What is wrapped, and why (TRL 1.10 – 1.16 share these signatures and bodies; see docs/trl.md):

* ``_generate`` — its completion id lists give the truncation flags, by TRL's own rule (last id not EOS/pad);
* ``_calculate_rewards`` — the (gathered) per-function rewards, combined as TRL combines them for its ``reward`` log;
* ``_generate_and_score_completions`` — adds ``collapsewatch_*`` (B,) tensors (sequence id, group id, reward,
  truncated) to the generation batch, so they follow TRL's shuffle and split into micro-batches;
* ``_get_per_token_logps_and_entropies`` — keeps the policy forward's log-probs and entropies of ``_compute_loss``;
* ``_compute_loss`` — after TRL's loss: builds the TokenBatch from the inputs TRL trained on and observes it.

Step numbering: a micro-batch is observed at ``state.global_step + 1``, the step number TRL/HF give the optimizer
step it contributes to (``global_step`` is incremented after the optimizer step, before ``on_log``), so per-token rows
and TRL's logged scalars share a step. Evaluation passes (model in eval mode) are not observed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..batch import TokenBatch, group_zero_std
from ..probe import ClipSpec

log = logging.getLogger("collapsewatch")
KEY = "collapsewatch_"  # prefix of the per-sequence tensors added to TRL's generation batch
REPLAY_STRIDE = 1 << 40  # seq_id offset of a micro-batch replayed within one optimizer step (see _seq_ids)
PPO_CLIP_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")  # TRL's loss types that clip_ratio/* is logged for
WRAPPED = ("_generate", "_calculate_rewards", "_generate_and_score_completions",
           "_get_per_token_logps_and_entropies", "_compute_loss")


def clip_spec(trainer: Any, success_threshold: float = 1.0) -> ClipSpec:
    """The clip settings TRL applies per token, as a ClipSpec; eps None (flags NULL) where TRL does not clip tokens.

    PPO-clip loss types clip per token at 1 − ε_low / 1 + ε_high (``args.delta`` caps r from above: the dual clip
    for A < 0). With ``importance_sampling_level="sequence"`` (GSPO) the clipped quantity is the sequence ratio, not
    the token ratio, so token clip flags would not mean what TRL clips: they are NULL, and TRL's sequence-level
    ``clip_ratio/*`` scalars are stored under their own keys. sapo / cispo / vespo do not PPO-clip: NULL.
    """
    ppo = getattr(trainer, "loss_type", "grpo") in PPO_CLIP_LOSSES
    if not ppo or getattr(trainer, "importance_sampling_level", "token") != "token":
        return ClipSpec(eps_low=None, eps_high=None, dual_clip=None, success_threshold=success_threshold)
    return ClipSpec(eps_low=float(trainer.epsilon_low), eps_high=float(trainer.epsilon_high),
                    dual_clip=getattr(trainer.args, "delta", None), success_threshold=success_threshold)


def objective_name(trainer: Any) -> str:
    """e.g. ``trl:grpo`` or ``trl:grpo+sequence_is`` (GSPO)."""
    name = f"trl:{getattr(trainer, 'loss_type', getattr(trainer.args, 'loss_type', 'unknown'))}"
    if getattr(trainer, "importance_sampling_level", "token") == "sequence":
        name += "+sequence_is"
    return name


def is_on_policy(trainer: Any) -> bool:
    """TRL's own rule (``_generate_and_score_completions``): when each generation batch is consumed within one
    optimizer step, π_θ = π_old at every forward and TRL uses ``old = logp.detach()`` (r ≡ 1)."""
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer.args.gradient_accumulation_steps % generate_every == 0


def on_policy_note(trainer: Any, run: str) -> str | None:
    """What :func:`watch` says once when :func:`is_on_policy` holds for ``trainer``: which columns stay NULL, the
    settings that make ratios exist, and what is still recorded. None for an off-policy schedule."""
    if not is_on_policy(trainer):
        return None
    args = trainer.args
    return (f"collapsewatch: run {run!r} trains on-policy (gradient_accumulation_steps={args.gradient_accumulation_steps} "
            f"is a multiple of steps_per_generation × num_iterations = {args.steps_per_generation} × "
            f"{trainer.num_iterations}): TRL computes no old log-probs, so the importance ratio is 1 by construction "
            "and the ratio and clip columns (ratio_*, clip_*, ppo_kl, llds_gate_rate) stay NULL. For ratios set "
            "num_iterations > 1 or steps_per_generation > gradient_accumulation_steps in GRPOConfig. Still recorded: "
            "entropy, rewards, lengths, zero-std groups, logp_old_* (the LLD detector's input), sentinels, "
            "non-finite counts, grad norm and every TRL scalar.")


def turn_ids_from_tool_mask(completion_mask: Tensor, tool_mask: Tensor | None) -> Tensor | None:
    """(B, T) turn index from TRL's ``tool_mask`` (1 = model token, 0 = tool output); None without tools.

    A turn starts at each model token that follows a non-model token (or opens the completion); tool-output tokens
    carry the turn they follow (kept for display, mask 0); padding is −1.
    """
    if tool_mask is None:
        return None
    model = tool_mask.bool()  # (B, T)
    start = model.clone()
    start[:, 1:] &= ~model[:, :-1]
    turns = (start.long().cumsum(1) - 1).clamp(min=0)  # (B, T)
    return torch.where(completion_mask.bool(), turns, torch.full_like(turns, -1))


def neutralise_missing_rollout_logps(rollout: Tensor, old: Tensor) -> Tensor:
    """(B, T) sampling log-probs with TRL's NaNs (tokens vLLM returned no log-prob for) replaced by ``old``.

    TRL neutralises them itself (``nan_to_num(old − sampling, nan=0)``: importance ratio exactly 1, no correction), so
    they are no fault of the run: stored as ``is_log_ratio = 0`` rather than counted as non-finite values, which would
    raise a critical event. ±inf is not neutralised by TRL (it becomes a huge finite difference) and is kept.
    """
    return torch.where(torch.isnan(rollout), old.to(rollout.dtype), rollout)


class GRPOTap:
    """Holds the wrappers of one trainer and the little state they share. ``monitor()`` returns the open Monitor
    (None before train begins: nothing is observed then)."""

    def __init__(self, trainer: Any, monitor: Callable[[], Any]) -> None:
        self.trainer = trainer
        self.monitor = monitor
        self.on_policy = is_on_policy(trainer)
        self.errors = 0
        self._orig: dict[str, Callable] = {}
        self._pending: dict[str, Any] = {}  # truncation flags / rewards of the generation in flight
        self._capture: list | None = None  # the policy forward's outputs while inside _compute_loss
        self._gen_index = 0
        self.id_floor = 0  # a resumed run: the first sequence id not stored yet (numbering starts at or above it)
        self._gen_step = -1  # state.global_step when the generation being trained on was made
        self._passes: tuple[int, dict[int, int]] = (-1, {})  # (step, id of a micro-batch's inputs -> passes)

    def install(self) -> None:
        for name in WRAPPED:
            self._orig[name] = getattr(self.trainer, name)  # the bound method (or a user's own override)
            setattr(self.trainer, name, getattr(self, f"_wrap{name}"))

    def uninstall(self) -> None:
        for name in self._orig:
            self.trainer.__dict__.pop(name, None)
        self._orig.clear()

    # -- generation side ------------------------------------------------------------------------------
    def _wrap_generate(self, *args: Any, **kwargs: Any) -> Any:
        out = self._orig["_generate"](*args, **kwargs)
        t = self.trainer
        stop = {*(getattr(t, "eos_token_ids", None) or [t._tokenizer.eos_token_id]), t._tokenizer.pad_token_id}
        self._pending["truncated"] = [len(ids) > 0 and int(ids[-1]) not in stop for ids in out[1]]
        return out

    def _wrap_calculate_rewards(self, *args: Any, **kwargs: Any) -> Tensor:
        rewards_per_func = self._orig["_calculate_rewards"](*args, **kwargs)  # (N_global, n_funcs)
        self._pending["rewards_per_func"] = rewards_per_func
        return rewards_per_func

    def _wrap_generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        self._pending.clear()
        out = self._orig["_generate_and_score_completions"](inputs)
        if self.trainer.model.training:
            self._gen_step = self.trainer.state.global_step
            try:
                self._annotate(out)
            except Exception:
                self._failed("annotating a TRL generation batch")
        self._pending.clear()
        return out

    def _annotate(self, out: dict[str, Any]) -> None:
        """Add (B,) sequence id, group id, reward and truncated to TRL's local generation batch."""
        t = self.trainer
        B, dev = out["completion_ids"].shape[0], out["completion_ids"].device
        rank, world = t.accelerator.process_index, t.accelerator.num_processes
        rows = rank * B + torch.arange(B, device=dev)  # global row; TRL groups G consecutive global rows per prompt
        if self.id_floor:  # resumed: skip the generations whose ids the store already holds (ceil division)
            self._gen_index, self.id_floor = max(self._gen_index, -(-self.id_floor // (B * world))), 0
        uid = self._gen_index * B * world + rows  # unique per generated sequence over the run
        out[KEY + "seq_id"] = uid
        out[KEY + "group_id"] = uid // t.num_generations  # B * world is a multiple of G (TRL checks)
        rpf = self._pending.get("rewards_per_func")
        if rpf is not None:  # TRL's logged `reward`: weighted nansum, NaN where no function scored the completion
            reward = (rpf * t.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)
            reward = torch.where(torch.isnan(rpf).all(dim=1), torch.full_like(reward, float("nan")), reward)
            out[KEY + "reward"] = reward[rank * B:(rank + 1) * B].to(dev)
            whole = torch.arange(reward.shape[0], device=reward.device) // t.num_generations  # global groups
            out[KEY + "group_zero_std"] = group_zero_std(whole, reward)[rank * B:(rank + 1) * B].to(dev)
        truncated = self._pending.get("truncated")
        if truncated is not None and len(truncated) == B:
            out[KEY + "truncated"] = torch.tensor(truncated, dtype=torch.bool, device=dev)
        self._gen_index += 1

    # -- loss side -------------------------------------------------------------------------------------
    def _wrap_get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        out = self._orig["_get_per_token_logps_and_entropies"](*args, **kwargs)
        if self._capture is not None and not self._capture:  # the first call inside _compute_loss: the policy
            self._capture.append(out)
        return out

    def _wrap_compute_loss(self, model: Any, inputs: dict[str, Any]) -> Tensor:
        self._capture = []
        try:
            loss = self._orig["_compute_loss"](model, inputs)
        finally:
            captured, self._capture = self._capture, None
        monitor = self.monitor()
        if captured and monitor is not None and self.trainer.model.training:
            try:
                step = self.trainer.state.global_step + 1  # the optimizer step this micro-batch feeds (see above)
                monitor.observe(self.token_batch(inputs, captured[0][0], captured[0][1], step), step)
            except Exception:
                self._failed("observing a TRL micro-batch")
        return loss

    def token_batch(self, inputs: dict[str, Any], logps: Tensor, entropies: Tensor | None, step: int) -> TokenBatch:
        """The TokenBatch of one micro-batch from TRL's inputs and the policy forward's outputs (all (B, T_c))."""
        completion_mask, tool_mask = inputs["completion_mask"], inputs.get("tool_mask")
        logp = logps.detach()  # (B, T) completion tokens only
        old = inputs.get("old_per_token_logps")
        rollout = inputs.get("sampling_per_token_logps")  # vLLM's sampling log-probs, when TRL has them
        # On-policy (told, never inferred: docs/architecture.md, *Glossary*): TRL's own rule for the whole run, or a micro-batch trained within the optimizer
        # step that generated it (no update since). The probe then stores every ratio metric NULL and uses logp as
        # logp_old where TRL computed none, so the likelihood signals (LLD) and is_log_ratio exist on every step.
        on_policy = self.on_policy or self.trainer.state.global_step == self._gen_step
        if rollout is not None:
            rollout = neutralise_missing_rollout_logps(rollout, logp if old is None else old)
        seq_ids = inputs.get(KEY + "seq_id")
        return TokenBatch(
            logp=logp, mask=completion_mask if tool_mask is None else completion_mask * tool_mask,
            logp_old=old, logp_rollout=rollout, logp_ref=inputs.get("ref_per_token_logps"),
            entropy=None if entropies is None else entropies.detach(), advantages=inputs["advantages"],
            token_ids=inputs["completion_ids"], turn_ids=turn_ids_from_tool_mask(completion_mask, tool_mask),
            seq_ids=None if seq_ids is None else self._seq_ids(seq_ids, id(inputs), step), group_ids=inputs.get(KEY + "group_id"),
            rewards=inputs.get(KEY + "reward"), truncated=inputs.get(KEY + "truncated"),
            group_zero_std=inputs.get(KEY + "group_zero_std"), on_policy=on_policy,
        )

    def _seq_ids(self, uid: Tensor, micro_batch: int, step: int) -> Tensor:
        """Sequence ids stay stable across the steps that reuse a rollout (num_iterations > 1, so displacement can
        be followed per sequence). When gradient accumulation outnumbers ``steps_per_generation`` a micro-batch can
        be trained on twice within one optimizer step; its k-th repeat gets ``uid + k · 2**40`` so rows stay unique.
        """
        if self._passes[0] != step:
            self._passes = (step, {})
        k = self._passes[1].get(micro_batch, 0)  # keyed by the buffered inputs dict TRL hands out again (no sync)
        self._passes[1][micro_batch] = k + 1
        return uid + k * REPLAY_STRIDE

    def _failed(self, what: str) -> None:
        self.errors += 1
        if self.errors == 1:  # the monitor never takes the training run down
            log.exception("collapsewatch: failed %s; training continues (further failures are counted)", what)
