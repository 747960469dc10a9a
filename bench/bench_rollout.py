"""Measure the built-in pipeline on this machine: warm-start time and success, rollout time, logp parity.

    python bench/bench_rollout.py [--preset tiny] [--seed 0] [--threads 2] [--fresh]

``--fresh`` builds into a temporary cache (times the full build); otherwise the shared cache is used and
the build time reported is the one recorded when the cached copy was made.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from collapsewatch.env.kb import build_kb
from collapsewatch.env.search import make_env_factory
from collapsewatch.models.builtin import BuiltinSpec, load_builtin
from collapsewatch.rollout.engine import RolloutConfig
from collapsewatch.rollout.hf import HFRolloutEngine
from collapsewatch.rollout.logprobs import recompute_logprobs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch default)")
    parser.add_argument("--fresh", action="store_true", help="build into a temporary cache")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"cpus={os.cpu_count()} torch_threads={torch.get_num_threads()} load={os.getloadavg()[0]:.2f}")
    spec = BuiltinSpec(preset=args.preset, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        policy = load_builtin(spec, tmp if args.fresh else None)
        print(f"load_builtin: {time.perf_counter() - start:.1f} s (recorded build {policy.build_seconds:.1f} s)")
    r = policy.report
    if r is not None:
        print(
            f"warm start: {r.steps} steps in {r.seconds:.1f} s, model-token nll {r.final_loss:.3f}, "
            f"success (τ=1, {r.eval_tasks} held-out tasks) {r.success_before:.3f} -> {r.success_after:.3f}"
        )
    kb = build_kb(spec.kb)
    train, _ = kb.split(spec.eval_fraction)
    make_env = make_env_factory(kb, spec.env)
    engine = HFRolloutEngine(policy.model, policy.tokenizer, RolloutConfig())
    times, batch = [], None
    for rep in range(3):
        torch.manual_seed(rep)
        start = time.perf_counter()
        batch = engine.rollout(train[rep * args.prompts : (rep + 1) * args.prompts], make_env, args.group)
        times.append(time.perf_counter() - start)
    n_model = int(batch.loss_mask.sum())
    print(
        f"rollout {args.prompts} prompts x G={args.group}: median {statistics.median(times):.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in times)}); last batch {tuple(batch.input_ids.shape)}, "
        f"{n_model} model tokens, reward {batch.rewards.mean():.3f}, turns {batch.n_turns.float().mean():.2f}"
    )
    logp = recompute_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.temperature)
    diff = ((logp - batch.logp_rollout) * batch.loss_mask).abs().max().item()
    print(f"max |logp_recomputed - logp_rollout| on model tokens: {diff:.2e}")


if __name__ == "__main__":
    main()
