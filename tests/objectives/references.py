"""Straight transcriptions of the reference implementations the objectives are held against.

Kept as close to the source as possible (names, order of operations), so a parity failure points at our code.

- verl ``agg_loss`` and ``compute_grpo_outcome_advantage``: volcengine/verl, verl/trainer/ppo/core_algos.py
  (commit 012be9d9dcb7c38499f23616142870d2682757fc).
- LLDS: vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1, verl/workers/actor/dp_actor.py
  (commit 6453f61487ca0f15ecf8860b3d9d30ff49391f7c: ``chunk_sums_vectorized``, ``expand_chunk_mask`` and the
  penalty block of ``update_policy``) with its verl/trainer/ppo/core_algos.py ``compute_policy_loss`` and
  verl/utils/torch_functional.py ``masked_mean`` (no epsilon).
- SAPO (search agent, arXiv 2603.10069): the paper's one-line modification of verl ``compute_policy_loss``, as
  transcribed in a public reading note of the paper (the ``kl_term_loss`` line with thresholds ``t`` and ``w``).
- BAPO: WooooDyy/BAPO, recipe/bapo/policy_loss.py (commit 7287044444d5d578529ea464b45f090a36e8da3a:
  ``_compute_effective_advantage`` and ``compute_policy_loss_bapo``, token-mean aggregation, no distributed run,
  no rollout IS weights) with that repo's verl ``masked_mean`` (+1e-8 in the denominator).
- GiGPO (arXiv 2505.10978): verl-agent's ``compute_gigpo_outcome_advantage``, ``episode_norm_reward``,
  ``build_step_group`` (exact-match path), ``step_norm_reward`` and ``compute_step_discounted_returns``, from the
  copy in WillDreamer/ARL-Arena recipe/search_agent/ppo/core_algos.py (commit
  a25a2a229c85431b421ac785fa5f375a99b2072a; langfengQ/verl-agent itself could not be fetched here). Changes: the
  step-group uid is a counter instead of ``uuid4`` (only equality matters), no printing, and the returns function
  takes the per-step rewards and trajectory uids as arrays instead of a DataProto.
- TRL 1.16 ``GRPOTrainer._compute_loss``: not transcribed — ``trl_loss`` calls the installed method itself on a
  stub trainer whose forward returns the given log-probs.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F


# ---- verl torch_functional (Search-R1 era) --------------------------------------------------------------------
def masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def masked_sum(values, mask, axis=None):
    return (values * mask).sum(axis=axis)


# ---- verl core_algos.agg_loss -----------------------------------------------------------------------------------
def verl_agg_loss(loss_mat, loss_mask, loss_agg_mode):
    if loss_agg_mode == "token-mean":
        loss = masked_mean(loss_mat, loss_mask)
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)  # token-sum
        loss = torch.mean(seq_losses)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1)  # token-mean
        loss = torch.mean(seq_losses)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-sum-norm":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        max_response_length = loss_mask.shape[-1]
        loss = torch.sum(seq_losses) / max_response_length
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")
    return loss


# ---- verl core_algos.compute_grpo_outcome_advantage (scores already summed to (bs,)) -----------------------------
def verl_grpo_advantage(scores, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    scores = scores.clone()
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx] = torch.tensor(0.0)
            id2std[idx] = torch.tensor(1.0)
        elif len(id2score[idx]) > 1:
            scores_tensor = torch.stack(id2score[idx])
            id2mean[idx] = torch.mean(scores_tensor)
            id2std[idx] = torch.std(scores_tensor)
    for i in range(bsz):
        if norm_adv_by_std_in_grpo:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores


# ---- LLDS authors' code ------------------------------------------------------------------------------------------
def expand_chunk_mask(chunk_mask, chunk_id):
    B, N = chunk_id.shape
    padded_mask = torch.cat([torch.zeros(B, 1, dtype=chunk_mask.dtype, device=chunk_mask.device), chunk_mask], dim=1)
    original_mask = padded_mask.gather(1, chunk_id)
    return original_mask


def chunk_sums_vectorized(mask, values, return_chunk_id=True):
    B, N = mask.shape
    mask = mask.bool()
    prev = F.pad(mask[:, :-1], (1, 0), value=False)
    starts = mask & ~prev
    chunk_id = starts.cumsum(dim=1).to(torch.long) * mask.to(torch.long)
    lengths = chunk_id.max(dim=1).values
    Kmax = int(lengths.max().item())
    if Kmax == 0:
        return values.new_zeros((B, 0)), lengths, (chunk_id if return_chunk_id else None)
    out = values.new_zeros((B, Kmax + 1))
    out.scatter_add_(1, chunk_id.clamp_max(Kmax), values * mask)
    sums_padded = out[:, 1:]
    return sums_padded, lengths, (chunk_id if return_chunk_id else None)


def llds_compute_policy_loss(old_log_prob, log_prob, advantages, eos_mask, cliprange):
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    ratio = torch.clamp(ratio, min=-100, max=100)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), eos_mask)
    return pg_loss


def llds_policy_loss(old_log_prob, log_prob, advantages, response_mask, clip_ratio, no_reduce_lambda, chunk_noreduce):
    """update_policy's loss for one micro-batch with entropy_coeff = 0, no KL loss and answer_mask = ones."""
    pg_loss = llds_compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, clip_ratio)
    policy_loss = pg_loss
    answer_mask = torch.ones_like(response_mask, dtype=response_mask.dtype)
    positive_advantage_mask = (advantages >= 0).float()
    penalty_term = old_log_prob.detach() - log_prob
    coeff_map = torch.where(answer_mask.bool(), no_reduce_lambda, min(0.0, no_reduce_lambda))
    diff_log_prob = old_log_prob.detach() - log_prob
    base_penalty_term = torch.maximum(torch.zeros_like(log_prob), diff_log_prob)
    if chunk_noreduce:
        masked_response_mask = response_mask * positive_advantage_mask
        sum_val, length, chunk_ids = chunk_sums_vectorized(masked_response_mask, penalty_term)
        chunk_mask = (sum_val > 0).to(torch.long)
        original_token_mask = expand_chunk_mask(chunk_mask, chunk_ids)
        valid_penalty_tokens = original_token_mask.detach() * base_penalty_term
    else:
        masked_response_mask = response_mask * positive_advantage_mask
        current_penalty_term = diff_log_prob * positive_advantage_mask
        penalty_sentence = masked_sum(current_penalty_term, masked_response_mask, axis=-1)
        penalty_sentence = torch.maximum(torch.zeros_like(penalty_sentence), penalty_sentence)
        penalty_sentence[penalty_sentence > 0] = 1.0
        valid_penalty_tokens = penalty_sentence.unsqueeze(-1) * base_penalty_term * positive_advantage_mask
    weighted_penalty = valid_penalty_tokens * coeff_map
    loss_noreduce = masked_mean(weighted_penalty, response_mask)
    return policy_loss + loss_noreduce


