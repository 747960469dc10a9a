"""How flaky is tests/trainer/test_learning.py? Run its exact recipe under several training seeds; print a table.

    .venv/bin/python bench/learning_seeds.py [--seeds 0 1 2]

The test asserts success(after) ≥ success(before) + 0.1 on its 8 training questions (8 samples each) after 20 GRPO
steps at lr 5e-4. The trainer is deterministic on CPU for a fixed seed, so the test's own outcome only changes
with the torch build or the number of threads; other seeds show how much margin the threshold leaves.
"""

from __future__ import annotations

import argparse
import tempfile

from collapsewatch.env import build_kb, make_env_factory
from collapsewatch.models import load_policy, success_rate
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    policy = load_policy("builtin:tiny")
    kb = build_kb(policy.kb_config)
    tasks = kb.split()[0][:8]
    make_env = make_env_factory(kb)
    before = success_rate(policy.model, policy.tokenizer, tasks, make_env, group_size=8, seed=1)
    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as d:
            cfg = load_config(steps=20, store=d, run="learn", progress=False, lr=5e-4, seed=seed, n_train_tasks=8,
                              prompts_per_rollout=4, group_size=8)
            train(cfg)
            trained = load_policy(f"{d}/learn/checkpoint")
            after = success_rate(trained.model, trained.tokenizer, tasks, make_env, group_size=8, seed=1)
        rows.append((seed, before, after))
        print(f"seed {seed}: {before:.3f} -> {after:.3f}", flush=True)
    print(f"\n{'seed':>4}  {'before':>7}  {'after':>7}  {'gain':>6}  test passes (gain ≥ 0.1)")
    for seed, b, a in rows:
        print(f"{seed:>4}  {b:>7.3f}  {a:>7.3f}  {a - b:>+6.3f}  {'yes' if a >= b + 0.1 else 'NO'}")


if __name__ == "__main__":
    main()
