"""One run of katop1234/softmaxed_rewards' ``results/all_experiments.csv`` → a JSONL file `collapsewatch ingest`
reads (docs/lab/public_runs.md).

The repository (a fork of GRPO-Zero, a plain-PyTorch GRPO trainer, on Countdown; GRPO's linear reward
normalisation against softmax weighting at temperatures τ) commits every run's per-step metrics in one CSV:
``experiment,tau,step,train_success,mean_reward,entropy,grad_norm,response_len,eval_success``, one row per step of
each run (``experiment``: ``baseline``, ``softmax_tau0.25`` …). No library writes it, so this script declares what the
columns mean, from the authors' ``notes.md`` and ``scripts/plot_results.py`` (which reads the same quantities off the
trainer's console lines): ``mean_reward`` → ``reward_mean`` (the mean reward of the step's answers, the format bonus
included: "reward scale [0, 1.1]"), ``train_success`` → ``correct_frac`` (the share of the step's answers that solve
the puzzle), ``entropy`` → ``entropy_mean`` (mean token entropy), ``grad_norm``, ``response_len`` →
``response_length_mean``, ``eval_success`` → ``eval/success`` (where the row has one). ``tau`` is the run's setting,
left out.

    python lab/public/katop_csv.py all_experiments.csv EXPERIMENT OUT.jsonl
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import write  # noqa: E402

COLUMNS = {"mean_reward": "reward_mean", "train_success": "correct_frac", "entropy": "entropy_mean",
           "grad_norm": "grad_norm", "response_len": "response_length_mean", "eval_success": "eval/success"}


def convert(text: str, experiment: str) -> list[dict[str, Any]]:
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r.get("experiment") == experiment]
    if not rows:
        raise ValueError(f"no rows of experiment {experiment!r}")
    out = []
    for r in rows:
        step = {"step": int(r["step"])}
        step.update({name: float(r[col]) for col, name in COLUMNS.items() if (r.get(col) or "").strip()})
        out.append(step)
    return sorted(out, key=lambda s: s["step"])


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/katop_csv.py all_experiments.csv EXPERIMENT OUT.jsonl", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[2]), lambda: convert(src.read_text(encoding="utf-8"), argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
