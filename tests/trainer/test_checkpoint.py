"""Checkpoints carry a built-in model's knowledge base from the folder the policy was loaded from, passed explicitly
(no attribute patched onto the model), so a resumed run plays on the same task."""

from __future__ import annotations

import dataclasses
import random

import torch

from collapsewatch.models.builtin import META_FILE
from collapsewatch.trainer.checkpoint import load_checkpoint, save_checkpoint
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.setup import load_task_and_policy

CPU = torch.device("cpu")


def test_checkpoint_copies_the_kb_description_from_the_explicit_source(tmp_path):
    cfg = load_config(store=str(tmp_path), run="ck", kb_seed=7, progress=False)
    model, tokenizer, kb, source = load_task_and_policy(cfg, CPU)
    assert not hasattr(model, "collapsewatch_source")  # the source path travels as a return value
    assert (source / META_FILE).is_file()  # the built-in's cache folder
    assert kb.config.seed != 7  # a built-in brings its own KB; kb_seed is ignored for it
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng, gen = random.Random(0), torch.Generator().manual_seed(0)
    target = save_checkpoint(cfg, model, tokenizer, opt, rng, gen, 3, source=source)
    assert (target / META_FILE).read_bytes() == (source / META_FILE).read_bytes()

    # resuming loads the checkpoint folder, which now names the same KB: same tasks, same order
    resumed = load_task_and_policy(dataclasses.replace(cfg, resume=True), CPU)
    assert resumed[3] == target
    assert resumed[2].config == kb.config and resumed[2].split()[0][:5] == kb.split()[0][:5]
    assert load_checkpoint(cfg, model, opt, random.Random(1), torch.Generator()) == 3

    # a source without a description (an external HF folder) writes none, and the KB falls back to kb_seed
    save_checkpoint(cfg, model, tokenizer, opt, rng, gen, 4, source=tmp_path / "no-meta")
    assert not (target / META_FILE).exists()
    assert load_task_and_policy(dataclasses.replace(cfg, resume=True), CPU)[2].config.seed == 7
