"""One repository's own run log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

esmaeil-abedi-dev/verifier-as-reward trains Qwen2.5-0.5B to answer " AUTHORIZE" or " REFUSE" by policy gradient
(REINFORCE, KL-regularised REINFORCE, exact policy gradient over the two answers) on a ±1 verifier reward, with its
own harness (``train_verifier_reward.py``), which logs ``training_log_*.jsonl``: a ``{"type": "config", …}`` row, then
one row every ``--eval-every`` steps. No library writes these keys; this script declares what they mean, for this
corpus only:

* the step is ``step``; a row without one (the config row) is skipped;
* ``mean_reward`` → ``reward`` (the mean verifier reward of that step's sampled batch, class-balanced with
  ``--balance-reward``; TRL's name, which ingest maps to ``reward_mean``); ``loss`` kept;
* the held-out evaluation of the row — ``accuracy``, ``heldout_violation_rate`` (false authorize),
  ``heldout_false_refuse_rate`` — as ``eval/accuracy``, ``eval/false_authorize_rate``, ``eval/false_refuse_rate``:
  ``eval/accuracy`` fills ``eval_score`` (the error rates are no score; ``collapsewatch/ingest/keys.py``), which the
  evaluation detector reads; ``n_eval_actions`` (how many held-out actions it graded) → ``eval/num_examples``, its
  ``eval_size``. Step 0 is the untrained (or warm-started) policy's evaluation alone.

    python var_metrics.py training_log_X.jsonl OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

KEYS = {"mean_reward": "reward", "loss": "loss", "accuracy": "eval/accuracy", "n_eval_actions": "eval/num_examples",
        "heldout_violation_rate": "eval/false_authorize_rate", "heldout_false_refuse_rate": "eval/false_refuse_rate"}


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their rows → one dict per logged step ({"step": n, "reward" / "loss" / "eval/<key>": value, …})."""
    out = []
    for row in rows:
        if "step" not in row:
            continue
        out.append({"step": int(row["step"]), **{KEYS[k]: v for k, v in row.items() if k in KEYS and v is not None}})
    return sorted(out, key=lambda s: s["step"])


def main(argv: list[str]) -> int:
    return jsonl_convert.main(argv, "var_metrics.py", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
