"""rasbt/reasoning-from-scratch's GRPO metric logs → a CSV `collapsewatch ingest` reads (docs/lab/public_runs.md).

The book's chapter 6/7 GRPO scripts (``ch07/03_rlvr_grpo_scripts_advanced/7_*.py``, Qwen3-0.6B base on MATH) append one
CSV row per training step to ``logs/<script>_metrics.csv`` (``append_step_metrics``). One step is ONE prompt with
``num_rollouts`` = 8 sampled answers (a single GRPO group), then the update(s). What each column is, from the scripts:

* ``reward_avg`` → ``reward_mean``: mean of the 8 rollouts' rewards (0/1 correctness on MATH; 7_6 adds a format
  reward — not used here);
* ``entropy_avg`` → ``entropy_mean``: mean over the 8 rollouts of each rollout's mean per-token entropy (full
  vocabulary, under the pre-update model; ``sequence_logprob_and_entropy``) — a mean of per-sequence means, not one
  token-pooled mean;
* ``avg_response_len`` → ``response_length_mean``: mean generated tokens per rollout;
* ``loss`` → ``loss`` (policy-gradient loss + KL term); ``kl_loss`` → ``loss_kl`` (``kl_coeff · mean(new_logp −
  ref_logp)`` on summed sequence log-probs; 0 when the KL term is off);
* ``zero_std_group_frac`` is derived from ``adv_std``: the step has one group, whose advantages are
  ``(r − mean) / (std + 1e-4)``, so their std is 0 exactly when all 8 rewards are equal (else ≈ 1): the share of
  all-equal groups is 1.0 when ``adv_std`` is 0, else 0.0 (the chapter-6 script logs no ``adv_std``: not derived);
* every other column is kept as ``rfs/<name>`` (``policy_ratio``, ``adv_avg``, ``adv_std``, ``tokens_per_sec``,
  ``eval_acc`` — MATH-500 accuracy in %, every 50th step; ``total_steps``), read by no detector. Empty cells stay
  empty (not logged at that step).

    python rfs_metrics.py METRICS.csv[.gz] OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csv_columns import main_csv  # noqa: E402

RENAME = {"reward_avg": "reward_mean", "entropy_avg": "entropy_mean", "avg_response_len": "response_length_mean",
          "loss": "loss", "kl_loss": "loss_kl", "step": "step"}


def convert(rows: list[list[str]]) -> list[list[str]]:
    header, body = rows[0], [r for r in rows[1:] if r]
    if "step" not in header or "reward_avg" not in header:
        raise ValueError(f"not a reasoning-from-scratch metrics header: {header[:6]}")
    has_std = "adv_std" in header  # the chapter-6 script's log has no advantage columns
    out_header = [RENAME.get(h, f"rfs/{h}") for h in header] + (["zero_std_group_frac"] if has_std else [])
    i_std = header.index("adv_std") if has_std else -1
    out = [out_header]
    for r in body:
        if len(r) != len(header):
            raise ValueError(f"row {r[:2]} has {len(r)} fields, header {len(header)}")
        if has_std:
            std = r[i_std]
            r = r + ["" if std == "" else ("1.0" if float(std) == 0.0 else "0.0")]
        out.append(r)
    return out


def main(argv: list[str]) -> int:
    return main_csv(argv, convert, "lab/public/rfs_metrics.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
