"""``gspo``: Group Sequence Policy Optimization (arXiv 2507.18071) — one length-normalised importance ratio per
sequence, clipped with a very small ε, written in the token form GSPO-token so per-token advantages also work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.grpo import ppo_clip_loss
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import clamped_log_ratio, clip_flags, sequence_log_ratio


@dataclass(frozen=True)
class GspoParams:
    """Clip range of the sequence ratio; defaults are the paper's (Eq. 5 left/right ranges 3e-4 and 4e-4)."""

    eps_low: float = 3e-4
    """s is clipped below at 1 − ε_l."""
    eps_high: float = 4e-4
    """s is clipped above at 1 + ε_h."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.eps_low < 1.0 or self.eps_high < 0.0:
            raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")


@register_objective("gspo", aggregation="seq_mean_token_mean", clip_level="sequence")
def gspo(inputs: LossInputs, params: GspoParams) -> ObjectiveOutput:
    """ℓ_t = −min(s_t·A, clip(s_t, 1−ε_l, 1+ε_h)·A),  s_t = sg[s_i]·π_θ(y_t)/sg[π_θ(y_t)],  s_i = exp(mean_mask log r)

    GSPO (Qwen, arXiv 2507.18071, Eq. 5 with the GSPO-token ratio): every token carries the value of its
    sequence's geometric-mean ratio s_i but the gradient of its own log-prob, so with a per-sequence A the
    gradient equals sequence-level GSPO. Its default aggregation is the paper's ``seq_mean_token_mean`` (verl forces
    it); that pairing matches TRL's ``importance_sampling_level="sequence"`` (tested). Deviation: mean log r is
    clamped to ±20 (verl clamps log s at 10 from above only). The clip flags are sequence-level (s_i against
    ε_l, ε_h, broadcast to the sequence's tokens); the probe computes the same ones (``clip_level="sequence"``).
    """
    return grouped_ratio_clip(inputs, params.eps_low, params.eps_high, "seq_ratio",
                              lambda log_ratio, mask: sequence_log_ratio(log_ratio, mask).unsqueeze(-1))


def grouped_ratio_clip(inputs: LossInputs, eps_low: float, eps_high: float, name: str,
                       group_log_ratio: Callable[[Tensor, Tensor], Tensor]) -> ObjectiveOutput:
    """PPO-clip on a ratio shared by a group of tokens (a sequence: ``gspo``; a turn: ``turn_ppo``), GSPO-token
    form: every token carries the value of its group's ratio w but the gradient of its own log-prob.
    ``group_log_ratio(log_ratio (B, T), mask (B, T))`` gives log w, broadcastable to (B, T); the clip flags are the
    group's (w against ε_l, ε_h), per token; ``name`` is the intermediate that holds w."""
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    log_w = group_log_ratio(log_ratio, mask).detach()  # (B, T) or (B, 1): value of the group's log ratio
    w = torch.exp(inputs.logp - inputs.logp.detach() + log_w)  # (B, T) value w, gradient of its own log-prob
    loss = ppo_clip_loss(w, adv, eps_low, eps_high, dual_clip_c=None)  # (B, T)
    out = {
        "log_ratio": log_ratio.detach(),
        "ratio": torch.exp(log_ratio).detach(),
        "log_ratio_clamped": clamped & (mask > 0),
        name: w.detach(),
    }
    out.update(clip_flags(w, adv, mask, eps_low, eps_high))  # group-level flags, per token
    return ObjectiveOutput(loss=loss, intermediates=out, terms={"loss_policy": loss.detach()})
