"""The trainer's loop gives bit-identical per-step values to a recorded reference run.

Two short seeded runs that between them pass through every branch of the loop: BAPO (the objective that reports
its own step scalars) with gradient accumulation, an lld drill (advantages hook) and sentinels; LLDS with a KL
reference model and an entropy bonus, GiGPO advantages, a token-level rollout correction, dynamic sampling, two
PPO epochs over one mini-batch, and a mismatch drill (rollout temperature hook). Every stored step value that does
not measure wall time is compared with ``==`` (NaN equal to NaN) against ``loop_reference.json``.

The reference was recorded from the trainer *before* the loop was split into phases (main 3edb74c, where
``train()`` was one 125-line function), with:

    .venv/bin/python -m tests.trainer.test_loop_reference --write

(the built-in tiny model from that cache, torch 2.13.0 CPU, one intra-op thread, CPython 3.11, x86_64). The model
is loaded once before the seeded run: a first run on a cold cache builds it inside ``train`` after the seed is set,
and the build's random draws would shift the run's. A change that
means to alter training (not only to move code) re-records it with the same command and says why in its commit.
Re-recorded on 2026-11-30 to add the new step column ``tool_calls_mean`` (the built-in agent's searches per
response): every other value was equal to the earlier recording's; and again (session 28) to add ``eval_score``,
NULL on every step (the built-in trainer logs no evaluation), every other value equal; and again (session 29) to add
``eval_size``, NULL on every step for the same reason, every other value equal (compared key by key).

**Pinned kernels.** torch picks its CPU kernels by the machine's instruction set, and the AVX-512 ones round
differently from the AVX2 ones: on an AVX-512 machine both the built model (its init draws and warm start) and the
run differed from the recording from the first step (a reward of 0.25 where 0.5 was recorded). So the reference runs
in a child process with ``ATEN_CPU_CAPABILITY=avx2`` (the kernels it was recorded with), one OpenMP thread, and its
own model cache, ``<collapsewatch cache>/loop-reference-avx2`` (built there once per machine, under the same
settings: about 35 s; the shared cache may hold a model built with other kernels or threads). ``--write`` runs the
same way. On a machine whose torch cannot take AVX2 kernels the test is skipped, naming the capability it has.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from collapsewatch import connect
from collapsewatch.cachedir import cache_dir
from collapsewatch.models import load_policy
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.loop import train

REFERENCE = Path(__file__).with_name("loop_reference.json")
SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120"]
RUNS: dict[str, dict[str, Any]] = {
    "bapo-accum-lld": dict(
        overrides=[*SMALL, "grad_accum=2", "sentinels=2"], steps=3, objective="bapo",
        drill={"kind": "lld", "at_step": 1, "strength": 4.0}),
    "llds-kl-gigpo-corr": dict(
        overrides=[*SMALL, "advantages=gigpo", "objective_params.kl_beta=0.01", "objective_params.entropy_coef=0.01",
                   "correction.is_level=token", "dynamic_sampling=2", "ppo_epochs=2", "mini_batches=1",
                   "sentinels=0"],
        steps=2, objective="llds", drill={"kind": "mismatch", "at_step": 0, "strength": 1.5}),
}
WALL_TIME = ("time", "rollout_time", "step_time", "weight_sync_time", "observe", "seconds")
"""Step columns whose name holds one of these measure wall time: not compared."""


def run_reference(name: str, store: Path) -> dict[str, Any]:
    """Train run ``name`` of RUNS into ``store`` on one intra-op thread; its step count, reward history and every
    non-wall-time step value, per step (floats as Python floats, so JSON round-trips them exactly)."""
    spec = RUNS[name]
    cfg = load_config(overrides=spec["overrides"], steps=spec["steps"], store=str(store), run=name, progress=False,
                      objective=spec["objective"], drill=spec["drill"], device="cpu")
    load_policy(cfg.model)  # build the model on a cold cache first: building draws from the seeded torch RNG
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a reduction split over threads may round differently: one thread, one order
    try:
        result = train(cfg)
    finally:
        torch.set_num_threads(threads)
    con = connect(store)
    cur = con.execute("SELECT * FROM steps WHERE run = ? ORDER BY step, rank", [name])
    cols = [d[0] for d in cur.description]
    keep = [c for c in cols if not any(w in c for w in WALL_TIME)]
    steps = [{c: v for c, v in zip(cols, row, strict=True) if c in keep} for row in cur.fetchall()]
    return {"steps_done": result.steps, "reward_history": result.reward_history,
            "steps": [{c: v for c, v in s.items() if isinstance(v, (int, float, bool)) or v is None} for s in steps]}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


CAPABILITY = "avx2"
"""The ATen CPU kernels the reference was recorded with (``ATEN_CPU_CAPABILITY``)."""


def pinned_env() -> dict[str, str]:
    """The child process's environment: AVX2 kernels, one OpenMP thread, the reference's own model cache."""
    return {**os.environ, "ATEN_CPU_CAPABILITY": CAPABILITY, "OMP_NUM_THREADS": "1",
            "COLLAPSEWATCH_CACHE": str(cache_dir() / f"loop-reference-{CAPABILITY}")}


def run_pinned(names: list[str]) -> dict[str, Any]:
    """``run_reference`` of each name in a child process under ``pinned_env`` (its JSON on stdout)."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "tests.trainer.test_loop_reference", "--json", *names],
                          cwd=root, env=pinned_env(), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise AssertionError(f"the pinned reference run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def pinned() -> dict[str, Any]:
    have = torch.backends.cpu.get_cpu_capability()
    if have not in ("AVX2", "AVX512"):
        pytest.skip(f"the reference was recorded with AVX2 kernels; this machine's torch has {have}")
    return run_pinned(sorted(RUNS))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_loop_reproduces_the_recorded_run_bit_for_bit(pinned, name):
    expected = json.loads(REFERENCE.read_text())[name]
    got = pinned[name]
    assert got["steps_done"] == expected["steps_done"]
    assert got["reward_history"] == expected["reward_history"]
    assert len(got["steps"]) == len(expected["steps"])
    for g, e in zip(got["steps"], expected["steps"], strict=True):
        assert sorted(g) == sorted(e), f"step {e['step']}: columns differ"
        diff = {c: (g[c], e[c]) for c in e if not _same(g[c], e[c])}
        assert not diff, f"step {e['step']}: (now, recorded) {diff}"
    # the reference is not trivially empty: losses, grad norms and the objectives' own step values are there
    assert all(s["loss"] is not None and s["grad_norm"] is not None for s in got["steps"])
    if name.startswith("bapo"):
        assert all(s["bapo_clip_low"] is not None for s in got["steps"])


def main(argv: list[str]) -> int:
    """``--json NAME …``: print those runs (the test's child process); ``--write``: re-record the reference under
    ``pinned_env`` (re-running itself there when this process is not)."""
    if argv[:1] == ["--json"]:
        out = {}
        for run_name in argv[1:]:
            with tempfile.TemporaryDirectory() as tmp:
                out[run_name] = run_reference(run_name, Path(tmp) / "store")
        print(json.dumps(out))
        return 0
    if argv != ["--write"]:
        print("usage: python -m tests.trainer.test_loop_reference --write   (re-records loop_reference.json)",
              file=sys.stderr)
        return 2
    out = run_pinned(sorted(RUNS))
    REFERENCE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {REFERENCE}: " + ", ".join(f"{k} ({len(v['steps'])} steps)" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
