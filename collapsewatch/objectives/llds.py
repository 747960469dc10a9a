"""``llds``: Lazy-Likelihood-Displacement Stabilization (arXiv 2512.04220) — GRPO-clip plus a likelihood-
preserving penalty that fires only on A ≥ 0 turns (or responses) whose likelihood went down, and only on the
tokens that went down.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from collapsewatch.objectives.grpo import GrpoParams, grpo
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import Gate, displacement, llds_gate, turn_index

__all__ = ["Gate", "LldsParams", "llds", "llds_gate", "turn_index"]


@dataclass(frozen=True)
class LldsParams:
    """Hyper-parameters of LLDS. Defaults are the authors' run script (``train_grpo_nqhot.sh`` in
    github.com/vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1)."""

    base: GrpoParams = field(default_factory=GrpoParams)
    """The GRPO-clip part. The authors' run used Search-R1's ε = 0.2 both sides and k3 KL β = 0.001
    (``GrpoParams(eps_high=0.2, kl_beta=0.001)``); the collapsewatch GRPO defaults apply here."""
    lam: float = 0.2
    """λ, the penalty weight (``NO_REDUCE_LAMBDA=0.2``)."""
    gate: Gate = "turn"
    """'turn': A-gate, one gate per model turn (``ISCHUNK=true``, the paper's best); 'response': R-gate, one gate
    per whole response."""

    def __post_init__(self) -> None:
        if self.lam < 0.0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        if self.gate not in ("turn", "response"):
            raise ValueError(f"gate must be 'turn' or 'response', got {self.gate!r}")


@register_objective("llds")
def llds(inputs: LossInputs, params: LldsParams) -> ObjectiveOutput:
    """ℓ_t = ℓ_t^GRPO + λ · g_t · max(0, −d_t),  d_t = logp_t − logp_old,t;  under token_mean: + λ Σ g·max(0, −d) / Σ mask

    LLDS, Deng et al., "On Group Relative Policy Optimization Collapse in Agent Search: The Lazy Likelihood-
    Displacement" (arXiv 2512.04220, ICML 2026; equation number not verified). Parity with the authors' verl fork
    (``dp_actor.update_policy``: penalty ``loss_noreduce`` = ``masked_mean(·, response_mask)``) is tested.
    Gate g_t = 1 on tokens of an A ≥ 0 response (zero included, as ``advantages >= 0`` in their code) whose turn
    (A-gate) or whole response (R-gate) has a negative summed displacement Σ d (its likelihood went down); no
    gradient. Sign: d = logp − logp_old everywhere (``policy_math``); the authors write Δ = logp_old − logp = −d.
    The penalty is meant for ``token_mean`` aggregation (the authors'); other modes weight it like the loss.
    """
    base = grpo(inputs, params.base)
    mask = inputs.float_mask()  # (B, T)
    eligible = (mask > 0) & (inputs.token_advantages() >= 0)  # (B, T) bool
    d = displacement(inputs.logp, inputs.logp_old)  # (B, T) < 0 where likelihood went down, with grad
    gate = llds_gate(d.detach(), eligible, inputs.turn_ids, params.gate)  # (B, T) bool
    penalty = params.lam * gate * torch.relu(-d)  # (B, T)
    out = dict(base.intermediates)
    out["llds_gate"] = gate
    out["llds_penalty"] = penalty.detach()
    return ObjectiveOutput(loss=base.loss + penalty, intermediates=out,
                           terms={**base.terms, "loss_penalty": penalty.detach()})
