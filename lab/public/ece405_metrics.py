"""One repository's own run log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

echung32/ece405-assignment3-alignment (a course's port of CS336 assignment 5: GRPO on MATH with Qwen2.5-Math-1.5B)
writes each run's ``train_history.jsonl`` with its own loop (``cs336_alignment/section7/grpo_experiment.py``, lines
448–531 @ 81f8644): one row per optimizer step, ``{"train_step": n, …}``, where a GRPO step (``grpo_step``) trains on
its rollout batch for ``epochs_per_rollout_batch`` epochs of one or more optimizer steps each. No library writes
this format and KEY_MAP does not name its keys; this lab script declares what they mean, for this corpus only, and
writes one JSON object per optimizer step:

* the step is ``train_step`` (the optimizer step, 1-based);
* ``mean_reward`` → ``reward_mean``: the mean over the optimizer step's micro-batches of their mean raw reward
  (format + answer for the r1_zero reward), computed at rollout, before the update;
* ``mean_answer_reward`` → ``correct_frac``: the mean over the step's responses of their answer reward (1 when the
  answer is right, else 0) — the share answered correctly;
* ``mean_token_entropy`` → ``entropy_mean``: the mean over micro-batches of the masked mean token entropy of the
  policy's training forward pass (catalogue: the rollout policy's);
* ``grad_norm`` → ``grad_norm``: ``clip_grad_norm_``'s pre-clip total norm (max_norm 1.0);
* ``loss`` → ``loss``: the sum over micro-batches of their losses (each already divided by the micro-batch count);
* every other key is kept as ``train/<key>`` (``train/response_tokens`` — Σ response tokens of the step, not a mean
  length —, ``train/grpo_step`` …): in ``scalars``, read by no detector. Non-finite values the log holds (``NaN``,
  ``Infinity``: an unclipped run's overflowing gradients) are kept as they are.

    python lab/public/ece405_metrics.py train_history.jsonl OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

CATALOGUE = {"mean_reward": "reward_mean", "mean_answer_reward": "correct_frac", "mean_token_entropy": "entropy_mean",
             "grad_norm": "grad_norm", "loss": "loss"}
"""Their key → catalogue column; the module docstring says how each is defined."""


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their rows → one dict per optimizer step ({"step": n, column or "train/<key>": value, …}), steps ascending."""
    return jsonl_convert.merge_by(rows, "train_step", lambda key: CATALOGUE.get(key, "train/" + key))


def main(argv: list[str]) -> int:
    return jsonl_convert.main(argv, "ece405_metrics.py", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
