"""``llds``: Lazy-Likelihood-Displacement Stabilization (arXiv 2512.04220) — GRPO-clip plus a likelihood-
preserving penalty that fires only on A ≥ 0 turns (or responses) whose likelihood went down, and only on the
tokens that went down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from collapsewatch.objectives.grpo import GrpoParams, grpo
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput

Gate = Literal["turn", "response"]


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


def turn_index(eligible: Tensor, turn_ids: Tensor | None) -> Tensor:
    """0-based turn index per token, (B, T) long in [0, T).

    With ``turn_ids`` given they are used as is (contract: 0-based within the row, so < T; negative ids mark
    non-model tokens and are clamped — those tokens are not eligible anyway). Without them a turn is a maximal
    run of eligible tokens, exactly the authors' ``chunk_sums_vectorized``.
    """
    T = eligible.shape[-1]
    if turn_ids is not None:
        return turn_ids.long().clamp(0, T - 1)  # (B, T)
    prev = torch.nn.functional.pad(eligible[:, :-1], (1, 0), value=False)  # (B, T) eligible at t−1
    starts = eligible & ~prev  # (B, T) first token of each run
    return (starts.long().cumsum(dim=-1) - 1).clamp(0, T - 1)  # (B, T)


def llds_gate(displacement: Tensor, eligible: Tensor, turn_ids: Tensor | None, gate: Gate) -> Tensor:
    """g_t = 1 when the token's turn (or response) has Σ (logp_old − logp) > 0 over its eligible tokens. (B, T) bool.

    ``displacement`` is logp_old − logp (detached); ``eligible`` = mask ∧ A ≥ 0.
    """
    disp = displacement * eligible  # (B, T) zero outside A ≥ 0 model tokens
    if gate == "response":
        return (disp.sum(dim=-1, keepdim=True) > 0) & eligible  # (B, T)
    idx = turn_index(eligible, turn_ids)  # (B, T)
    turn_sums = torch.zeros_like(disp).scatter_add_(1, idx, disp)  # (B, T) Σ over each turn, slot = turn index
    return (turn_sums.gather(1, idx) > 0) & eligible  # (B, T)


@register_objective("llds")
def llds(inputs: LossInputs, params: LldsParams) -> ObjectiveOutput:
    """ℓ_t = ℓ_t^GRPO + λ · g_t · max(0, logp_old,t − logp_t);  under token_mean: + λ Σ g·max(0, Δ) / Σ mask

    LLDS, Deng et al., "On Group Relative Policy Optimization Collapse in Agent Search: The Lazy Likelihood-
    Displacement" (arXiv 2512.04220, ICML 2026; equation number not verified). Parity with the authors' verl fork
    (``dp_actor.update_policy``: penalty ``loss_noreduce`` = ``masked_mean(·, response_mask)``) is tested.
    Gate g_t = 1 on tokens of an A ≥ 0 response (zero included, as ``advantages >= 0`` in their code) whose turn
    (A-gate) or whole response (R-gate) has a positive summed displacement Σ(logp_old − logp); no gradient.
    The penalty is meant for ``token_mean`` aggregation (the authors'); other modes weight it like the loss.
    """
    base = grpo(inputs, params.base)
    mask = inputs.float_mask()  # (B, T)
    eligible = (mask > 0) & (inputs.token_advantages() >= 0)  # (B, T) bool
    displacement = inputs.logp_old.detach() - inputs.logp  # (B, T) > 0 where likelihood went down, with grad
    gate = llds_gate(displacement.detach(), eligible, inputs.turn_ids, params.gate)  # (B, T) bool
    penalty = params.lam * gate * torch.relu(displacement)  # (B, T)
    out = dict(base.intermediates)
    out["llds_gate"] = gate
    out["llds_penalty"] = penalty.detach()
    return ObjectiveOutput(loss=base.loss + penalty, intermediates=out)
