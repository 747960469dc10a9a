"""HF ``generate`` engine vs the vLLM engine on the built-in model: rollout tokens/s, weight-sync cost, whole step.

Runs in the vLLM environment (``make vllm-env``), one process, both engines side by side:

1. **Rollout**: the same 8 training questions × G = 8 episodes (τ = 1, default budgets: up to 4 turns, 40 tokens a
   turn, 200 a response), HF and vLLM (fp32, the trainer's dtype) alternating for ``--rounds`` rounds after one
   warm-up rollout each. tokens/s = model tokens generated (``loss_mask``) / rollout wall time; medians.
2. **sync_weights**: the vLLM engine's in-memory weight copy (``torch.save`` to bytes → vLLM's engine process →
   ``reload_weights`` → prefix-cache reset), ``--rounds`` times, median.
3. **Whole step**: ``train()`` at its defaults (8 × 8 episodes per rollout, 2 optimizer steps per rollout) with
   ``rollout.engine=hf`` and ``=vllm``, ``--steps`` steps each; a rollout cycle = wall time between the
   ``Monitor.log`` calls that end consecutive rollouts' last steps (rollout + sync + π_old + 2 optimizer steps +
   monitor); median over cycles 2.. (the first includes warm-up), reported per optimizer step (cycle / 2).
   Engine start-up and model loading are outside the timed windows and reported once.

    nice -n 10 .venv-vllm/bin/python -m bench.bench_vllm [--preset tiny] [--rounds 5] [--steps 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from collapsewatch.env import build_kb, make_env_factory
from collapsewatch.models import BuiltinSpec, load_builtin
from collapsewatch.rollout import HFRolloutEngine, RolloutConfig
from collapsewatch.rollout.vllm_engine import VLLMRolloutEngine


def rollouts(args: argparse.Namespace) -> None:
    spec = BuiltinSpec(preset=args.preset)
    policy = load_builtin(spec)
    kb = build_kb(spec.kb)
    train_tasks, _ = kb.split(spec.eval_fraction)
    make_env = make_env_factory(kb, spec.env)
    cfg = RolloutConfig(max_turn_tokens=40, max_response_tokens=200)
    hf = HFRolloutEngine(policy.model, policy.tokenizer, cfg)
    t0 = time.perf_counter()
    vl = VLLMRolloutEngine(policy.model, policy.tokenizer, cfg, dtype="float32")
    print(f"vLLM engine start: {time.perf_counter() - t0:.1f} s")
    rates: dict[str, list[float]] = {"hf": [], "vllm": []}
    tasks = train_tasks[:8]
    for rnd in range(args.rounds + 1):
        order = [("hf", hf), ("vllm", vl)] if rnd % 2 == 0 else [("vllm", vl), ("hf", hf)]
        for name, engine in order:
            torch.manual_seed(rnd)
            t0 = time.perf_counter()
            batch = engine.rollout(tasks, make_env, 8)
            seconds = time.perf_counter() - t0
            if rnd > 0:  # round 0 warms both up
                rates[name].append(float(batch.loss_mask.sum()) / seconds)
    for name, r in rates.items():
        print(f"rollout {name:4s}: {statistics.median(r):8.0f} model tokens/s (median of {len(r)}; "
              f"min {min(r):.0f}, max {max(r):.0f})")
    print(f"rollout vllm/hf: {statistics.median(rates['vllm']) / statistics.median(rates['hf']):.2f}x")
    syncs = []
    for _ in range(args.rounds):
        vl.sync_weights(policy.model)
        syncs.append(vl.sync_seconds)
    n_params = sum(p.numel() for p in policy.model.parameters())
    print(f"sync_weights: {statistics.median(syncs):.3f} s median of {len(syncs)} ({n_params / 1e6:.2f} M params)")
    vl.close()


def whole_steps(args: argparse.Namespace, engine: str) -> list[float]:
    from collapsewatch.monitor import Monitor
    from collapsewatch.trainer.config import load_config
    from collapsewatch.trainer.loop import train

    stamps: list[float] = []
    original = Monitor.log

    def timed_log(self, step, values):  # noqa: ANN001
        out = original(self, step, values)
        stamps.append(time.perf_counter())
        return out

    Monitor.log = timed_log
    try:
        with tempfile.TemporaryDirectory() as store:
            cfg = load_config(overrides=[f"rollout.engine={engine}", "progress=false"], steps=args.steps,
                              store=store, run=engine, model=f"builtin:{args.preset}")
            t0 = time.perf_counter()
            train(cfg)
            print(f"train {engine}: {time.perf_counter() - t0:.1f} s wall for {args.steps} steps (with set-up)")
    finally:
        Monitor.log = original
    ends = stamps[1::2]  # the last step of each rollout (2 mini-batches per rollout)
    return [(b - a) / 2 for a, b in zip(ends, ends[1:], strict=False)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"cpus={os.cpu_count()} torch_threads={torch.get_num_threads()} load={os.getloadavg()[0]:.2f}")
    rollouts(args)
    per_step = {engine: whole_steps(args, engine) for engine in ("hf", "vllm")}
    for engine, s in per_step.items():
        print(f"whole step {engine:4s}: {statistics.median(s):.2f} s per optimizer step (median of {len(s)} cycles)")
    print(f"whole step vllm/hf: {statistics.median(per_step['vllm']) / statistics.median(per_step['hf']):.2f}x; "
          f"load={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
