"""One repository's own run log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

ShibukiZero/assignment5-alignment (branch ``solutions``) logs each GRPO run to ``runs/<name>/metrics.jsonl`` with its
own logger (``scripts/grpo_experiment.py``): typed rows — ``{"type": "train", "optimizer_step": …}`` per optimizer
step, ``{"type": "rollout", "grpo_step": …}`` per rollout batch, ``{"type": "grpo_step_summary", …}`` after it, ``{"type":
"eval", …}`` every 5 GRPO steps — and no
key ``ingest`` reads as a step. No library writes this format, so ``collapsewatch ingest`` has no reader for it and
KEY_MAP (the one home of the libraries' key meanings) does not name its keys; this lab script declares what its keys
mean, for this corpus only, and writes one JSON object per optimizer step:

* the step is ``optimizer_step``; a rollout row (GRPO step g) is written at the first optimizer step that trains on
  it (the first train row of g); an eval or GRPO-step summary row at its own ``optimizer_step`` (eval step 0: before
  training);
* ``token_entropy`` → ``entropy_mean``: the masked mean of π_θ's per-token entropy over each micro-batch, averaged
  over the optimizer step's micro-batches (TRL's ``entropy`` definition, KEY_MAP);
* ``grad_norm`` → ``grad_norm``: ``clip_grad_norm_``'s pre-clip total norm (max_norm 1.0), as the catalogue's;
* ``loss`` → ``loss``;
* the rollout row's ``reward`` → ``reward_mean`` (mean over the rollout batch's 256 responses of format + answer
  reward, before the update: the catalogue's) and ``avg_response_token_length`` → ``response_length_mean``
  (response tokens, as the catalogue counts them);
* every other key is kept under its own name with the row type as prefix (``rollout/answer_accuracy``,
  ``eval/answer_accuracy``, ``train/clip_fraction`` …): in ``scalars``, read by no detector.

    python lab/public/cs336_metrics.py METRICS.jsonl OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

CATALOGUE = {("train", "token_entropy"): "entropy_mean", ("train", "grad_norm"): "grad_norm",
             ("train", "loss"): "loss", ("rollout", "reward"): "reward_mean",
             ("rollout", "avg_response_token_length"): "response_length_mean"}
"""(row type, their key) → catalogue column; the module docstring says how each is defined."""
STEP_FIELDS = {"type", "grpo_step", "optimizer_step"}


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their rows → one dict per optimizer step ({"step": n, column or "<type>/<key>": value, …}), steps ascending."""
    first_step: dict[int, int] = {}
    for row in rows:
        if row.get("type") == "train":
            first_step.setdefault(int(row["grpo_step"]), int(row["optimizer_step"]))
    out: dict[int, dict[str, Any]] = {}
    for n, row in enumerate(rows, start=1):
        kind = row.get("type")
        if kind == "rollout":
            if int(row["grpo_step"]) not in first_step:
                continue  # a rollout batch no optimizer step trained on (the run stopped)
            step = first_step[int(row["grpo_step"])]
        elif kind in ("train", "eval", "grpo_step_summary"):
            step = int(row["optimizer_step"])
        else:
            raise ValueError(f"line {n}: row type {kind!r} is not train, rollout, grpo_step_summary or eval")
        into = out.setdefault(step, {"step": step})
        for key, value in row.items():
            if key not in STEP_FIELDS:
                into[CATALOGUE.get((kind, key), f"{kind}/{key}")] = value
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    return jsonl_convert.main(argv, "cs336_metrics.py", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
