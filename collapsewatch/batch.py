"""TokenBatch: the one typed batch of collapsewatch — what an objective trains on and what the probe observes.

Shapes: B sequences, T tokens per row (responses, or prompt+response with mask 0 on the prompt).
Only ``logp`` and ``mask`` are required; every other field is optional and the metrics that need it
are NULL when it is absent. Objectives take the same type (``objectives.LossInputs`` is this class) and
require ``logp_old`` and ``advantages`` (``require``); one validator (``__post_init__``) checks every shape.

``on_policy`` is *told* by the trainer, never inferred from log-probs (docs/architecture.md, *Glossary*): True on a mini-batch
trained before any update since its rollout (π_θ = π_old). Then every ratio-derived metric is NULL and
``logp`` stands in for ``logp_old`` when that is absent, so the likelihood signals (LLD) exist on every step.
None (not told) = the ratio metrics are computed from ``logp_old`` when given.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import Tensor

_TOKEN_FIELDS = ("logp", "mask", "logp_old", "logp_rollout", "logp_ref", "entropy", "token_ids", "turn_ids")
_SEQ_FIELDS = ("seq_ids", "group_ids", "rewards", "truncated", "group_zero_std", "tool_calls")


@dataclass
class TokenBatch:
    logp: Tensor                        # (B, T) log π_θ(y_t), the latest forward (with grad for an objective)
    mask: Tensor                        # (B, T) 1 on trained model tokens; 0 on prompt, pad, tool observation
    logp_old: Tensor | None = None      # (B, T) log π_old(y_t), rollout policy recomputed by the trainer
    logp_rollout: Tensor | None = None  # (B, T) log-prob reported by the inference engine
    logp_ref: Tensor | None = None      # (B, T) frozen reference model
    entropy: Tensor | None = None       # (B, T) entropy of softmax(logits / temperature), nats (grad: entropy bonus)
    advantages: Tensor | None = None    # (B,) per sequence, or (B, T) per token
    token_ids: Tensor | None = None     # (B, T) sampled token ids
    turn_ids: Tensor | None = None      # (B, T) turn index of each token (a turn = model tokens between tools)
    seq_ids: Tensor | None = None       # (B,) sequence id, unique within the step (default: running index)
    group_ids: Tensor | None = None     # (B,) prompt/group id (G responses per prompt)
    rewards: Tensor | None = None       # (B,)
    truncated: Tensor | None = None     # (B,) bool: response hit the length budget
    group_zero_std: Tensor | None = None  # (B,) bool: all G responses of this sequence's group (the whole group,
    #                                       not only the members in this batch) got the same reward
    tool_calls: Tensor | None = None    # (B,) valid tool calls the response made (an agent's searches); None: no tool
    on_policy: bool | None = None       # told by the trainer: no update since this batch's rollout (r ≡ 1)

    def __post_init__(self) -> None:
        for f in fields(self):  # numpy arrays become tensors (sharing their memory), here once for every caller
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                setattr(self, f.name, from_numpy(f"TokenBatch.{f.name}", value))
        for name in ("logp", "mask"):
            value = getattr(self, name)
            if not isinstance(value, Tensor):
                raise TypeError(f"TokenBatch.{name} must be a torch.Tensor, got {type(value).__name__}")
        if self.logp.dim() != 2:
            raise ValueError(f"TokenBatch.logp must be (B, T); got shape {tuple(self.logp.shape)}")
        shape = tuple(self.logp.shape)
        wrong = []
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if value is not None and tuple(value.shape) != shape:
                wrong.append(f"{name} {tuple(value.shape)}")
        for name in _SEQ_FIELDS:
            value = getattr(self, name)
            if value is not None and tuple(value.shape) != shape[:1]:
                wrong.append(f"{name} {tuple(value.shape)} (expected ({shape[0]},))")
        adv = self.advantages
        if adv is not None and tuple(adv.shape) not in (shape[:1], shape):
            wrong.append(f"advantages {tuple(adv.shape)} (expected ({shape[0]},) or {shape})")
        if wrong:
            raise ValueError(f"TokenBatch shapes disagree with logp {shape}: " + ", ".join(wrong))
        if self.on_policy is not None and not isinstance(self.on_policy, bool):
            raise TypeError(f"TokenBatch.on_policy must be True, False or None, got {self.on_policy!r}")

    def require(self, *names: str, who: str) -> None:
        """Raise a ValueError naming ``who`` and the missing fields unless every field in ``names`` is set."""
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{who} needs TokenBatch.{' and TokenBatch.'.join(missing)}")

    def token_advantages(self) -> Tensor:
        """Advantages broadcast to tokens, (B, T), in logp's dtype (``require('advantages')`` first)."""
        adv = self.advantages.to(self.logp.dtype)
        return adv if adv.dim() == 2 else adv.unsqueeze(-1).expand_as(self.logp)  # (B, T)

    def float_mask(self) -> Tensor:
        """The loss mask as 0/1 floats in logp's dtype, (B, T)."""
        return self.mask.to(self.logp.dtype)  # (B, T)

    @property
    def device(self) -> torch.device:
        return self.logp.device

    def detached(self) -> TokenBatch:
        """A copy whose tensors are detached (no autograd graph is kept alive by the monitor)."""
        kwargs = {}
        for f in fields(self):
            v = getattr(self, f.name)
            kwargs[f.name] = v.detach() if isinstance(v, Tensor) else v
        return TokenBatch(**kwargs)


def from_numpy(name: str, value: np.ndarray) -> Tensor:
    """``value`` as a tensor sharing its memory; a dtype torch has no equivalent of is refused naming ``name``."""
    try:
        return torch.from_numpy(np.ascontiguousarray(value))
    except TypeError as e:
        raise TypeError(f"{name} is a numpy array of dtype {value.dtype}, which has no torch equivalent; pass numbers "
                        "or a tensor") from e


def _tensor(name: str, value: Any) -> Tensor:
    if isinstance(value, np.ndarray):
        return from_numpy(name, value)
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a numpy array, got {type(value).__name__}")
    return value


def group_zero_std(group_ids: Tensor | np.ndarray, rewards: Tensor | np.ndarray) -> Tensor:
    """(B,) bool for ``TokenBatch.group_zero_std``: the sequence's group carries no learning signal — every member with
    a reward got the same one. NaN rewards (unscored: a TRL reward function returned None) are left out, so a group
    with fewer than two scored rewards has no signal either (TRL gives its members advantage 0).

    Call it on the *whole* rollout (all G responses of each prompt) before splitting into mini-batches. numpy arrays
    are taken as they are by ``TokenBatch``.
    """
    group_ids, rewards = _tensor("group_zero_std: group_ids", group_ids), _tensor("group_zero_std: rewards", rewards)
    if group_ids.shape != rewards.shape or group_ids.dim() != 1:
        raise ValueError(f"group_zero_std: group_ids {tuple(group_ids.shape)} and rewards {tuple(rewards.shape)} "
                         "must both be (B,)")
    _, inv = torch.unique(group_ids, return_inverse=True)
    n = int(inv.max()) + 1 if inv.numel() else 0
    r = rewards.double()
    scored = ~torch.isnan(r)  # (B,)
    hi = torch.full((n,), -torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, inv, torch.where(scored, r, -torch.inf), "amax")
    lo = torch.full((n,), torch.inf, dtype=r.dtype, device=r.device).scatter_reduce(
        0, inv, torch.where(scored, r, torch.inf), "amin")
    n_scored = torch.zeros(n, dtype=r.dtype, device=r.device).index_add(0, inv, scored.to(r.dtype))
    return ((hi == lo) | (n_scored < 2))[inv]
