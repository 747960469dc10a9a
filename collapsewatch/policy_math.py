"""The policy-change quantities shared by the objectives and the probe, defined once.

    displacement   d_t = logp_t − logp_old,t            negative = the token's likelihood went down (this sign
                                                         everywhere: store, catalogue, LLDS penalty max(0, −d))
    log ratio      log r_t = clamp(d_t, ±20)            the clamp is counted (``clamped``), as verl
    clip flags     clip_low = r < 1−ε_l ∧ A < 0,  clip_high = r > 1+ε_h ∧ A > 0,  clip_region = low ∨ high,
                   dual_clip = r > c ∧ A < 0             TRL semantics
    sequence ratio s_i = exp(clamp(mean_mask log r, ±20))  GSPO's geometric-mean ratio
    turn ratio     w_k = exp(clamp(mean_{mask ∧ turn k} log r, ±20))  Turn-PPO's, broadcast to the turn's tokens
    k3 KL          exp(logp_ref − logp) − (logp_ref − logp) − 1   the objective's penalty and kl_ref_k3
    LLDS gate      g_t = 1 on eligible tokens (mask ∧ A ≥ 0) of a turn whose Σ_eligible d < 0 (A-gate), or of a
                   response whose Σ d < 0 (R-gate); the probe's ``llds_gate_rate`` counts the same turns

A turn is given by ``turn_ids`` (0-based per row; negative = not a model token); without them a turn is a maximal
run of eligible tokens — the glossary's turn (docs/architecture.md: model tokens between two tool observations, which the loss mask drops)
and the LLDS authors' ``chunk_sums_vectorized``. All functions are vectorised, shape-stable and sync-free.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

LOG_RATIO_CLAMP = 20.0
"""|log r| is clamped to this before exp: r ∈ [e⁻²⁰, e²⁰]."""

Gate = Literal["turn", "response"]

CLIP_LEVELS = ("token", "turn", "sequence")
"""What an objective's clip acts on: the token ratio r, Turn-PPO's turn ratio w_k, or GSPO's sequence ratio s_i."""


def displacement(logp: Tensor, logp_old: Tensor) -> Tensor:
    """d = logp − logp_old, (B, T); gradient flows through ``logp`` only. Negative = likelihood went down."""
    return logp - logp_old.detach()


def clamped_log_ratio(logp: Tensor, logp_old: Tensor) -> tuple[Tensor, Tensor]:
    """log r = clamp(logp − logp_old, ±LOG_RATIO_CLAMP) (grad through logp) and the bool map of clamped tokens."""
    raw = displacement(logp, logp_old)  # (B, T)
    clamped = raw.detach().abs() > LOG_RATIO_CLAMP  # (B, T) bool
    return raw.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), clamped


