"""Loss aggregation: how a per-token loss (B, T) becomes the scalar that is back-propagated.

A separate axis from the objective (any objective × any mode). The modes are verl's ``agg_loss`` modes
(``verl/trainer/ppo/core_algos.py``), parity-tested:

    token_mean               Σ_{i,t} ℓ·m / N                  N = Σ_{i,t} m            DAPO; verl "token-mean"
    seq_mean_token_mean      (1/S) Σ_i Σ_t ℓ·m / max(n_i, 1)  S = number of sequences  GRPO; "seq-mean-token-mean"
    seq_mean_token_sum_norm  (1/S) Σ_i Σ_t ℓ·m / L            L = constant (max response length), Dr. GRPO

Gradient accumulation: a micro-batch only sees its own N or S, so summing micro-batch means is not the
full-batch mean. Compute the full-batch denominator once with ``aggregation_normalizer`` over every micro-batch
of the optimizer step and pass it as ``normalizer`` to each ``aggregate`` call; the summed gradients then equal
one pass over the full batch (tested 1×N == N×1). Under data parallelism with gradient averaging over W ranks,
pass (all-reduced global count) / W.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


def _check_mode(mode: str) -> None:
    if mode not in AGGREGATIONS:
        raise ValueError(f"Unknown aggregation {mode!r}; known aggregations: {', '.join(AGGREGATIONS)}")


def aggregate(
    loss: Tensor,
    mask: Tensor,
    mode: str = "token_mean",
    *,
    normalizer: Tensor | float | None = None,
    max_len: int | None = None,
) -> Tensor:
    """Reduce a per-token loss (B, T) over the loss mask (B, T) to a scalar.

    ``normalizer`` replaces this micro-batch's own denominator (N for token_mean, S = B for the sequence modes)
    by the full batch's, for gradient accumulation. ``max_len`` is L of seq_mean_token_sum_norm (default T, as
    verl); pass the configured max response length so that every micro-batch shares it.

    Edge cases: N = 0 gives 0 (the denominator is clamped to 1, as TRL); a sequence with no loss token adds 0
    to the sequence means but still counts in S (TRL's ``clamp(min=1)``; verl's old code divides 0 by 0).
    Deviation from verl: its seq-mean-token-sum-norm sums (not averages) over the sequences of the
    micro-batch, i.e. it is S × this value; this is TRL's ``dr_grpo`` (Σ / (B · L)) and Dr. GRPO's mean.
    """
    _check_mode(mode)
    m = mask.to(loss.dtype)  # (B, T)
    token_sum = (loss * m).sum(dim=-1)  # (B,) Σ_t ℓ·m per sequence
    if mode == "token_mean":
        denom = m.sum() if normalizer is None else normalizer
        return token_sum.sum() / torch.as_tensor(denom, dtype=loss.dtype, device=loss.device).clamp(min=1.0)
    n_seqs = loss.shape[0] if normalizer is None else normalizer
    n_seqs = torch.as_tensor(n_seqs, dtype=loss.dtype, device=loss.device).clamp(min=1.0)
    if mode == "seq_mean_token_mean":
        seq_loss = token_sum / m.sum(dim=-1).clamp(min=1.0)  # (B,)
    else:
        seq_loss = token_sum / float(loss.shape[-1] if max_len is None else max_len)  # (B,)
    return seq_loss.sum() / n_seqs


def aggregation_normalizer(mode: str, masks: Iterable[Tensor]) -> Tensor:
    """The full-batch denominator of ``mode`` over the loss masks of all micro-batches of one optimizer step.

    token_mean: Σ of every mask (number of loss tokens); sequence modes: total number of sequences (rows).
    Returns a 0-dim float tensor on the masks' device (no host sync).
    """
    _check_mode(mode)
    masks = list(masks)
    if not masks:
        raise ValueError("aggregation_normalizer needs at least one mask")
    if mode == "token_mean":
        return torch.stack([m.float().sum() for m in masks]).sum()
    return torch.tensor(float(sum(m.shape[0] for m in masks)), device=masks[0].device)
