"""The trainer's rollout engine, chosen by the ``rollout`` config table (``--set rollout.engine=vllm``).

``hf`` samples with the training module itself (nothing to sync). ``vllm`` holds its own copy of the weights: the
loop calls ``sync_weights`` before every rollout that follows an update (or a rollback), and logs its wall time
as ``weight_sync_time``. vLLM is imported only here, and only when asked for.
"""

from __future__ import annotations

from typing import Any

import torch

from ..rollout import HFRolloutEngine, RolloutConfig, RolloutEngine
from ..rollout.engine import EngineSettings
from .config import TrainConfig


def make_engine(cfg: TrainConfig, policy: torch.nn.Module, tokenizer: Any, rollout_cfg: RolloutConfig,
                rank: int = 0) -> RolloutEngine:
    """The engine ``cfg.rollout`` names, sampling from ``policy``'s current weights."""
    s = EngineSettings.from_dict(cfg.rollout)
    if s.engine == "hf":
        return HFRolloutEngine(policy, tokenizer, rollout_cfg)
    from ..rollout.vllm_engine import VLLMRolloutEngine

    return VLLMRolloutEngine(policy, tokenizer, rollout_cfg, dtype=cfg.dtype if s.dtype == "auto" else s.dtype,
                             seed=cfg.seed + rank, kv_cache_gib=s.kv_cache_gib,
                             gpu_memory_utilization=s.gpu_memory_utilization)


def sync_engine(engine: RolloutEngine, policy: torch.nn.Module) -> dict[str, float]:
    """Make ``engine`` sample from ``policy``'s weights; ``{"weight_sync_time": s}`` for an engine that copies them
    (its ``sync_seconds``), ``{}`` for one that shares the module."""
    engine.sync_weights(policy)
    seconds = getattr(engine, "sync_seconds", None)
    return {} if seconds is None else {"weight_sync_time": float(seconds)}


def close_engine(engine: RolloutEngine | None) -> None:
    """Shut an engine with its own processes down (vLLM); nothing for the others."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()
