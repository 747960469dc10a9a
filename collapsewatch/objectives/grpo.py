"""``grpo``: the PPO-clip token objective of GRPO / Search-R1, plus the ratio and clip-flag helpers shared by
every objective built on it (``sapo_search``, ``llds``, ``gspo``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput

LOG_RATIO_CLAMP = 20.0
"""|log r| is clamped to this before exp (DESIGN §4, as verl): r ∈ [e⁻²⁰, e²⁰], the clamp is counted."""


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


def clamped_log_ratio(logp: Tensor, logp_old: Tensor) -> tuple[Tensor, Tensor]:
    """log r = logp − logp_old clamped to ±LOG_RATIO_CLAMP, and the bool map of clamped tokens. Both (B, T)."""
    raw = logp - logp_old.detach()  # (B, T)
    clamped = raw.detach().abs() > LOG_RATIO_CLAMP  # (B, T) bool
    return raw.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), clamped


def clip_flags(ratio: Tensor, adv: Tensor, mask: Tensor, eps_low: float, eps_high: float) -> dict[str, Tensor]:
    """TRL clip semantics (DESIGN §4): clip_low = r < 1−ε_l ∧ A < 0, clip_high = r > 1+ε_h ∧ A > 0. (B, T) bool."""
    on = mask > 0  # (B, T) bool
    r = ratio.detach()
    clip_low = (r < 1.0 - eps_low) & (adv < 0) & on  # (B, T)
    clip_high = (r > 1.0 + eps_high) & (adv > 0) & on  # (B, T)
    return {"clip_low": clip_low, "clip_high": clip_high, "clip_region": clip_low | clip_high}


def ppo_clip_loss(ratio: Tensor, adv: Tensor, eps_low: float, eps_high: float, dual_clip_c: float | None) -> Tensor:
    """−min(r·A, clip(r, 1−ε_l, 1+ε_h)·A), then min(·, −c·A) where A < 0 if dual clip is on. (B, T)."""
    unclipped = -adv * ratio  # (B, T)
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)  # (B, T)
    loss = torch.maximum(unclipped, clipped)  # (B, T)
    if dual_clip_c is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * dual_clip_c), loss)
    return loss


def k3_kl(logp: Tensor, logp_ref: Tensor) -> Tensor:
    """k3 = exp(logp_ref − logp) − (logp_ref − logp) − 1 ≥ 0, Schulman's estimator of KL(π_θ‖π_ref). (B, T)."""
    d = (logp_ref.detach() - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    return torch.exp(d) - d - 1.0


@register_objective("grpo")
def grpo(inputs: LossInputs, params: GrpoParams) -> ObjectiveOutput:
    """ℓ_t = −min(r_t·A, clip(r_t, 1−ε_l, 1+ε_h)·A) + β·k3_t − c_H·H_t,   r_t = exp(logp_t − logp_old,t)

    GRPO, DeepSeekMath (arXiv 2402.03300, Eq. 3) as trained by Search-R1 (arXiv 2503.09516); the asymmetric
    upper bound is DAPO's clip-higher (arXiv 2503.14476, Eq. 10); k3 is DeepSeekMath Eq. 4. Optional dual clip
    for A < 0: ℓ_t ← min(ℓ_t, −c·A) (arXiv 1912.09729, verl ``compute_policy_loss_vanilla``).
    Deviation: log r is clamped to ±20 before exp (no gradient beyond it), as in verl; DeepSeekMath divides by
    |o_i| inside the objective — here that is the aggregation axis (``aggregation.py``), not the objective.
    """
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    loss = ppo_clip_loss(ratio, adv, params.eps_low, params.eps_high, params.dual_clip_c)  # (B, T)
    out = {"log_ratio": log_ratio.detach(), "ratio": ratio.detach(), "log_ratio_clamped": clamped & (mask > 0)}
    out.update(clip_flags(ratio, adv, mask, params.eps_low, params.eps_high))
    if params.dual_clip_c is not None:
        out["dual_clip"] = (ratio.detach() > params.dual_clip_c) & (adv < 0) & (mask > 0)
    if params.kl_beta > 0.0:
        if inputs.logp_ref is None:
            raise ValueError("grpo: kl_beta > 0 needs LossInputs.logp_ref")
        kl = k3_kl(inputs.logp, inputs.logp_ref)  # (B, T)
        loss = loss + params.kl_beta * kl
        out["kl_ref_k3"] = kl.detach()
    if params.entropy_coef > 0.0:
        if inputs.entropy is None:
            raise ValueError("grpo: entropy_coef > 0 needs LossInputs.entropy")
        loss = loss - params.entropy_coef * inputs.entropy
    return ObjectiveOutput(loss=loss, intermediates=out)
