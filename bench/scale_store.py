"""The stores ``bench.bench_scale`` measures: N runs written through the public ``Monitor`` API, and one live run.

    python -m bench.scale_store STORE --runs 100 [--steps 50] [--B 16] [--T 48]   # add runs until STORE has 100
    python -m bench.scale_store STORE --live RUN --seconds 60                    # one run writing a step every 0.5 s

Each run is a small GRPO-like batch stream (B sequences × T tokens per step, groups of 8) with its own seed and a
``config`` of sweep axes (``lr``, ``seed``, ``kl``); runs with a large ``lr`` lose reward after half their steps, so
some verdicts are "collapsed". Runs are written one after another in this process, each closed (compaction and
export, as a finished run is) before the next starts. A store is grown, never rewritten: a 100-run store holds the
10-run store's runs.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch

from collapsewatch import Monitor, TokenBatch

LRS = (1e-6, 3e-6, 1e-5, 3e-5)


def run_name(i: int) -> str:
    return f"sweep-{i:04d}"


def run_config(i: int) -> dict:
    return {"lr": LRS[i % len(LRS)], "seed": i, "kl": (0.0, 0.01)[(i // len(LRS)) % 2]}


def step_batch(i: int, step: int, steps: int, B: int, T: int) -> TokenBatch:
    """Run ``i``'s batch at ``step``: rewards fall after half the run when its ``lr`` is the largest."""
    g = torch.Generator().manual_seed(i * 100_003 + step)
    collapse = run_config(i)["lr"] == LRS[-1] and step > steps // 2
    p_correct = 0.6 - (0.5 * (step - steps // 2) / steps if collapse else 0.0)
    logp_old = -torch.rand(B, T, generator=g) * 3
    rewards = (torch.rand(B, generator=g) < p_correct).float()
    adv = rewards - rewards.view(-1, 8).mean(1).repeat_interleave(8)
    return TokenBatch(
        logp=logp_old + 0.1 * torch.randn(B, T, generator=g), mask=(torch.rand(B, T, generator=g) > 0.2).float(),
        logp_old=logp_old, logp_rollout=logp_old + 0.01 * torch.randn(B, T, generator=g),
        entropy=torch.rand(B, T, generator=g) * (0.3 if collapse else 1.0), advantages=adv,
        token_ids=torch.randint(0, 1000, (B, T), generator=g), group_ids=torch.arange(B) // 8, rewards=rewards)


def write_run(store: Path, i: int, steps: int, B: int, T: int) -> None:
    mon = Monitor(store, run=run_name(i), config=run_config(i), objective="grpo", rank=0, world_size=1)
    for step in range(steps):
        mon.observe(step_batch(i, step, steps, B, T), step=step)
        mon.log(step, {"grad_norm": 1.0 + (step % 7) / 10, "lr": run_config(i)["lr"]})
    mon.close()


def grow(store: Path, runs: int, steps: int, B: int, T: int) -> int:
    """Write runs until ``store`` holds ``runs`` of them (existing ones are kept); returns how many were written."""
    have = sum(1 for i in range(runs) if (store / run_name(i) / "runs").is_dir())
    for i in range(have, runs):
        if (store / run_name(i)).exists():  # a run left half written by an interrupted generation
            shutil.rmtree(store / run_name(i))
        write_run(store, i, steps, B, T)
    return runs - have


def live(store: Path, run: str, seconds: float, B: int, T: int) -> None:
    """A running run: one step every 0.5 s for ``seconds``, flushed every 2 steps, then closed."""
    mon = Monitor(store, run=run, config={"lr": 1e-6, "seed": -1, "kl": 0.0}, objective="grpo", rank=0,
                  world_size=1, flush_steps=2, flush_seconds=1.0)
    end, step = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        mon.observe(step_batch(10**6, step, 10**6, B, T), step=step)
        step += 1
        time.sleep(0.5)
    mon.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=48)
    ap.add_argument("--live", help="write one live run of this name instead")
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    if a.live:
        live(a.store, a.live, a.seconds, a.B, a.T)
        return
    t0 = time.perf_counter()
    n = grow(a.store, a.runs, a.steps, a.B, a.T)
    print(f"wrote {n} run(s) into {a.store} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
