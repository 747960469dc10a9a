"""``sapo_soft``: Qwen's Soft Adaptive Policy Optimization (arXiv 2511.20347) — a sigmoid soft gate on the token
ratio instead of a hard clip. Not the search-agent ``sapo_search``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import clamped_log_ratio


@dataclass(frozen=True)
class SapoSoftParams:
    """Temperatures of the soft gate; defaults are the paper's recommendation (also TRL's and ms-swift's)."""

    tau_pos: float = 1.0
    """τ for A > 0 tokens."""
    tau_neg: float = 1.05
    """τ for A ≤ 0 tokens; τ_neg > τ_pos decays negative-advantage gradients faster (the paper's advice)."""

    def __post_init__(self) -> None:
        if self.tau_pos <= 0.0 or self.tau_neg <= 0.0:
            raise ValueError(f"tau_pos and tau_neg must be > 0, got {self.tau_pos}, {self.tau_neg}")


@register_objective("sapo_soft", aggregation="seq_mean_token_mean")
def sapo_soft(inputs: LossInputs, params: SapoSoftParams) -> ObjectiveOutput:
    """ℓ_t = −f(r_t)·A,   f(r) = (4/τ)·σ(τ(r − 1)),   τ = τ_pos if A > 0 else τ_neg

    SAPO, Soft Adaptive Policy Optimization (Qwen, arXiv 2511.20347; the soft-gate objective, equation number
    not verified). f(1) = 2/τ and f'(1) = 1, so on-policy tokens get the plain policy gradient and the gate
    decays it smoothly as r leaves 1. Parity with TRL 1.16 ``loss_type="sapo"`` is tested.
    Default aggregation: the paper's sequence mean of token means (``seq_mean_token_mean``).
    Deviation: log r is clamped to ±20 before exp (TRL does not clamp).
    """
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    tau = torch.where(adv > 0, params.tau_pos, params.tau_neg).to(ratio.dtype)  # (B, T)
    soft_gate = torch.sigmoid(tau * (ratio - 1.0)) * 4.0 / tau  # (B, T) f(r)
    out = {
        "log_ratio": log_ratio.detach(),
        "ratio": ratio.detach(),
        "log_ratio_clamped": clamped & (mask > 0),
        "soft_gate": soft_gate.detach(),
    }
    loss = -soft_gate * adv  # (B, T)
    return ObjectiveOutput(loss=loss, intermediates=out, terms={"loss_policy": loss.detach()})
