"""GiGPO's step-level advantage (arXiv 2505.10978), an advantage estimator (axis 1, beside ``advantages.py``):
an episode-relative advantage plus, per turn, a step-relative one among the turns of the same group that start
from an identical *anchor state*.

    A_{i,t} = A^E(τ_i) + ω · A^S(a_i^k),   t ∈ turn k of response i                                   (Eq. 8)
    A^E(τ_i) = (R(τ_i) − mean) / (std + ε)   over the episode group (Eq. 3; "mean_norm": R − mean)
    A^S(a_i^k) = (R_i^k − mean) / (std + ε)  over the step group {(j, l): same group, anchor s_j^l = s_i^k} (Eq. 7)
    R_i^k = Σ_{l ≥ k} γ^{l−k} r_i^l          discounted return of turn k from the env's per-turn rewards (Eq. 5)

As the released code computes it: verl-agent's ``compute_gigpo_outcome_advantage`` (langfengQ/verl-agent),
read in the copy ARL-Arena ships for SAMPO (WillDreamer/ARL-Arena ``recipe/search_agent/ppo/core_algos.py`` @
a25a2a229c85; verl-agent itself could not be fetched here), transcribed in ``tests/objectives/references.py``
and parity-tested. Where the code differs from the paper's equations, the code is followed:

* the episode mean and std are taken over *step rows* (``compute_mean_std_cross_steps=True``, its only path): a
  response with n turns counts n times;
* a group of one row gets mean 0, std 1 (A^E = R); a step group of one gets A^S = 0; std is unbiased (n − 1).

Anchor state (verl-agent's search env, ``agent_system/environments/env_manager.py``): the text the env last
showed — the question before turn 0, then the observation that answered turn k − 1 — compared exactly (the code's
``enable_similarity=False`` default). In the built-in search env two turns share one when the same passages came
back (or the same invalid-action message), so the anchors cost nothing to record (``RolloutBatch.anchors``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.advantages import ADVANTAGE_MODES

ESTIMATORS = (*ADVANTAGE_MODES, "gigpo")
"""Advantage estimators the built-in trainer offers (``TrainConfig.advantages``)."""


@dataclass(frozen=True)
class GigpoParams:
    """GiGPO's settings; defaults from ARL-Arena's SAMPO script ``examples/embody_agent_trainer/Qwen3-4B/
    train_sampo.sh`` (``algorithm.gamma=0.95``, ``gigpo.step_advantage_w=1.0``, ``gigpo.mode=mean_std_norm``);
    its webshop SAMPO script and verl-agent's yaml default use ``mean_norm`` (``std_norm=False``)."""

    gamma: float = 0.95
    """γ of the per-turn discounted return R_i^k (Eq. 5)."""
    step_weight: float = 1.0
    """ω, the weight of the step-relative advantage (Eq. 8)."""
    std_norm: bool = True
    """Divide by the group's std + ε (``mean_std_norm``); False = ``mean_norm`` (verl-agent's yaml default)."""
    eps: float = 1e-6
    """ε of the std normalisation (the code's ``epsilon``)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0 or self.step_weight < 0.0 or self.eps < 0.0:
            raise ValueError(f"GiGPO needs 0 <= gamma <= 1, step_weight >= 0, eps >= 0; got {self}")


def turn_returns(turn_rewards: list[list[float]], gamma: float) -> Tensor:
    """(B, K) R_i^k = Σ_{l ≥ k} γ^{l−k} r_i^l for each response's turns (K = most turns; 0 past a row's end)."""
    K = max((len(r) for r in turn_rewards), default=0)
    out = torch.zeros(len(turn_rewards), max(K, 1), dtype=torch.float64)
    for i, rewards in enumerate(turn_rewards):
        running = 0.0
        for k in reversed(range(len(rewards))):
            running = rewards[k] + gamma * running
            out[i, k] = running
    return out


def anchor_ids(anchors: list[list[str]]) -> Tensor:
    """(B, K) long: one id per distinct anchor text (equal text = equal id), −1 past a row's last turn."""
    K = max((len(a) for a in anchors), default=0)
    out = torch.full((len(anchors), max(K, 1)), -1, dtype=torch.long)
    ids: dict[str, int] = {}
    for i, row in enumerate(anchors):
        for k, text in enumerate(row):
            out[i, k] = ids.setdefault(text, len(ids))
    return out


