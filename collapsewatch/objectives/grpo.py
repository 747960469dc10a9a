"""``grpo``: the PPO-clip token objective of GRPO / Search-R1, and the PPO-clip / k3 helpers of the objectives
built on it (``sapo_search``, ``llds``, ``gspo``). The ratio, its clamp and the clip flags live in
:mod:`collapsewatch.policy_math` (shared with the probe) and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import LOG_RATIO_CLAMP, clamped_log_ratio, clip_flags, k3_kl

__all__ = ["LOG_RATIO_CLAMP", "GrpoParams", "clamped_log_ratio", "clip_flags", "grpo", "k3_kl", "ppo_clip_loss"]


@dataclass(frozen=True)
class GrpoParams:
    """Hyper-parameters of the PPO-clip token objective."""

    eps_low: float = 0.2
    """ε_l: r is clipped below at 1 − ε_l (PPO, arXiv 1707.06347; Search-R1 uses 0.2)."""
    eps_high: float = 0.28
    """ε_h: r is clipped above at 1 + ε_h; 0.28 is DAPO's clip-higher (arXiv 2503.14476, Eq. 10)."""
    dual_clip_c: float | None = None
    """Dual-clip bound c > 1: for A < 0 the loss is capped at −c·A (arXiv 1912.09729; verl ``clip_ratio_c``,
    e.g. 3.0). None turns it off."""
    kl_beta: float = 0.0
    """β of the k3 KL to the reference model (DeepSeekMath Eq. 4; Search-R1 uses 0.001). > 0 needs ``logp_ref``."""
    entropy_coef: float = 0.0
    """Entropy-bonus coefficient c_H (the loss subtracts c_H·H_t). > 0 needs ``entropy``."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.eps_low < 1.0:
            raise ValueError(f"eps_low must be in [0, 1), got {self.eps_low}")
        if self.eps_high < 0.0:
            raise ValueError(f"eps_high must be >= 0, got {self.eps_high}")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1.0:
            raise ValueError(f"dual_clip_c must be > 1 (or None), got {self.dual_clip_c}")
        if self.kl_beta < 0.0 or self.entropy_coef < 0.0:
            raise ValueError(f"kl_beta and entropy_coef must be >= 0, got {self.kl_beta}, {self.entropy_coef}")


def ppo_clip_loss(ratio: Tensor, adv: Tensor, eps_low: float, eps_high: float, dual_clip_c: float | None) -> Tensor:
    """−min(r·A, clip(r, 1−ε_l, 1+ε_h)·A), then min(·, −c·A) where A < 0 if dual clip is on. (B, T)."""
    unclipped = -adv * ratio  # (B, T)
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)  # (B, T)
    loss = torch.maximum(unclipped, clipped)  # (B, T)
    if dual_clip_c is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * dual_clip_c), loss)
    return loss


@register_objective("grpo")
def grpo(inputs: LossInputs, params: GrpoParams) -> ObjectiveOutput:
    """ℓ_t = −min(r_t·A, clip(r_t, 1−ε_l, 1+ε_h)·A) + β·k3_t − c_H·H_t,   r_t = exp(logp_t − logp_old,t)

    GRPO, DeepSeekMath (arXiv 2402.03300, Eq. 3) as trained by Search-R1 (arXiv 2503.09516); the asymmetric
    upper bound is DAPO's clip-higher (arXiv 2503.14476, Eq. 10); k3 is DeepSeekMath Eq. 4. Optional dual clip
    for A < 0: ℓ_t ← min(ℓ_t, −c·A) (arXiv 1912.09729, verl ``compute_policy_loss_vanilla``).
    Deviation: log r is clamped to ±20 before exp (no gradient beyond it), as in verl; DeepSeekMath divides by
    |o_i| inside the objective — here that is the aggregation axis (``aggregation.py``), not the objective; the
    default aggregation is token_mean, as Search-R1's verl and DAPO train it.
    The entropy bonus differentiates through ``inputs.entropy``: the trainer must pass it with its graph.
    Terms: ``loss_policy`` (the clip term), ``loss_kl`` (β·k3), ``loss_entropy`` (−c_H·H).
    """
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    policy = ppo_clip_loss(ratio, adv, params.eps_low, params.eps_high, params.dual_clip_c)  # (B, T)
    out = {"log_ratio": log_ratio.detach(), "ratio": ratio.detach(), "log_ratio_clamped": clamped & (mask > 0)}
    out.update(clip_flags(ratio, adv, mask, params.eps_low, params.eps_high, params.dual_clip_c))
    terms = {"loss_policy": policy.detach()}
    loss = policy
    if params.kl_beta > 0.0:
        inputs.require("logp_ref", who="grpo with kl_beta > 0")
        kl = k3_kl(inputs.logp, inputs.logp_ref)  # (B, T)
        loss = loss + params.kl_beta * kl
        out["kl_ref_k3"] = kl.detach()
        terms["loss_kl"] = (params.kl_beta * kl).detach()
    if params.entropy_coef > 0.0:
        inputs.require("entropy", who="grpo with entropy_coef > 0")
        loss = loss - params.entropy_coef * inputs.entropy
        terms["loss_entropy"] = (-params.entropy_coef * inputs.entropy).detach()
    return ObjectiveOutput(loss=loss, intermediates=out, terms=terms)
