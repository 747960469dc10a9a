"""``sapo_search``: Search Agent Policy Optimization (arXiv 2603.10069) — GRPO-clip plus a conditional token-level
KL(π_old‖π_θ) penalty on positive-advantage tokens whose ratio has fallen. Not Qwen's soft-gate ``sapo_soft``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from collapsewatch.objectives.grpo import GrpoParams, grpo
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import displacement

Denominator = Literal["positive_tokens", "loss_tokens"]


@dataclass(frozen=True)
class SapoSearchParams:
    """Hyper-parameters of SAPO (search agent). The paper's values of w and τ could not be retrieved here (only
    its abstract and a transcription of its one-line code were reachable), so w and τ are collapsewatch defaults."""

    base: GrpoParams = field(default_factory=GrpoParams)
    """The GRPO-clip part. The paper builds on Search-R1, whose defaults are ε = 0.2 both sides and k3 KL
    β = 0.001; here the collapsewatch GRPO defaults apply so that objectives differ only by their penalty."""
    w: float = 0.2
    """Penalty weight w. collapsewatch default, NOT from the paper: the same per-token gradient scale as LLDS's
    λ = 0.2, so the two regularisers compare at equal strength."""
    tau: float = 0.8
    """Ratio threshold τ: the penalty acts on A ≥ 0 tokens with r ≤ τ. collapsewatch default, NOT from the paper:
    1 − ε_l, the lower clip bound that PPO never enforces for A > 0 (the ISDD blind spot). Must be in (0, 1]
    (above 1, −log r < 0 would turn the penalty into a bonus)."""
    denominator: Denominator = "positive_tokens"
    """'positive_tokens' (paper): mean over {A ≥ 0, mask} of this micro-batch, so the per-token loss is rescaled by
    Σmask / Σ(mask·1[A≥0]) and is exact under ``token_mean`` aggregation of the same micro-batch, but not
    invariant to how a batch is split into micro-batches. 'loss_tokens': no rescale, the aggregation's own
    denominator applies (accumulation-invariant; a deliberate deviation whose effective weight is w × the share of
    A ≥ 0 tokens)."""

    def __post_init__(self) -> None:
        if self.w < 0.0:
            raise ValueError(f"w must be >= 0, got {self.w}")
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if self.denominator not in ("positive_tokens", "loss_tokens"):
            raise ValueError(f"denominator must be 'positive_tokens' or 'loss_tokens', got {self.denominator!r}")


@register_objective("sapo_search")
def sapo_search(inputs: LossInputs, params: SapoSearchParams) -> ObjectiveOutput:
    """ℓ_t = ℓ_t^GRPO + w · [−log r_t · 1(r_t ≤ τ)] on {A ≥ 0, mask}, averaged over those tokens

    SAPO, "Improving Search Agent with One Line of Code" (arXiv 2603.10069; equation number not verified): the
    one-line change to verl's ``compute_policy_loss`` adds ``w · −masked_mean(log(r).masked_fill(r > t, 0)[A ≥ 0],
    mask[A ≥ 0])``. −log r = log π_old − log π_θ is the single-sample KL(π_old‖π_θ) term; gradient −w per
    penalised token, so a fallen positive token is pulled back however small r gets (the clip never does).
    A ≥ 0 includes zero, as ``advantages[:, 0] >= 0`` in the paper's code. With ``denominator='positive_tokens'``
    the penalty is rescaled so that ``token_mean`` aggregation reproduces the paper's mean over A ≥ 0 tokens.
    """
    base = grpo(inputs, params.base)
    mask = inputs.float_mask()  # (B, T)
    log_ratio = base.intermediates["log_ratio"]  # (B, T) detached, clamped to ±20
    penalised = (inputs.token_advantages() >= 0) & (mask > 0) & (log_ratio.exp() <= params.tau)  # (B, T) bool
    # Unclamped on purpose: −log r is linear in logp, and a token far below e⁻²⁰ is exactly the one to pull back.
    kl_old = -displacement(inputs.logp, inputs.logp_old)  # (B, T) −log r, with grad
    penalty = params.w * kl_old * penalised  # (B, T)
    if params.denominator == "positive_tokens":
        positive = ((inputs.token_advantages() >= 0) * mask).sum()  # () A ≥ 0 loss tokens
        # No A ≥ 0 token: the paper's masked mean is 0/0; the penalty is then empty, so its mean is taken as 0.
        penalty = penalty * (mask.sum() / positive.clamp(min=1.0)).detach()
    out = dict(base.intermediates)
    out["sapo_penalty_mask"] = penalised
    out["sapo_penalty"] = penalty.detach()
    return ObjectiveOutput(loss=base.loss + penalty, intermediates=out,
                           terms={**base.terms, "loss_penalty": penalty.detach()})
