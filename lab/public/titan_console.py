"""One repository's own RL console log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

QIU023/torchtitan_attention_residual runs GRPO (and one PPO) with torchtitan's experimental RL stack
(``torchtitan/experiments/rl``: PolicyTrainer + an SGLang generator, Monarch actors). Its entry scripts
(``phase11/rlhf/run_grpo_sum_digits.py``, ``run_grpo_llava_kimi.py``) print one line per step through ``logging``:

    [actor=<root>] step  29  loss=1.4912  reward_mean=+0.688  dt=0.9s

``loss`` is the first trainer rank's ``metrics["loss"]`` for the step; ``reward_mean`` is the mean reward over all the
step's episodes (4 prompts a step, each sampled as a group; the grader's rule-based reward); ``dt`` the wall time of
the whole step (rollout, grading, update, weight push). Every 5th step the script also prints sample episodes
(``[+] … reward=…`` lines): samples, not the whole batch, so they are left out. No library writes this line, so this
lab script declares its keys: ``reward_mean`` → ``reward_mean``, ``loss`` → ``loss``, ``dt`` → ``step_time``; step =
the printed step (from 0). Every other line (warnings, NCCL, progress bars, samples) is skipped.

    python titan_console.py RUN.titan.log OUT.jsonl
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import main_text  # noqa: E402

STEP = re.compile(r"^\[actor=<root>\] step\s+(\d+)\s+loss=(\S+)\s+reward_mean=(\S+)\s+dt=([0-9.]+)s\s*$")


def convert(text: str) -> list[dict]:
    out: dict[int, dict] = {}
    for line in text.splitlines():
        m = STEP.match(line)
        if not m:
            continue
        step = int(m.group(1))
        if step in out:
            raise ValueError(f"step {step} printed twice")
        out[step] = {"step": step, "loss": float(m.group(2)), "reward_mean": float(m.group(3)),
                     "step_time": float(m.group(4))}
    if not out:
        raise ValueError("no step line")
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    return main_text(argv, "python lab/public/titan_console.py RUN.log OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
