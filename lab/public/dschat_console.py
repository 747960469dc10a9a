"""A DeepSpeed-Chat step-3 (RLHF, PPO) console log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

DeepSpeedExamples' ``applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py`` (read at 3a77097, the commit
that added the authors' shared log) prints, on rank 0, two lines after each generation batch's PPO update:

    epoch: 0|step: 12|ppo_ep: 1|act_loss: 0.1148681640625|cri_loss: 0.0623779296875|unsuper_loss: 0.0
    average reward score: -0.61328125

``step`` counts the prompt batches from 0. ``average reward score`` is ``exp_data["rewards"].mean()`` — the reward
model's score of each generated answer, before the KL penalty ``compute_rewards`` adds per token — averaged over the
ranks (``get_all_reduce_mean``): the batch's mean reward, → ``reward_mean``. The two losses are *not* the actor's and
the critic's. The loop reads ``actor_loss, critic_loss = trainer.train_rlhf(exp_data)``, then
``critic_loss += actor_loss.item()`` and ``actor_loss += critic_loss.item()``: with one update a step (inner_iter 1),
the printed ``cri_loss`` is actor + critic and ``act_loss`` is 2 × actor + critic, both rank 0's. So the actor's PPO
loss is act_loss − cri_loss (→ ``loss_policy``) and the critic's clipped value loss is 2 × cri_loss − act_loss (kept
as ``dschat/critic_loss``, which no detector reads). The shared log bears this reading out: its printed cri_loss goes
below zero (to −0.34), which a squared-error loss cannot, while 2 × cri_loss − act_loss stays ≥ 0.003 on all 477 steps.
The reading holds only for one update a step, so the ``cmd =`` line the log opens with must set one PPO epoch, one
generation batch and the same generation and training batch size (either spelling of the flags, before and after
DeepSpeedExamples' rename in #698); ``ppo_ep`` must be 1 and ``unsuper_loss`` 0 (no pretraining mix). The fp16 loss
scalers' ``[deepspeed] OVERFLOW! Rank 0 Skipping step`` lines (actor's and critic's engines, each skipping its update)
printed before a step's line are counted into ``dschat/fp16_overflows`` of that step. Every other line (DeepSpeed's
lr and timer lines every 10 optimizer steps, the latency lines, start-up and shutdown) is skipped.

    python dschat_console.py RUN.dschat.log OUT.jsonl
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import main_text  # noqa: E402

STEP = re.compile(r"^epoch: (\d+)\|step: (\d+)\|ppo_ep: (\d+)\|act_loss: (\S+)\|cri_loss: (\S+)\|unsuper_loss: (\S+)\s*$")
REWARD = re.compile(r"^average reward score: (\S+)\s*$")
OVERFLOW = re.compile(r"\[deepspeed\] OVERFLOW! Rank \d+ Skipping step")
# the flags that make one update a step; old spelling | new spelling (DeepSpeedExamples #698)
ONE_UPDATE = {r"--ppo_epochs (\S+)": "1", r"--(?:generation_batch_numbers|generation_batches) (\S+)": "1"}
BATCHES = (r"--(?:per_device_train_batch_size|per_device_generation_batch_size) (\S+)",
           r"--(?:per_device_mini_train_batch_size|per_device_training_batch_size) (\S+)")


def _check_cmd(text: str) -> None:
    cmd = next((line for line in text.splitlines() if line.startswith("cmd = ")), None)
    if cmd is None:
        raise ValueError("no 'cmd = ' line: the run's PPO settings are unknown")
    for flag, want in ONE_UPDATE.items():
        m = re.search(flag, cmd)
        if m is None or m.group(1) != want:
            raise ValueError(f"the cmd line does not set {flag.split(' ')[0]} to {want}: more than one update a step")
    sizes = [re.search(flag, cmd) for flag in BATCHES]
    if None in sizes or sizes[0].group(1) != sizes[1].group(1):  # type: ignore[union-attr]
        raise ValueError("the cmd line's generation and training batch sizes differ: more than one update a step")


def convert(text: str) -> list[dict]:
    _check_cmd(text)
    rows: list[dict] = []
    overflows = 0
    pending: dict | None = None  # a step line waiting for its reward line
    for n, line in enumerate(text.splitlines(), start=1):
        if OVERFLOW.search(line):
            overflows += 1
        elif m := STEP.match(line):
            if pending is not None:
                raise ValueError(f"line {n}: step {pending['step']} has no reward line")
            epoch, step, ppo_ep = int(m.group(1)), int(m.group(2)), int(m.group(3))
            act, cri, unsup = float(m.group(4)), float(m.group(5)), float(m.group(6))
            if epoch != 0 or ppo_ep != 1 or unsup != 0.0:
                raise ValueError(f"line {n}: epoch {epoch}, ppo_ep {ppo_ep}, unsuper_loss {unsup}: not one epoch of "
                                 "one PPO update without a pretraining mix")
            if rows and step != rows[-1]["step"] + 1:
                raise ValueError(f"line {n}: step {step} after step {rows[-1]['step']}")
            pending = {"step": step, "loss_policy": act - cri, "dschat/critic_loss": 2 * cri - act,
                       "dschat/fp16_overflows": overflows}
            overflows = 0
        elif m := REWARD.match(line):
            if pending is None:
                raise ValueError(f"line {n}: a reward line without its step line")
            rows.append({"step": pending["step"], "reward_mean": float(m.group(1)),
                         **{k: v for k, v in pending.items() if k != "step"}})
            pending = None
    if pending is not None:
        raise ValueError(f"step {pending['step']} has no reward line")
    if not rows:
        raise ValueError("no step line")
    return rows


def main(argv: list[str]) -> int:
    return main_text(argv, "python lab/public/dschat_console.py RUN.dschat.log OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
