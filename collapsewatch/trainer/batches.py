"""The batch the loop trains on: a rollout (a drill's rewards applied, dynamic sampling) and its advantages.

Both axes stay out of the loop's recipe: the rollout engine and ``rollout/dynamic.py`` decide what is sampled, the
configured estimator (``advantages``: group_norm, group_mean, gigpo) what each token is pushed by.
"""

from __future__ import annotations

import torch

from ..objectives import anchor_ids, compute_advantages, gigpo_advantages, turn_returns
from ..rollout import RolloutBatch, RolloutEngine
from ..rollout.dynamic import dynamic_rollout
from .config import TrainConfig, gigpo_params
from .drills import Drill


def rollout_batch(engine: RolloutEngine, tasks: list, make_env, cfg: TrainConfig, drill: Drill, step: int,
                  seed: int) -> tuple[RolloutBatch, dict[str, float]]:
    """The batch to train on: one rollout of ``tasks`` (a drill's rewards applied), or with ``cfg.dynamic_sampling``
    up to that many (``rollout/dynamic.py``), judged on the rewards the trainer will use. Returns it and the step
    scalars that record the re-sampling (``resampled_groups``, ``filtered_groups``; none when it is off)."""

    def one() -> RolloutBatch:
        b = engine.rollout(tasks, make_env, cfg.group_size)
        env_rewards, b.rewards = b.rewards, drill.rewards(b.rewards, b.group_ids, step, seed)
        moved = (b.rewards != env_rewards) & ~(b.rewards.isnan() & env_rewards.isnan())  # (B,) NaN stays NaN
        for i in torch.nonzero(moved).flatten().tolist():  # GiGPO's per-turn returns follow the drill
            b.turn_rewards[i][-1] += float(b.rewards[i] - env_rewards[i])
        return b

    if not cfg.dynamic_sampling:
        return one(), {}
    batch, stats = dynamic_rollout(one, len(tasks), cfg.dynamic_sampling, engine.pad_id)
    return batch, {"resampled_groups": float(stats.resampled_groups), "filtered_groups": float(stats.filtered_groups)}


def batch_advantages(batch: RolloutBatch, cfg: TrainConfig) -> torch.Tensor:
    """(B,) group advantages, or for ``advantages = "gigpo"`` (B, L) per-token ones aligned with ``input_ids``."""
    if cfg.advantages != "gigpo":
        return compute_advantages(batch.rewards.double(), batch.group_ids, cfg.advantages).float()
    p = gigpo_params(cfg.advantage_params)
    return gigpo_advantages(batch.rewards, batch.group_ids, batch.turn_ids, turn_returns(batch.turn_rewards, p.gamma),
                            anchor_ids(batch.anchors), p).float()
