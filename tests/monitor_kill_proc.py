"""A trainer that outruns its recorder, then SIGKILLs itself: STORE FLUSH_STEPS STEPS (tests/test_recorder.py)."""

import os
import signal
import sys

import torch

from collapsewatch import Monitor
from tests.conftest import random_batch

store, flush_steps, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
batch = random_batch(B=16, T=32)  # made once: each step costs the trainer a copy, the recorder a probe and a flush
mon = Monitor(store, run="kill", flush_steps=flush_steps, flush_seconds=3600, detectors=False)
for step in range(steps):
    mon.observe(batch, step=step)
    mon.log(step, {"grad_norm": 1.0})
os.kill(os.getpid(), signal.SIGKILL)  # every step was handed to the monitor; nothing was closed
