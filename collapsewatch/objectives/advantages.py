"""Group-relative advantages, the third algorithm axis (independent of objective and aggregation).

    group_norm  A_i = (R_i − mean_G) / (std_G + eps)     GRPO (DeepSeekMath, arXiv 2402.03300, §4.1.2)
    group_mean  A_i =  R_i − mean_G                      Dr. GRPO (arXiv 2503.20783): no std scaling

std_G is the unbiased (Bessel, n − 1) standard deviation, as both TRL (``nanstd``) and verl (``torch.std``)
compute it; eps defaults to verl's 1e-6 (TRL uses 1e-4). Groups come from a ``group_ids`` (B,) tensor and need
not be contiguous. A group whose rewards are all equal (including a group of one) has no learning signal and
gets advantage exactly 0. Deviation from verl: verl gives a singleton group mean 0 and std 1, i.e. A = R.
Vectorised with index_add / scatter_reduce; the only host sync is ``torch.unique``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..batch import group_zero_std

ADVANTAGE_MODES = ("group_norm", "group_mean")


@dataclass(frozen=True, eq=False)
class GroupStats:
    """Per-sequence view of its group's reward statistics (all (B,))."""

    mean: Tensor      # (B,) mean reward of the sequence's group
    std: Tensor       # (B,) unbiased std of the group's rewards; 0 for a group of one
    size: Tensor      # (B,) number of sequences in the group
    zero_std: Tensor  # (B,) bool: all rewards of the group are equal (no signal; share of these = starvation)


def group_stats(rewards: Tensor, group_ids: Tensor) -> GroupStats:
    """Mean, unbiased std, size and zero-std flag of each sequence's group, broadcast back to (B,)."""
    if rewards.dim() != 1 or tuple(group_ids.shape) != tuple(rewards.shape):
        shapes = f"{tuple(rewards.shape)}, {tuple(group_ids.shape)}"
        raise ValueError(f"rewards and group_ids must both be (B,); got {shapes}")
    r = rewards if rewards.is_floating_point() else rewards.float()  # (B,)
    _, inv = torch.unique(group_ids, return_inverse=True)  # (B,) dense group index < B
    zeros = torch.zeros_like(r)  # (B,) one slot per possible group
    size = zeros.index_add(0, inv, torch.ones_like(r))  # (B,) slot → group size
    mean = (zeros.index_add(0, inv, r) / size.clamp(min=1.0))[inv]  # (B,)
    sq_dev = zeros.index_add(0, inv, (r - mean) ** 2)  # (B,) slot → Σ (R − mean)²
    std = torch.sqrt(sq_dev / (size - 1.0).clamp(min=1.0))[inv]  # (B,) 0 for a singleton (Σ = 0)
    # Exact equality (max == min), not std < tol: the mean of equal floats can differ from them in the last bit.
    zero_std = group_zero_std(group_ids, r)  # (B,) bool
    return GroupStats(mean=mean, std=std, size=size[inv], zero_std=zero_std)


def compute_advantages(rewards: Tensor, group_ids: Tensor, mode: str = "group_norm", *, eps: float = 1e-6) -> Tensor:
    """Per-sequence advantages (B,) from rewards (B,) and group ids (B,). ``mode``: 'group_norm' or 'group_mean'."""
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"Unknown advantage mode {mode!r}; known modes: {', '.join(ADVANTAGE_MODES)}")
    if eps < 0.0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    stats = group_stats(rewards, group_ids)
    centred = rewards.to(stats.mean.dtype) - stats.mean  # (B,)
    adv = centred / (stats.std + eps) if mode == "group_norm" else centred  # (B,)
    return torch.where(stats.zero_std, torch.zeros_like(adv), adv)