def k3_kl(logp: Tensor, logp_ref: Tensor) -> Tensor:
    """k3 = exp(logp_ref − logp) − (logp_ref − logp) − 1 ≥ 0, Schulman's estimator of KL(π_θ‖π_ref), with the
    difference clamped to ±20 like the ratio (grad through ``logp``). (B, T)."""
    d = (logp_ref.detach() - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    return torch.exp(d) - d - 1.0


def clip_flags(ratio: Tensor, adv: Tensor, mask: Tensor, eps_low: float, eps_high: float,
               dual_clip: float | None = None) -> dict[str, Tensor]:
    """TRL clip flags of ``ratio`` (token or broadcast sequence ratio), all (B, T) bool and AND-ed with the mask."""
    on = mask.bool() if mask.dtype == torch.bool else mask > 0  # (B, T)
    r = ratio.detach()
    low = (r < 1.0 - eps_low) & (adv < 0) & on  # (B, T)
    high = (r > 1.0 + eps_high) & (adv > 0) & on  # (B, T)
    out = {"clip_low": low, "clip_high": high, "clip_region": low | high}
    if dual_clip is not None:
        out["dual_clip"] = (r > dual_clip) & (adv < 0) & on
    return out


def sequence_log_ratio(log_ratio: Tensor, mask: Tensor) -> Tensor:
    """(B,) log s_i = clamp(mean over mask of log r, ±20): GSPO's length-normalised sequence log-ratio."""
    m = mask.to(log_ratio.dtype)  # (B, T)
    mean = (log_ratio * m).sum(-1) / m.sum(-1).clamp(min=1.0)  # (B,)
    return mean.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def turn_index(eligible: Tensor, turn_ids: Tensor | None) -> Tensor:
    """(B, T) long turn slot in [0, T): ``turn_ids`` clamped, or the index of the run of eligible tokens."""
    T = eligible.shape[-1]
    if turn_ids is not None:
        return turn_ids.long().clamp(0, T - 1)  # negative ids are never eligible; clamping only keeps them in range
    prev = torch.nn.functional.pad(eligible[:, :-1], (1, 0), value=False)  # (B, T) eligible at t−1
    starts = eligible & ~prev  # (B, T) first token of each run
    return (starts.long().cumsum(dim=-1) - 1).clamp(0, T - 1)  # (B, T)


def turn_log_ratio(log_ratio: Tensor, mask: Tensor, turn_ids: Tensor | None) -> Tensor:
    """(B, T) log w_k = clamp(mean of log r over the mask = 1 tokens of the token's turn, ±20); no gradient."""
    log_w, _, idx = turn_slot_log_ratio(log_ratio, mask, turn_ids)  # (B, T) per slot; slot per token
    return log_w.gather(1, idx)  # (B, T)


def turn_slot_log_ratio(log_ratio: Tensor, mask: Tensor, turn_ids: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Per turn slot: log w_k (B, T) = clamp(Σ log r / n, ±20), its token count n (B, T; 0 = no turn in the
    slot), and each token's slot (B, T). The one formula of the turn ratio (objective and probe)."""
    on = mask.bool() if mask.dtype == torch.bool else mask > 0  # (B, T)
    sums, counts, idx = turn_sums(log_ratio, on, turn_ids)  # (B, T) slot → Σ log r, n tokens; slot per token
    log_w = (sums / counts.clamp(min=1.0)).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    return log_w, counts, idx


def turn_sums(disp: Tensor, eligible: Tensor, turn_ids: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Per-turn Σ d and eligible-token count, one slot per turn index: sums (B, T), counts (B, T), slot idx (B, T)."""
    idx = turn_index(eligible, turn_ids)  # (B, T)
    d = torch.where(eligible, disp.detach(), torch.zeros_like(disp))  # (B, T) NaN outside eligible never leaks
    sums = torch.zeros_like(d).scatter_add_(1, idx, d)  # (B, T) slot → Σ d over the turn
    counts = torch.zeros_like(d).scatter_add_(1, idx, eligible.to(d.dtype))  # (B, T) slot → eligible tokens
    return sums, counts, idx


def llds_gate(disp: Tensor, eligible: Tensor, turn_ids: Tensor | None, gate: Gate = "turn") -> Tensor:
    """g (B, T) bool: eligible tokens whose turn (``gate="turn"``) or response (``"response"``) has Σ d < 0."""
    if gate == "response":
        total = torch.where(eligible, disp.detach(), torch.zeros_like(disp)).sum(-1, keepdim=True)  # (B, 1)
        return (total < 0) & eligible
    sums, _, idx = turn_sums(disp, eligible, turn_ids)
    return (sums.gather(1, idx) < 0) & eligible  # (B, T)


def llds_gate_counts(disp: Tensor, eligible: Tensor, turn_ids: Tensor | None) -> Tensor:
    """(2,) [gated turns, eligible turns] of the A-gate: the turns ``llds_gate(gate="turn")`` switches on."""
    sums, counts, _ = turn_sums(disp, eligible, turn_ids)
    present = counts > 0  # (B, T) slots holding a turn with eligible tokens
    return torch.stack([(present & (sums < 0)).sum(), present.sum()]).double()