def _relative(score: Tensor, key: Tensor, weight: Tensor, params: GigpoParams) -> Tensor:
    """(score − mean_key) / (std_key + ε) per element (``std_norm=False``: score − mean_key), the stats over the
    elements of equal ``key``, each counted ``weight`` times; std is unbiased, and 1 for a key counted once."""
    _, inv = torch.unique(key, return_inverse=True)  # (N,) dense key index
    zeros = torch.zeros(inv.numel(), dtype=score.dtype)
    n = zeros.index_add(0, inv, weight)  # (N,) slot → count of rows
    mean = zeros.index_add(0, inv, weight * score) / n.clamp(min=1.0)  # (N,) slot → mean
    sq = zeros.index_add(0, inv, weight * (score - mean[inv]) ** 2)  # (N,) slot → Σ (x − mean)²
    std = torch.sqrt(sq / (n - 1.0).clamp(min=1.0))  # (N,) unbiased
    mean, std = mean[inv], torch.where(n[inv] > 1, std[inv], torch.ones_like(score))  # (N,)
    centred = score - mean
    return centred / (std + params.eps) if params.std_norm else centred


def gigpo_advantages(rewards: Tensor, group_ids: Tensor, turn_ids: Tensor, returns: Tensor, anchors: Tensor,
                     params: GigpoParams) -> Tensor:
    """(B, T) A_{i,t} = A^E_i + ω·A^S_{i,k(t)}; tokens with ``turn_ids`` < 0 get A^E_i (prompt, padding: mask 0).

    ``rewards`` (B,) episode rewards R(τ_i); ``group_ids`` (B,); ``turn_ids`` (B, T) turn k of each token;
    ``returns`` (B, K) R_i^k (``turn_returns``); ``anchors`` (B, K) anchor ids (``anchor_ids``; −1 = no turn k)."""
    B, K = anchors.shape
    if tuple(returns.shape) != (B, K) or rewards.shape != (B,) or group_ids.shape != (B,) or turn_ids.shape[0] != B:
        raise ValueError(f"gigpo_advantages: rewards {tuple(rewards.shape)}, group_ids {tuple(group_ids.shape)}, "
                         f"turn_ids {tuple(turn_ids.shape)}, returns {tuple(returns.shape)} and anchors "
                         f"{(B, K)} disagree")
    n_turns = (anchors >= 0).sum(1).to(torch.float64)  # (B,) step rows per response
    r = rewards.to(torch.float64)
    # episode part: mean/std over step rows (a response counts once per turn), verl-agent's cross-steps path
    _, g = torch.unique(group_ids, return_inverse=True)  # (B,) dense group index
    rows_in_group = torch.zeros_like(r).index_add(0, g, n_turns)[g]  # (B,) step rows of the response's group
    episode = _relative(r, group_ids, n_turns, params)  # (B,)
    alone = r / (1.0 + params.eps) if params.std_norm else r  # the code: a one-row group has mean 0 and std 1
    episode = torch.where(rows_in_group == 1, alone, episode)
    on = anchors >= 0  # (B, K) turns that exist
    rows = torch.arange(B)[:, None].expand(B, K)[on]  # (N,) row of each turn
    key = group_ids[rows].long() * (int(anchors.max()) + 2) + anchors[on]  # (N,) (group, anchor) pair
    step = torch.zeros(B, K, dtype=torch.float64)
    step[on] = _relative(returns.to(torch.float64)[on], key, torch.ones(key.numel(), dtype=torch.float64), params)
    k = turn_ids.long().clamp(0, K - 1)  # (B, T)
    per_token = step.gather(1, k)  # (B, T) A^S of the token's turn
    return episode[:, None] + params.step_weight * torch.where(turn_ids >= 0, per_token, torch.zeros_like(per_token))
