"""``turn_ppo``: Turn-PPO of ST-PPO (arXiv 2511.20718) — one importance ratio per model turn, the geometric mean
of the turn's token ratios, shared by the turn's tokens and clipped per turn.

Between ``grpo`` (one ratio per token) and ``gspo`` (one ratio per response): a multi-turn search agent's
response is several turns separated by tool observations, and the turn is the unit the environment acts on.
"""

from __future__ import annotations

from dataclasses import dataclass

from collapsewatch.objectives.gspo import grouped_ratio_clip
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import turn_log_ratio


@dataclass(frozen=True)
class TurnPpoParams:
    """Clip range of the turn ratio. Default ε = 0.2 both sides: the paper's PPO clip parameter (its
    experiments section, as summarised from the paper; the released code, Cloud0723/SORL, could not be read here)."""

    eps_low: float = 0.2
    """w_k is clipped below at 1 − ε_l."""
    eps_high: float = 0.2
    """w_k is clipped above at 1 + ε_h."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.eps_low < 1.0 or self.eps_high < 0.0:
            raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")


@register_objective("turn_ppo", clip_level="turn")
def turn_ppo(inputs: LossInputs, params: TurnPpoParams) -> ObjectiveOutput:
    """ℓ_t = −min(w_t·A, clip(w_t, 1−ε_l, 1+ε_h)·A),  w_t = sg[w_k]·π_θ(y_t)/sg[π_θ(y_t)],  w_k = exp(mean_{t∈k} log r_t)

    Turn-PPO, Li et al., "ST-PPO: Stabilized Off-Policy Proximal Policy Optimization for Multi-Turn Agents"
    (arXiv 2511.20718, turn-level importance sampling, Eq. 4 / Lemma 4.1): the ratio of turn k is the geometric
    mean of its token ratios, every token of the turn carries it, and the clip acts on the turn. Written in the
    GSPO-token form (as ``gspo``): each token keeps the gradient of its own log-prob, so with A constant over a
    turn the summed gradient equals that of the turn-level surrogate (tested), and per-token A also works.
    With one turn per response this is ``gspo`` with ε = 0.2 (tested).
    Not implemented: S-PPO's clipping-bias correction (the paper's Eq. 8) — its formula could not be read from
    a primary source here (only the abstract and third-party summaries were reachable), so it is not guessed.
    Turns and the turn ratio are ``policy_math.turn_log_ratio`` (shared with the probe, whose clip flags for this
    objective are turn-level). Deviation: log w_k is clamped to ±20, like every ratio here.
    """
    return grouped_ratio_clip(inputs, params.eps_low, params.eps_high, "turn_ratio",
                              lambda log_ratio, mask: turn_log_ratio(log_ratio, mask, inputs.turn_ids))
