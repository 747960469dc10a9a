"""The monitor's cost on a real TRL GRPO step: the same tiny run with and without ``watch``, side by side in one run.

Each round trains a fresh, identically seeded ``GRPOTrainer`` twice — once bare, once under
``collapsewatch.integrations.trl.watch`` with its defaults (token rows every 10th step + 5 % of sequences,
detectors on) — alternating which goes first, so drifting background load hits both alike. A step's time is the
wall time between consecutive ``on_step_end`` callbacks (generation, forward/backward, optimizer, logging), the
first step of every run is dropped (warm-up); a run's cost is its mean step time over whole generation cycles, and
the table gives the median over rounds of those means (one untimed warm-up run per config first). ``close`` is the end-of-
train flush + compaction that ``watch`` adds once per run. Runs are off-policy (``steps_per_generation=2``), so the
probe computes every ratio metric.

    python bench/bench_trl.py [--rounds 5] [--steps 9] [--configs tiny,small]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time

from transformers import TrainerCallback

from collapsewatch.integrations.trl import watch
from collapsewatch.integrations.trl_tiny import TINY_BODY, tiny_grpo_trainer
from collapsewatch.models.tiny import PRESETS

CONFIGS = {  # name -> (model body, GRPOConfig overrides)
    "tiny": (TINY_BODY, dict(per_device_train_batch_size=16, num_generations=8, max_completion_length=8)),
    "small": (PRESETS["tiny"], dict(per_device_train_batch_size=32, num_generations=8, max_completion_length=32)),
}


class StepClock(TrainerCallback):
    """Wall time between consecutive optimizer-step ends."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.ends = [time.perf_counter()]

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())

    def step_times(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.ends[1:])]  # drops the first (warm-up) step


def one_run(workdir: str, name: str, body, overrides: dict, steps: int, watched: bool) -> tuple[float, float]:
    """(mean step time over steps 2..steps, seconds the run spends after its last step)."""
    trainer = tiny_grpo_trainer(os.path.join(workdir, "out"), body=body, max_steps=steps, steps_per_generation=2,
                                n_prompts=steps * 64, **overrides)
    clock = StepClock()
    trainer.add_callback(clock)
    if watched:
        watch(trainer, os.path.join(workdir, "store"), name)
    trainer.train()
    close_s = time.perf_counter() - clock.ends[-1]  # on_train_end work after the last step (the Monitor's close)
    return statistics.mean(clock.step_times()), close_s


def bench(config: str, rounds: int, steps: int) -> dict:
    body, overrides = CONFIGS[config]
    if (steps - 1) % 2:
        raise ValueError("--steps must be odd: the timed steps (all but the first) must cover whole rollouts")
    means: dict[bool, list[float]] = {False: [], True: []}
    closes = []
    with tempfile.TemporaryDirectory() as workdir:
        one_run(workdir, f"{config}-warmup", body, overrides, 3, True)
        for r in range(rounds):
            for watched in ((False, True) if r % 2 == 0 else (True, False)):
                mean_s, close_s = one_run(workdir, f"{config}-{r}", body, overrides, steps, watched)
                means[watched].append(mean_s)
                if watched:
                    closes.append(close_s)
    base, mon = statistics.median(means[False]), statistics.median(means[True])
    pairs = sorted((w - b) / b for b, w in zip(means[False], means[True], strict=True))
    n = overrides["per_device_train_batch_size"] * 2  # completions per generation (steps_per_generation = 2)
    return {"config": config, "shape": f"{n}×{overrides['max_completion_length']}", "runs": rounds,
            "base": base, "watched": mon, "overhead": (mon - base) / base, "range": (pairs[0], pairs[-1]),
            "close": statistics.median(closes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--configs", default="tiny,small")
    a = ap.parse_args()
    import torch
    import trl

    print(f"trl {trl.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load average at start {os.getloadavg()[0]:.1f}")
    rows = [bench(c, a.rounds, a.steps) for c in a.configs.split(",")]
    print(f"\n{a.steps - 1} timed steps per run, {a.rounds} runs each way (median of per-run means)")
    print("| config | completions×tokens per rollout | bare s/step | watched s/step | overhead | per-round range "
          "| close s (once per run) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["range"]
        print(f"| {r['config']} | {r['shape']} | {r['base']:.3f} | {r['watched']:.3f} | {100 * r['overhead']:+.1f} % "
              f"| {100 * lo:+.1f} … {100 * hi:+.1f} % | {r['close']:.2f} |")


if __name__ == "__main__":
    main()