# ---- SAPO (search agent) paper's compute_policy_loss -------------------------------------------------------------
def sapo_paper_policy_loss(old_log_prob, log_prob, advantages, eos_mask, cliprange, t, w):
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    kl_term_loss = -masked_mean(
        torch.log(ratio).masked_fill(ratio > t, 0)[advantages[:, 0] >= 0], eos_mask[advantages[:, 0] >= 0]
    )
    pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), eos_mask)
    return pg_loss + w * kl_term_loss


# ---- BAPO released policy loss (WooooDyy/BAPO recipe/bapo/policy_loss.py) ---------------------------------------
def bapo_masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def _bapo_effective_advantage(ratio, advantages, response_mask, clip_low, clip_high, eps):
    clip_min = ratio.new_tensor(float(clip_low))
    clip_max = ratio.new_tensor(float(clip_high))
    ratio_pos = torch.minimum(ratio, clip_max)
    ratio_neg = torch.maximum(ratio, clip_min)
    effective_ratio = torch.where(advantages >= 0, ratio_pos, ratio_neg)
    effective_adv = effective_ratio * advantages * response_mask
    pos_contrib = effective_adv.clamp(min=0).sum()
    neg_contrib = (-effective_adv.clamp(max=0)).sum()
    if torch.all(neg_contrib <= 0):
        pos_neg_ratio = ratio.new_tensor(float("inf"))
    else:
        pos_neg_ratio = pos_contrib / (neg_contrib + ratio.new_tensor(eps))
    return effective_adv, pos_neg_ratio


def bapo_policy_loss(old_log_prob, log_prob, advantages, response_mask, *, ratio_low_cur, ratio_high_cur,
                     ratio_low_max, ratio_high_max, ratio_low_step, ratio_high_step, target_ratio, eps=1e-8,
                     clip_ratio_c=3.0):
    """compute_policy_loss_bapo with the config already resolved; returns (pg_loss, (clip_low, clip_high, ratio))."""
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    _, pos_neg_ratio = _bapo_effective_advantage(ratio, advantages, response_mask, ratio_low_cur, ratio_high_cur, eps)
    while pos_neg_ratio.item() < target_ratio and ratio_low_cur < ratio_low_max and ratio_low_step > 0:
        ratio_low_cur = min(ratio_low_cur + ratio_low_step, ratio_low_max)
        _, pos_neg_ratio = _bapo_effective_advantage(ratio, advantages, response_mask, ratio_low_cur,
                                                     ratio_high_cur, eps)
        if pos_neg_ratio.item() >= target_ratio:
            break
    while pos_neg_ratio.item() < target_ratio and ratio_high_cur < ratio_high_max and ratio_high_step > 0:
        ratio_high_cur = min(ratio_high_cur + ratio_high_step, ratio_high_max)
        _, pos_neg_ratio = _bapo_effective_advantage(ratio, advantages, response_mask, ratio_low_cur,
                                                     ratio_high_cur, eps)
        if pos_neg_ratio.item() >= target_ratio:
            break
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, ratio_low_cur, ratio_high_cur)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    pg_loss = bapo_masked_mean(pg_losses, response_mask)  # agg_loss "token-mean"
    return pg_loss, (ratio_low_cur, ratio_high_cur, pos_neg_ratio.item())


