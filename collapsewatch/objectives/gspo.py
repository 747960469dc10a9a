"""``gspo``: Group Sequence Policy Optimization (arXiv 2507.18071) — one length-normalised importance ratio per
sequence, clipped with a very small ε, written in the token form GSPO-token so per-token advantages also work.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    seq_log_ratio = sequence_log_ratio(log_ratio, mask)  # (B,)
    log_s = inputs.logp - inputs.logp.detach() + seq_log_ratio.detach().unsqueeze(-1)  # (B, T) value log s_i
    s = torch.exp(log_s)  # (B, T)
    loss = ppo_clip_loss(s, adv, params.eps_low, params.eps_high, dual_clip_c=None)  # (B, T)
    out = {
        "log_ratio": log_ratio.detach(),
        "ratio": torch.exp(log_ratio).detach(),
        "log_ratio_clamped": clamped & (mask > 0),
        "seq_ratio": s.detach(),
    }
    out.update(clip_flags(s, adv, mask, params.eps_low, params.eps_high))  # sequence-level flags, per token
    return ObjectiveOutput(loss=loss, intermediates=out, terms={"loss_policy": loss.detach()})
