"""``bapo``: BAlanced Policy Optimization with adaptive clipping (arXiv 2510.18927) — PPO-clip whose bounds are
searched each step until the positive-advantage side of the clipped surrogate outweighs the negative side by a
target, and the pos/neg balance that search measures (``pos_neg_balance``, one home, usable for any clip range).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.grpo import ppo_clip_loss
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import clamped_log_ratio, clip_flags


@dataclass(frozen=True)
class BapoParams:
    """Search of the clip bounds. Defaults are the released code's recipe config
    (WooooDyy/BAPO ``recipe/bapo/config/bapo_trainer.yaml`` and ``config.py``, commit 7287044444d5). The bounds are
    ratio bounds (c_low = 0.6 clips r below at 0.6), not ε. Where the paper/README differ, see ``bapo``'s docstring."""

    target: float = 1.0
    """``adv_ratio_target``: the search stops once Σ positive / Σ negative contribution ≥ target. The yaml's 1.0 is
    the README's ρ₀ = 0.5 written as pos/neg; the repo's ``run_bapo_example.sh`` passes 0.5 (a pos share of 1/3)."""
    lower_start: float = 0.6
    """a⁻, the first lower bound tried (``ratio_lower_start``)."""
    lower_max: float = 0.8
    """b⁻, the highest lower bound (``ratio_lower_max``; the README/paper range is [0.6, 0.9])."""
    lower_step: float = 0.05
    """Increment of the lower bound (``ratio_lower_step``)."""
    upper_start: float = 1.2
    """a⁺, the first upper bound tried (``ratio_upper_start``)."""
    upper_max: float = 2.0
    """b⁺, the highest upper bound (``ratio_upper_max``; the README/paper range is [1.2, 3.0])."""
    upper_step: float = 0.05
    """Increment of the upper bound (``ratio_upper_step``)."""
    dual_clip_c: float | None = 3.0
    """Dual clip for A < 0; the released loss always applies ``clip_ratio_c`` (verl's default 3.0). None: off."""
    eps: float = 1e-8
    """Added to Σ negative before dividing (``eps``)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.lower_start <= self.lower_max <= 1.0:
            raise ValueError(f"need 0 < lower_start <= lower_max <= 1, got {self.lower_start}, {self.lower_max}")
        if not 1.0 <= self.upper_start <= self.upper_max:
            raise ValueError(f"need 1 <= upper_start <= upper_max, got {self.upper_start}, {self.upper_max}")
        if self.lower_step < 0.0 or self.upper_step < 0.0 or self.target < 0.0 or self.eps < 0.0:
            raise ValueError("lower_step, upper_step, target and eps must be >= 0")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1.0:
            raise ValueError(f"dual_clip_c must be > 1 (or None), got {self.dual_clip_c}")


def bound_schedule(p: BapoParams) -> list[tuple[float, float]]:
    """The (c_low, c_high) pairs the released search visits, in order: raise c_low to its max, then c_high.

    Floats are accumulated exactly as the released loop does (``min(cur + step, max)``), so the bounds match it
    bit for bit.
    """
    low, high = p.lower_start, p.upper_start
    out = [(low, high)]
    while low < p.lower_max and p.lower_step > 0:
        low = min(low + p.lower_step, p.lower_max)
        out.append((low, high))
    while high < p.upper_max and p.upper_step > 0:
        high = min(high + p.upper_step, p.upper_max)
        out.append((low, high))
    return out


def pos_neg_balance(ratio: Tensor, adv: Tensor, mask: Tensor, low: Tensor, high: Tensor) -> tuple[Tensor, Tensor]:
    """(Σ positive, Σ negative) contributions of the clipped surrogate, each (C,) for C candidate bound pairs.

    Contribution of a token: r̃·A·m with r̃ = min(r, c_high) where A ≥ 0 and max(r, c_low) where A < 0 (the
    clipped ratio's value on the side that can clip; BAPO's ``_compute_effective_advantage``). ``ratio``, ``adv``,
    ``mask`` are (B, T), detached; ``low`` / ``high`` are (C,). Summed over this batch; all-reduced over ranks when
    torch.distributed is initialised, as the released code does, so every rank picks the same bounds.
    """
    r = ratio.unsqueeze(0)  # (1, B, T)
    lo, hi = low.view(-1, 1, 1), high.view(-1, 1, 1)  # (C, 1, 1)
    eff = torch.where(adv.unsqueeze(0) >= 0, torch.minimum(r, hi), torch.maximum(r, lo))  # (C, B, T)
    contrib = eff * (adv * mask).unsqueeze(0)  # (C, B, T)
    stats = torch.stack([contrib.clamp(min=0).sum(dim=(1, 2)), (-contrib.clamp(max=0)).sum(dim=(1, 2))])  # (2, C)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(stats, op=torch.distributed.ReduceOp.SUM)
    return stats[0], stats[1]


def pos_neg_ratio(pos: Tensor, neg: Tensor, eps: float) -> Tensor:
    """Σ positive / (Σ negative + eps); +inf when there is no negative contribution (as the released code)."""
    return torch.where(neg <= 0, torch.full_like(pos, float("inf")), pos / (neg + eps))


def step_contributions(out: ObjectiveOutput, adv: Tensor, mask: Tensor, eps_low: float | None,
                       eps_high: float | None) -> Tensor:
    """(2,) [Σ positive, Σ negative] of any objective's clipped surrogate, for the step metric ``pos_neg_balance``.

    The ratio is the one the objective clips (``turn_ratio`` of turn_ppo, ``seq_ratio`` of gspo/sampo, else the
    token ``ratio``); the bounds are the ones it used (BAPO's chosen pair, else 1 − ε_l / 1 + ε_h, else none: an
    objective without a clip is measured on its unclipped ratio). ``adv`` (B,) or (B, T), ``mask`` (B, T).
    Sum it over the micro-batches of a step, then divide (``pos_neg_ratio``): BAPO's balance for every objective.
    """
    inter = out.intermediates
    ratio = next(inter[k] for k in ("turn_ratio", "seq_ratio", "ratio") if k in inter)  # (B, T)
    adv = (adv if adv.dim() == 2 else adv.unsqueeze(-1).expand_as(ratio)).to(ratio.dtype)  # (B, T)
    if "bapo_clip_low" in inter:
        low, high = inter["bapo_clip_low"][:1, 0], inter["bapo_clip_high"][:1, 0]  # (1,), (1,)
    else:
        low = ratio.new_tensor([0.0 if eps_low is None else 1.0 - eps_low])  # (1,)
        high = ratio.new_tensor([float("inf") if eps_high is None else 1.0 + eps_high])  # (1,)
    pos, neg = pos_neg_balance(ratio, adv, mask.to(ratio.dtype), low, high)  # (1,), (1,)
    return torch.cat([pos, neg])  # (2,)


@register_objective("bapo")
def bapo(inputs: LossInputs, params: BapoParams) -> ObjectiveOutput:
    """ℓ_t = −min(r_t·A, clip(r_t, c_low, c_high)·A) (dual clip for A < 0),  (c_low, c_high) = first pair of the
    search with  Σ_{A≥0} min(r, c_high)·A  /  Σ_{A<0} max(r, c_low)·|A|  ≥  target, else the last pair

    BAPO, Xi et al. (arXiv 2510.18927, adaptive clipping; equation/algorithm number not verified), as released in
    WooooDyy/BAPO ``recipe/bapo/policy_loss.py`` (commit 7287044444d5; parity tested): bounds start at
    (a⁻, a⁺); c_low rises by its step to b⁻ first, and only then c_high rises by its step to b⁺, stopping at the
    first pair that meets the target. Chosen once per call (per micro-batch, as verl calls the loss), with one
    vectorised evaluation of every candidate pair and no host sync.
    Differences from the paper as its README states it: the README's target ρ₀ = 0.5 is the positive *share* of
    the loss and its ranges are [0.6, 0.9] and [1.2, 3.0]; the code compares pos/neg (so 1.0 ≙ share 0.5), ships
    [0.6, 0.8] and [1.2, 2.0], raises c_low before c_high, and adds verl's dual clip c = 3. The code's version
    is the default here. A property of the code's measure worth knowing: a token clipped at c_low still counts,
    at max(r, c_low)·|A|, so raising c_low can only *raise* Σ negative — whenever the start pair misses the target,
    c_low walks to b⁻ without helping and c_high does the balancing (hand test). The paper's intent for c_low
    (drop low-probability negative tokens from the gradient) shows in the loss, not in the search.
    Deviation: none beyond the ±20 log-ratio clamp both share.
    """
    mask = inputs.float_mask()  # (B, T)
    adv = inputs.token_advantages()  # (B, T)
    log_ratio, clamped = clamped_log_ratio(inputs.logp, inputs.logp_old)  # (B, T), (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    pairs = torch.tensor(bound_schedule(params), dtype=torch.float64, device=ratio.device)  # (C, 2) exact floats
    low, high = pairs[:, 0].to(ratio.dtype), pairs[:, 1].to(ratio.dtype)  # (C,), (C,)
    pos, neg = pos_neg_balance(ratio.detach(), adv.detach(), mask, low, high)  # (C,), (C,)
    balance = pos_neg_ratio(pos, neg, params.eps)  # (C,)
    met = balance >= params.target  # (C,) bool
    # First pair that meets the target, else the last pair (the search ran out of room): argmax of a bool picks
    # the first True; with none True it is 0, so fall back explicitly.
    pick = torch.where(met.any(), met.to(torch.int64).argmax(), torch.tensor(len(met) - 1, device=met.device))
    c_low, c_high = pairs[pick, 0], pairs[pick, 1]  # () float64
    eps_low, eps_high = (1.0 - c_low).to(ratio.dtype), (c_high - 1.0).to(ratio.dtype)  # () as ε for the clip
    loss = ppo_clip_loss(ratio, adv, eps_low, eps_high, params.dual_clip_c)  # (B, T)
    out = {"log_ratio": log_ratio.detach(), "ratio": ratio.detach(), "log_ratio_clamped": clamped & (mask > 0)}
    out.update(clip_flags(ratio, adv, mask, eps_low, eps_high, params.dual_clip_c))
    # Per-step scalars, broadcast (no copy) to the (B, T) shape every intermediate has.
    bounds = {"bapo_clip_low": c_low.to(ratio.dtype), "bapo_clip_high": c_high.to(ratio.dtype)}  # () each
    out.update({name: v.expand_as(ratio) for name, v in bounds.items()})
    out["bapo_pos_neg_ratio"] = balance[pick].expand_as(ratio)
    return ObjectiveOutput(loss=loss, intermediates=out, terms={"loss_policy": loss.detach()}, scalars=bounds)
