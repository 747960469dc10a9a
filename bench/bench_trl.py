"""The monitor's cost on a real TRL GRPO step: the same tiny run with and without ``watch``, side by side in one run.

Each round trains a fresh, identically seeded ``GRPOTrainer`` twice — bare, and under
``collapsewatch.integrations.trl.watch`` with its defaults (token rows every 10th step + 5 % of sequences, detectors
on) — alternating which goes first, so drifting background load hits both alike. Runs are off-policy
(``steps_per_generation=2``), so the probe computes every ratio metric. Per run, over steps 2..N (whole rollouts;
step 1 is warm-up) between consecutive ``on_step_end`` callbacks:

* wall s/step and process CPU s/step (all threads), bare vs watched; the table gives medians over rounds;
* the monitor's own time, measured directly: training-thread time inside the tap (TokenBatch from TRL's tensors) and
  ``Monitor.observe`` / ``Monitor.log``, plus the recorder thread's CPU time (probe, step metrics, detectors,
  Parquet writes), per step — the number that does not drown in the machine's background load;
* ``close``: the end-of-train flush + compaction ``watch`` adds once per run.

Torch runs with ``--threads`` intra-op threads (default 1): on a shared 2-core machine two OpenMP threads stall
unpredictably under background load (bare runs of one config swung 3–10× between repeats).

    python bench/bench_trl.py [--rounds 5] [--steps 9] [--configs tiny,design] [--threads 1]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time

from transformers import TrainerCallback

from collapsewatch import Monitor
from collapsewatch.integrations.trl import watch
from collapsewatch.models.tiny import PRESETS, TOY_BODY
from collapsewatch.recorder import Recorder
from tests.integrations.trl_tiny import tiny_grpo_trainer

CONFIGS = {  # name -> (model body, GRPOConfig overrides); 2 micro-batches of per_device_train_batch_size per rollout
    # a ~50 ms step: exposes the monitor's fixed per-step costs
    "tiny": (TOY_BODY, dict(per_device_train_batch_size=16, num_generations=8, max_completion_length=8)),
    # the reference CPU shape (docs/trl.md, Cost): L2/d128 Qwen2 body, 64 completions × 64 tokens per rollout (vocab 300 here)
    "design": (PRESETS["tiny"], dict(per_device_train_batch_size=32, num_generations=8, max_completion_length=64)),
}
SPENT = {"hooks": 0.0, "recorder": 0.0}  # seconds in the monitor, this run


def _timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT["hooks"] += time.perf_counter() - t
    return wrapper


def _instrument() -> None:
    """Time Monitor.observe / log on the training thread and the recorder thread's CPU time."""
    Monitor.observe, Monitor.log = _timed(Monitor.observe), _timed(Monitor.log)
    run = Recorder.run

    def run_and_count(self):
        try:
            run(self)
        finally:
            SPENT["recorder"] += time.thread_time()
    Recorder.run = run_and_count


class StepClock(TrainerCallback):
    """Wall and process-CPU clocks at train begin and at every optimizer-step end."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.wall, self.cpu = [time.perf_counter()], [time.process_time()]

    def on_step_end(self, args, state, control, **kwargs):
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())


def one_run(workdir: str, name: str, body, overrides: dict, steps: int, watched: bool) -> dict[str, float]:
    trainer = tiny_grpo_trainer(os.path.join(workdir, "out"), body=body, max_steps=steps, steps_per_generation=2,
                                n_prompts=steps * 64, **overrides)
    clock = StepClock()
    trainer.add_callback(clock)
    SPENT.update(hooks=0.0, recorder=0.0)
    if watched:
        cb = watch(trainer, os.path.join(workdir, "store"), name)
        cb.tap.token_batch = _timed(cb.tap.token_batch)
    trainer.train()
    n = steps - 1
    return {"wall": (clock.wall[-1] - clock.wall[1]) / n, "cpu": (clock.cpu[-1] - clock.cpu[1]) / n,
            "monitor": (SPENT["hooks"] + SPENT["recorder"]) / steps, "train_thread": SPENT["hooks"] / steps,
            "close": time.perf_counter() - clock.wall[-1]}


def bench(config: str, rounds: int, steps: int) -> dict:
    body, overrides = CONFIGS[config]
    runs: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as workdir:
        one_run(workdir, f"{config}-warmup", body, overrides, 3, True)
        for r in range(rounds):
            for watched in ((False, True) if r % 2 == 0 else (True, False)):
                runs[watched].append(one_run(workdir, f"{config}-{r}", body, overrides, steps, watched))

    def med(watched: bool, key: str) -> float:
        return statistics.median(x[key] for x in runs[watched])

    n = overrides["per_device_train_batch_size"] * 2  # completions per rollout (steps_per_generation = 2)
    return {"config": config, "shape": f"{n}×{overrides['max_completion_length']}",
            **{f"{k}_{w}": med(flag, k) for k in ("wall", "cpu") for w, flag in (("bare", False), ("watched", True))},
            "monitor": med(True, "monitor"), "train_thread": med(True, "train_thread"), "close": med(True, "close")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=9, help="odd, so the timed steps cover whole rollouts")
    ap.add_argument("--configs", default="tiny,design")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    a = ap.parse_args()
    if a.steps < 3 or (a.steps - 1) % 2:
        raise SystemExit("--steps must be odd and >= 3")
    import torch
    import trl

    torch.set_num_threads(a.threads)
    _instrument()
    print(f"trl {trl.__version__}, torch {torch.__version__}, {a.threads} torch thread(s), {os.cpu_count()} cores, "
          f"load average at start {os.getloadavg()[0]:.1f}; {a.rounds} runs each way × {a.steps - 1} timed steps")
    rows = [bench(c, a.rounds, a.steps) for c in a.configs.split(",")]
    print("\n| config | rollout | wall s/step bare → watched | CPU s/step bare → watched | monitor ms/step "
          "(training thread) | monitor / bare CPU step | close s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        wall = f"{r['wall_bare']:.3f} → {r['wall_watched']:.3f} ({pct(r['wall_watched'], r['wall_bare'])})"
        cpu = f"{r['cpu_bare']:.3f} → {r['cpu_watched']:.3f} ({pct(r['cpu_watched'], r['cpu_bare'])})"
        print(f"| {r['config']} | {r['shape']} | {wall} | {cpu} | {1e3 * r['monitor']:.1f} ({1e3 * r['train_thread']:.1f}) "
              f"| {100 * r['monitor'] / r['cpu_bare']:.1f} % | {r['close']:.2f} |")


def pct(new: float, old: float) -> str:
    return f"{100 * (new - old) / old:+.1f} %"


if __name__ == "__main__":
    main()
