"""A training-like writer process for the concurrency and crash tests: STORE RUN RANK WORLD STEPS SLEEP [COMPACT]."""

import sys
import time

import torch

from collapsewatch import Monitor
from tests.conftest import random_batch

store, run, rank, world, steps, sleep = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), float(sys.argv[6])
compact_every = int(sys.argv[7]) if len(sys.argv) > 7 else 64
torch.set_num_threads(1)
with Monitor(store, run=run, rank=rank, world_size=world, flush_steps=1, flush_seconds=0.5,
             detectors=False, compact_every=compact_every) as mon:
    for step in range(steps):
        mon.observe(random_batch(B=4, T=8, seed=step + 1000 * rank), step=step)
        mon.log(step, {"grad_norm": float(step), "lr": 1e-5})
        if step % 5 == 4:
            mon.flush()  # every 5th step is known to be on disk: the crash test checks those
            print(f"flushed {step}", flush=True)
        time.sleep(sleep)
print("done", flush=True)