# ---- GiGPO (verl-agent, as shipped in ARL-Arena recipe/search_agent/ppo/core_algos.py) ------------------------
def gigpo_step_discounted_returns(rewards, traj_uids, gamma):
    rewards = np.asarray(rewards, dtype=np.float32)
    returns_by_traj = {}
    for uid in np.unique(traj_uids):
        traj_indices = np.where(traj_uids == uid)[0]
        traj_rewards = rewards[traj_indices]
        traj_returns = np.zeros_like(traj_rewards)
        running_return = 0
        for t in reversed(range(len(traj_rewards))):
            running_return = traj_rewards[t] + gamma * running_return
            traj_returns[t] = running_return
        returns_by_traj[uid] = traj_returns
    all_returns = np.zeros_like(rewards)
    for i, uid in enumerate(traj_uids):
        traj_indices = np.where(traj_uids == uid)[0]
        idx_in_traj = np.where(traj_indices == i)[0][0]
        all_returns[i] = returns_by_traj[uid][idx_in_traj]
    return torch.tensor(all_returns, dtype=torch.float32)


def gigpo_episode_norm_reward(token_level_rewards, response_mask, index, traj_index, epsilon=1e-6, remove_std=True,
                              compute_mean_std_cross_steps=True):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    seen_pairs = set()
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            if (index[i], traj_index[i]) in seen_pairs:
                continue
            id2score[index[i]].append(scores[i])
            if not compute_mean_std_cross_steps:
                seen_pairs.add((index[i], traj_index[i]))
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        episode_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return episode_advantages


def gigpo_build_step_group(anchor_obs, index):
    step_group_uids = np.empty(len(anchor_obs), dtype=object)
    counter = 0
    for idx in np.unique(index):
        indices = np.where(index == idx)[0]
        obs_group = anchor_obs[indices]
        clusters = defaultdict(list)
        for i, obs in enumerate(obs_group):
            clusters[obs].append(indices[i])
        for _obs, original_indices in clusters.items():
            uid = str(counter)  # uuid.uuid4() in the source
            counter += 1
            for original_idx in original_indices:
                step_group_uids[original_idx] = uid
    return step_group_uids


def gigpo_step_norm_reward(step_rewards, response_mask, index, epsilon=1e-6, remove_std=True):
    response_length = response_mask.shape[-1]
    scores = step_rewards.clone()
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        step_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return step_advantages


def gigpo_outcome_advantage(token_level_rewards, step_rewards, response_mask, anchor_obs, index, traj_index,
                            epsilon=1e-6, step_advantage_w=1.0, mode="mean_norm"):
    if mode == "mean_std_norm":
        remove_std = False
    elif mode == "mean_norm":
        remove_std = True
    else:
        raise ValueError(f"Unknown mode: {mode}")
    episode_advantages = gigpo_episode_norm_reward(token_level_rewards, response_mask, index, traj_index, epsilon,
                                                   remove_std)
    step_group_uids = gigpo_build_step_group(anchor_obs, index)
    step_advantages = gigpo_step_norm_reward(step_rewards, response_mask, step_group_uids, epsilon, remove_std)
    scores = episode_advantages + step_advantage_w * step_advantages
    return scores, scores


# ---- TRL 1.16 GRPOTrainer._compute_loss, called for real --------------------------------------------------------
class _IdentityAccelerator:
    sync_gradients = True
    num_processes = 1

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def trl_loss(
    loss_type,
    logp,
    logp_old,
    advantages,
    mask,
    *,
    eps_low=0.2,
    eps_high=0.28,
    beta=0.0,
    logp_ref=None,
    sequence_level=False,
    max_completion_length=None,
    tau_pos=1.0,
    tau_neg=1.05,
):
    """The scalar loss of TRL's installed ``GRPOTrainer._compute_loss`` (one process, no accumulation)."""
    from trl import GRPOTrainer

    B, T = logp.shape
    stub = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *args, **kwargs: (logp, torch.zeros_like(logp), None),
        aux_loss_enabled=False,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="sequence" if sequence_level else "token",
        beta=beta,
        loss_type=loss_type,
        epsilon_low=eps_low,
        epsilon_high=eps_high,
        args=SimpleNamespace(
            delta=None, sapo_temperature_pos=tau_pos, sapo_temperature_neg=tau_neg, use_bias_correction_kl=False
        ),
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=T if max_completion_length is None else max_completion_length,
        _entropy_bonus_enabled=False,
        _metrics=defaultdict(lambda: defaultdict(list)),
        accelerator=_IdentityAccelerator(),
    )
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "old_per_token_logps": logp_old,
    }
    if logp_ref is not None:
        inputs["ref_per_token_logps"] = logp_ref
    return GRPOTrainer._compute_loss(stub, None, inputs)
