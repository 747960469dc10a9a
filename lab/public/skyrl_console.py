"""A SkyRL (skyrl-train) run's console → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

skyrl-train's trainer logs through loguru, one block per training step (mert-cemri/CTU-Agent-v0's vendored copy,
``SkyRL_mod/skyrl-train/skyrl_train/trainer.py`` and ``workers/worker.py``, read at the commit the run was taken from):

    ... | INFO | skyrl_train.trainer:compute_advantages_and_returns:962 - avg_raw_rewards: 0.41, avg_response_length: 641.0
    ... | INFO | skyrl_train.trainer:train:390 - {'policy_loss': ..., 'policy_lr': ..., 'ppo_clip_ratio': ...,
                                                   'policy_entropy': ..., 'policy_kl': ..., 'raw_grad_norm': ..., ...}
    Training Step Progress:   0%|          | 1/1150 [...]

The dict is the policy's train status, which the trainer also sends to its tracker as ``policy/<key>``; the line
before it gives the batch's mean reward and mean response length in tokens (``loss/avg_raw_rewards``). Their
meanings, from the worker's code: ``ppo_clip_ratio`` the token share whose clipped surrogate is the one used
(``masked_mean(-surr2 > -surr1)``: PPO's clip fraction → ``clip_region_frac``), ``policy_kl`` the masked KL loss to
the reference (→ ``kl_ref_mean``), ``raw_grad_norm`` the norm before clipping (→ ``grad_norm``), ``policy_loss`` →
``loss``, ``policy_lr`` → ``lr``; ``avg_raw_rewards`` → ``reward_mean``, ``avg_response_length`` →
``response_length_mean``. ``policy_entropy`` is *not* ``entropy_mean``: it is ``entropy_BS.sum() / numel()`` over
the whole response window, unmasked — the padding after EOS and, in a multi-turn episode, the tool outputs the model
did not write are in it — so it keeps its own name, ``skyrl/policy_entropy_unmasked``, which no detector reads
(docs/lab/public_runs.md, session 45: first converted as ``entropy_mean``, it drew an ``entropy/diffuse`` warning
on the run's last points). SkyRL's own repository (NovaSky-AI/SkyRL @ a956457, 2026-08) now takes
``masked_mean(entropy_BS, loss_mask)``: the key's meaning depends on the version, so a reader of SkyRL logs must know
which wrote them. Step = the dict's rank
(1, 2, …), checked against the ``Training Step Progress: N/M`` bar that follows where the bar shows one; the reward
line counts for the next dict only. Every other line (generation samples, timings, W&B warnings, evaluation) is
skipped; a progress bar may share its line with the next log line (tqdm's carriage returns), which is read too.

    python skyrl_console.py RUN.skyrl.log OUT.jsonl
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import main_text  # noqa: E402

STATUS = re.compile(r"skyrl_train\.trainer:train:\d+ - (\{'policy_loss'.*\})\s*$")
REWARD = re.compile(r"compute_advantages_and_returns:\d+ - avg_raw_rewards: (\S+), avg_response_length: (\S+)\s*$")
PROGRESS = re.compile(r"Training Step Progress:.*?\|\s*(\d+)/(\d+)")
KEYS = {"policy_loss": "loss", "policy_lr": "lr", "ppo_clip_ratio": "clip_region_frac",
        "policy_entropy": "skyrl/policy_entropy_unmasked", "policy_kl": "kl_ref_mean", "raw_grad_norm": "grad_norm"}


def convert(text: str) -> list[dict]:
    rows: list[dict] = []
    pending: dict | None = None  # the reward line waiting for its step's status dict
    for raw in text.splitlines():
        for line in raw.split("\r"):
            if (bar := PROGRESS.search(line)) and int(bar.group(1)) > len(rows):  # a bar ahead: a dict was missed
                raise ValueError(f"progress bar at step {bar.group(1)} after {len(rows)} status dict(s)")
            if m := REWARD.search(line):
                pending = {"reward_mean": float(m.group(1)), "response_length_mean": float(m.group(2))}
            elif m := STATUS.search(line):
                status = ast.literal_eval(m.group(1))
                if not isinstance(status, dict):
                    raise ValueError(f"status line {len(rows) + 1} is not a dict")
                row = {"step": len(rows) + 1, **(pending or {})}
                row.update({KEYS[k]: float(v) for k, v in status.items() if k in KEYS})
                rows.append(row)
                pending = None
    if not rows:
        raise ValueError("no training status line (skyrl_train.trainer:train … {'policy_loss': …})")
    return rows


def main(argv: list[str]) -> int:
    return main_text(argv, "python lab/public/skyrl_console.py RUN.log OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
