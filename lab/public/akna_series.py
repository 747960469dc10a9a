"""One arm of AknA13/train-infer-mismatch's ``results/rl_series.json`` → a JSONL file `collapsewatch ingest` reads
(docs/lab/public_runs.md).

The file (written by the repository's ``rl/report.py``) holds ``{"arms": [{"arm": NAME, "acc": [...], "kl_k3": [...],
"gap": [...], "band": [...], "ess": [...], "entropy": [...], "grad_norm": [...], "mean_len": [...]}, ...]}``: one value
per GRPO step, in step order, copied from each arm's ``steps.jsonl`` (``rl/grpo.py``: ``for step in range(...)``,
step 0 first; Qwen3-1.7B on GSM8K, 32 prompts × 8 completions, one optimizer step per rollout). No library writes this
format, so KEY_MAP does not name its keys; this lab script declares what they mean, for this corpus only:

* the step is the list index (the authors' 0-based ``step``);
* ``acc`` → ``reward_mean`` and ``correct_frac``: the step's mean 0/1 reward, which *is* the share of completions
  verified correct and not truncated (``rewards.append(1.0 if ok else 0.0)``; the log's ``reward`` and ``acc`` are the
  same number);
* ``entropy`` → ``entropy_mean`` (token mean of π_θ's entropy over the step's completion tokens, during the update);
  ``grad_norm`` → ``grad_norm``; ``mean_len`` → ``response_length_mean`` (completion tokens);
* ``gap`` → ``is_log_ratio_abs_mean``: ``mismatch/monitor.py``'s ``mean_abs_gap``, the mean over completion tokens of
  |log π_trainer − log π_vLLM| with the trainer at θ_old = the sampler's weights (before the step's update): the
  catalogue's mean |logp_old − logp_rollout|;
* ``kl_k3`` (KL(sampler‖trainer), k3), ``band`` (share of tokens with ratio outside [0.8, 1.25]) and ``ess`` (the
  *sequence*-level IS effective sample size, not the catalogue's token-level ``is_ess``) have no catalogue column and
  are not a KL to a reference policy: kept as ``mismatch/<key>`` in ``scalars``, read by no detector.

    python akna_series.py RL_SERIES.json ARM OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # jsonl_convert.py beside it (lab/public)
import jsonl_convert  # noqa: E402

CATALOGUE = {"acc": ("reward_mean", "correct_frac"), "entropy": ("entropy_mean",), "grad_norm": ("grad_norm",),
             "mean_len": ("response_length_mean",), "gap": ("is_log_ratio_abs_mean",)}
"""Their series → catalogue columns; the module docstring says how each is defined."""


def convert(doc: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    """The arm's series → one dict per step ({"step": i, column or "mismatch/<key>": value, …})."""
    found = [a for a in doc["arms"] if a.get("arm") == arm]
    if len(found) != 1:
        raise ValueError(f"arm {arm!r}: not one of {[a.get('arm') for a in doc['arms']]}")
    series = {k: v for k, v in found[0].items() if k != "arm"}
    n = len(series["acc"])
    if any(len(v) != n for v in series.values()):
        raise ValueError(f"arm {arm!r}: series of unequal length")
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"step": i}
        for key, values in series.items():
            for col in CATALOGUE.get(key, (f"mismatch/{key}",)):
                row[col] = values[i]
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    return jsonl_convert.main_json(argv, "python akna_series.py RL_SERIES.json ARM OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
