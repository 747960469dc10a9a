"""Cost of ``loss_mode=collapsewatch`` in verl's actor update on CPU: the same update (verl 0.9.1's own driver, worker,
engine step and loss code, tests/integrations/verl_cpu.py) with ``loss_mode=vanilla`` and with the tap recording into
a store, interleaved, median of N. Run in .venv-verl:

    .venv-verl/bin/python bench/bench_verl_tap.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

import verl_cpu  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from collapsewatch.integrations import verl as cw_verl  # noqa: E402
from collapsewatch.integrations import verl_driver  # noqa: E402
from collapsewatch.models.tiny import ModelPreset, build_model  # noqa: E402


class _Patch:
    """pytest's monkeypatch.setattr, without pytest."""

    def setattr(self, obj, name, value):  # noqa: ANN001, ANN201
        setattr(obj, name, value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--resp-len", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    verl_cpu.cpu_world()
    verl_cpu.patch_cpu_device(_Patch())
    verl_driver.install(RayPPOTrainer)
    store = tempfile.mkdtemp()
    os.environ.update({cw_verl.ENV_STORE: store, cw_verl.ENV_RUN: "bench"})
    rewards = [float(i % 3 == 0) for i in range(args.prompts * args.n)]
    times: dict[str, list[float]] = {"vanilla": [], "collapsewatch": []}
    for rep in range(args.repeats + 1):  # the first round warms up and is not counted
        for mode in times:
            model = build_model(ModelPreset(n_layers=2, d_model=128, n_heads=4), verl_cpu.VOCAB, verl_cpu.PAD,
                                verl_cpu.EOS, seed=0).float()
            cfg = verl_cpu.actor_config(args.prompts // 2, args.n * 2, args.n, loss_mode=mode)
            trainer = verl_cpu.driver(verl_cpu.training_worker(model, cfg), n=args.n, mini=args.prompts // 2,
                                      step=rep + 1)
            batch = verl_cpu.rollout_batch(model, rewards, n=args.n, prompt_len=16, resp_len=args.resp_len, seed=rep)
            t0 = time.perf_counter()
            trainer._update_actor(batch)
            if mode == "collapsewatch":
                cw_verl.TAP.monitor.flush()  # the recorder's work for this step is counted too
            if rep:
                times[mode].append(time.perf_counter() - t0)
    cw_verl.TAP.monitor.close()
    med = {m: statistics.median(t) for m, t in times.items()}
    B = args.prompts * args.n
    print(f"verl actor update on CPU, {B} sequences x {args.resp_len} response tokens, 2 mini-batches, "
          f"Qwen2 L2/d128/vocab {verl_cpu.VOCAB}, 1 torch thread, median of {args.repeats}")
    print("| loss_mode | update s (median) | min | max |")
    print("|---|---|---|---|")
    for m, t in times.items():
        print(f"| {m} | {med[m]:.3f} | {min(t):.3f} | {max(t):.3f} |")
    print(f"overhead: {100 * (med['collapsewatch'] / med['vanilla'] - 1):+.1f} %")


if __name__ == "__main__":
    main()
