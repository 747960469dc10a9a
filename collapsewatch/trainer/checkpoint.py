"""Checkpoint / resume: model + tokenizer (HF format), optimizer, data-order RNGs, the step count and the settings in
force (``train_config.json``: what ``--resume`` continues with, trainer/resume.py).

Written to ``<store>/<run>/checkpoint/`` (or ``checkpoint_dir``) atomically (a temporary folder renamed into place),
by rank 0. A built-in model's description (``collapsewatch_builtin.json``: the knowledge base it plays on) is copied
from ``source``, the folder the weights were loaded from, so a resumed run rebuilds the same task.
"""

from __future__ import annotations

import json
import random
import shutil
import uuid
from pathlib import Path

import torch

from ..models.builtin import META_FILE
from ..store.location import is_url
from .config import TrainConfig

CONFIG_FILE = "train_config.json"
"""The checkpoint's step and the TrainConfig in force when it was written (``{"step": …, "config": {…}}``)."""


def checkpoint_folder(store: str, run: str, checkpoint_dir: str = "") -> Path:
    """``checkpoint_dir`` when given, else ``<store>/<run>/checkpoint`` (a folder store's)."""
    return Path(checkpoint_dir) if checkpoint_dir else Path(store) / run / "checkpoint"


def checkpoint_dir(cfg: TrainConfig) -> Path:
    return checkpoint_folder(cfg.store, cfg.run_name, cfg.checkpoint_dir)


def keeps_checkpoint(cfg: TrainConfig) -> bool:
    """False for an object-store URL without ``checkpoint_dir``: the run keeps no checkpoint (config.py refuses
    what would need one)."""
    return bool(cfg.checkpoint_dir) or not is_url(cfg.store)


def save_checkpoint(cfg: TrainConfig, model, tokenizer, opt, rng: random.Random, gen: torch.Generator,
                    step: int, *, source: Path | None) -> Path:
    """Save under :func:`checkpoint_dir`; ``source`` is the folder the policy was loaded from (None: not known)."""
    target = checkpoint_dir(cfg)
    tmp = target.parent / f".checkpoint-{uuid.uuid4().hex[:8]}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if source is not None and (Path(source) / META_FILE).is_file():
        shutil.copy(Path(source) / META_FILE, tmp / META_FILE)
    torch.save({"step": step, "optimizer": opt.state_dict(), "rng": rng.getstate(), "gen": gen.get_state(),
                "torch_rng": torch.get_rng_state()}, tmp / "trainer_state.pt")
    (tmp / CONFIG_FILE).write_text(json.dumps({"step": step, "config": cfg.to_dict()}, default=str, indent=1))
    old = target.parent / f".old-{uuid.uuid4().hex[:8]}"
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(cfg: TrainConfig, model, opt, rng: random.Random, gen: torch.Generator) -> int:
    """Restore the trainer state saved by save_checkpoint (the model weights were loaded from it already)."""
    path = checkpoint_dir(cfg) / "trainer_state.pt"
    if not path.is_file():
        raise ValueError(f"--resume: no checkpoint at {str(path.parent)!r}")
    state = torch.load(path, weights_only=False)
    opt.load_state_dict(state["optimizer"])
    rng.setstate(state["rng"])
    gen.set_state(state["gen"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"])
