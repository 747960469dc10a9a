"""Model and task set-up for the trainer: the policy to train and the synthetic knowledge base it plays on.

Policies come from :func:`collapsewatch.models.load_policy` (built-in tiny models, local HF folders, the
opt-in SmolLM2). A built-in model carries the knowledge base it was warm-started on; other models use
``kb_seed``. Resuming loads the run's checkpoint instead. Nothing is downloaded. The folder the weights came from
is returned explicitly: a checkpoint copies the built-in's description (its knowledge base) from it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from ..env import KBConfig, KnowledgeBase, build_kb
from ..models import load_policy
from .checkpoint import checkpoint_dir
from .config import TrainConfig

hf_logging.disable_progress_bar()


def load_task_and_policy(cfg: TrainConfig, device: torch.device
                         ) -> tuple[torch.nn.Module, object, KnowledgeBase, Path]:
    """(policy in train mode on ``device``, tokenizer, knowledge base, folder the weights were loaded from)."""
    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    ckpt = checkpoint_dir(cfg)
    source = str(ckpt) if cfg.resume and ckpt.is_dir() else cfg.model
    policy = load_policy(source, dtype=dtype)
    kb = build_kb(policy.kb_config or KBConfig(seed=cfg.kb_seed))
    return policy.model.to(device).train(), policy.tokenizer, kb, policy.path
