"""Learning is real: GRPO from the warm-started tiny model raises its success rate on the questions it trains on.

Sizes chosen so the effect dwarfs the noise: 8 training questions, 20 optimizer steps at lr 5e-4 (fixed seed).
The evaluation uses 8 samples per question (64 episodes, standard error ≈ 0.06) and asks for a gain of at least
0.1. Flakiness: the trainer is deterministic on CPU for a fixed seed and thread count, so the outcome can only
move with the torch build or the threads; ``bench/learning_seeds.py`` runs this recipe under training seeds
0–3 and measured 0.469 → 0.906 / 0.922 / 0.938 / 0.938 (gains 0.44–0.47, > 4 × the threshold).
"""

from __future__ import annotations

import pytest

from collapsewatch.env import build_kb, make_env_factory
from collapsewatch.models import load_policy, success_rate
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train


@pytest.mark.slow
def test_grpo_raises_success_on_its_training_questions(store):
    policy = load_policy("builtin:tiny")
    kb = build_kb(policy.kb_config)
    tasks = kb.split()[0][:8]
    make_env = make_env_factory(kb)
    before = success_rate(policy.model, policy.tokenizer, tasks, make_env, group_size=8, seed=1)
    cfg = load_config(steps=20, store=str(store), run="learn", progress=False, lr=5e-4, seed=0, n_train_tasks=8,
                      prompts_per_rollout=4, group_size=8)
    train(cfg)
    trained = load_policy(str(store / "learn" / "checkpoint"))
    after = success_rate(trained.model, trained.tokenizer, tasks, make_env, group_size=8, seed=1)
    assert after >= before + 0.1, (before, after)
