"""One repository's own run log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

Taoger-Xu/assignment5-alignment (CS336 assignment 5: GRPO on GSM8K) logs each run to ``metrics.jsonl`` with its own
logger (``scripts/train_grpo.py``): per rollout step ``{"step": n, "split": "train", …}`` (256 responses, 32 prompts ×
8, then 32 optimizer updates of 8 sequences; the values are means over those updates) and every 10 steps a
``{"step": n, "split": "val", …}`` row. No library writes this format, so ``collapsewatch ingest`` has no reader for it
and KEY_MAP (the one home of the libraries' key meanings) does not name its keys; this lab script declares what its
keys mean, for this corpus only, and writes one JSON object per step:

* the step is ``step`` (the rollout round); a val row merges into its step's object;
* train ``mean_reward`` → ``reward_mean`` (format + answer reward of the round's responses);
  ``mean_answer_reward`` → ``correct_frac`` (the 0/1 exact-answer reward's mean: the share answered correctly);
  ``token_entropy`` → ``entropy_mean``; ``gradient_norm`` → ``grad_norm``; ``loss`` → ``loss``;
* ``zero_std_group_frac`` = 1 − ``num_active_sequences`` / ``num_sequences``: the trainer skips sequences whose
  advantage is zero, and with a 0/1 answer reward and std-normalised advantages a sequence's advantage is zero exactly
  when its group of 8 got equal rewards — so the inactive share of sequences is the share of all-equal groups;
* ``token_entropy`` is left out where ``num_active_sequences`` is 0: no sequence went through the forward pass, and
  the logger writes 0 there by convention (its docs: "when the whole batch is zero, entropy is 0"), not a measured
  entropy. Loss and gradient norm 0 there are true (no update);
* every other key is kept as ``<split>/<key>`` (``train/clip_fraction``, ``val/accuracy`` …): in ``scalars``, read by
  no detector (``val/avg_response_length`` counts characters).

    python lab/public/taoger_metrics.py METRICS.jsonl OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

CATALOGUE = {"mean_reward": "reward_mean", "mean_answer_reward": "correct_frac", "token_entropy": "entropy_mean",
             "gradient_norm": "grad_norm", "loss": "loss"}
"""Their train key → catalogue column; the module docstring says how each is defined."""


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their rows → one dict per step ({"step": n, column or "<split>/<key>": value, …}), steps ascending."""
    out: dict[int, dict[str, Any]] = {}
    for n, row in enumerate(rows, start=1):
        split = row.get("split")
        if split not in ("train", "val") or "step" not in row:
            raise ValueError(f"line {n}: a row needs a step and split 'train' or 'val', not {split!r}")
        into = out.setdefault(int(row["step"]), {"step": int(row["step"])})
        for key, value in row.items():
            if key in ("step", "split"):
                continue
            if split == "train" and key == "token_entropy" and row.get("num_active_sequences") == 0:
                continue  # nothing went through the forward pass: 0 by the logger's convention, not measured
            into[CATALOGUE[key] if split == "train" and key in CATALOGUE else f"{split}/{key}"] = value
        if split == "train":
            into["zero_std_group_frac"] = 1.0 - row["num_active_sequences"] / row["num_sequences"]
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    return jsonl_convert.main(argv, "taoger_metrics.py", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
