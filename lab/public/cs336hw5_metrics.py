"""One repository's own run log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

xuehaiwuya1214/CS336-hw5 (CS336 assignment 5: GRPO on GSM8K-style math with Qwen2.5-Math-1.5B) writes
``grpo-outputs/<run>/metrics.jsonl`` from its own loop (``cs336_alignment/grpo.py``, lines 935–955 @ e2b82af): one row
per optimizer step (``optimizer_step``; a GRPO step, ``grpo_step``, trains on its rollout batch for one or more
epochs), and a few evaluation rows. No library writes this format and KEY_MAP does not name its keys; this lab script
declares what they mean, for this corpus only, and writes one JSON object per optimizer step:

* the step is ``optimizer_step`` (1-based); an evaluation row carries the optimizer step it followed and its
  ``eval/…`` keys, merged into that step;
* ``rollout/reward`` → ``reward_mean`` and ``rollout/reward_std`` → ``reward_std``: the rollout batch's reward mean and
  std, computed at rollout, before the update (every optimizer step of a GRPO step repeats them);
* ``rollout/answer_reward`` → ``correct_frac``: the share of the rollout batch answered correctly;
* ``train/token_entropy`` → ``entropy_mean``: the mean over micro-batches of the masked mean token entropy of the
  policy's training forward pass (catalogue: the rollout policy's);
* ``train/grad_norm`` → ``grad_norm``: ``clip_grad_norm_``'s pre-clip total norm;
* every other key is kept under its own name (``train/loss``, ``train/num_response_tokens`` — the last micro-batch's
  token count, not a mean length — ``train/clip_fraction`` …): in ``scalars``, read by no detector.

    python lab/public/cs336hw5_metrics.py metrics.jsonl OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

CATALOGUE = {"rollout/reward": "reward_mean", "rollout/reward_std": "reward_std", "rollout/answer_reward": "correct_frac",
             "train/token_entropy": "entropy_mean", "train/grad_norm": "grad_norm"}
"""Their key → catalogue column; the module docstring says how each is defined."""


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their rows → one dict per optimizer step, steps ascending (module doc)."""
    return jsonl_convert.merge_by(rows, "optimizer_step", lambda key: CATALOGUE.get(key, key))


def main(argv: list[str]) -> int:
    return jsonl_convert.main(argv, "cs336hw5_metrics.py", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
