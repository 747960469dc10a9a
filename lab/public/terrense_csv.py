"""terrense/qwen3-8b-grpo-dapo-lab's flight-recorder CSVs → a CSV `collapsewatch ingest` reads.

The lab's recorder writes ``experiments/<RUN>/metrics/training_metrics.csv``: one row per verl optimizer update
(``global_step``), canonical short names. Which verl key each name is comes from the authors' own
``docs/observability/metric_dictionary.md`` (@ 12bb56d; verl @ 1252cc71), checked against the same run's
``metrics/verl_file_logger.jsonl`` (A_grpo steps 1–4: every renamed value equal): ``entropy`` = ``actor/entropy``,
``kl`` = ``actor/ppo_kl`` (old vs current policy, not the reference), ``kl_loss`` = ``actor/kl_loss`` (low_var_kl to
the reference), ``clip_fraction`` = ``actor/pg_clipfrac``, ``dual_clip_fraction`` = ``actor/pg_clipfrac_lower``,
``policy_loss`` = ``actor/pg_loss``, ``learning_rate`` = ``actor/lr``, ``t_step`` = ``timing_s/step``,
``t_rollout`` = ``timing_s/gen``. ``cap_hit_rate`` (share of responses at the configured 8192-token cap, the lab's own
count after its INC-005 fix; R1 sums to the README's "5 / 2560") becomes ``truncated_frac``; it is empty in the runs
the recorder logged before that fix. ``response_width_hit_fraction`` (verl's ``response_length/clip_ratio``) is NOT
renamed: the authors found it compares with the padded tensor width, "so it was never a truncation rate" (README,
INC-005) — it is 1/128 (the batch's longest response) at almost every step.
``reward_mean`` (= ``critic/rewards/mean``; ±1 rewards, no KL in the reward, so equal to ``critic/score/mean``),
``grad_norm`` and ``response_length_mean`` already are catalogue names. ``zero_std_group_ratio`` (groups whose 8
rewards are all equal / 16 groups) becomes ``zero_std_group_frac`` (every group has 8 responses, so the share of
groups equals the share of responses). ``wall_iso`` (text: the time the row was written) is left out. Every other
column and every cell is copied as it is (an empty cell stays empty: not emitted).

    python terrense_csv.py METRICS.csv OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csv_columns import Rows, main_csv, rename_columns  # noqa: E402

RENAME = {"entropy": "actor/entropy", "kl": "actor/ppo_kl", "kl_loss": "actor/kl_loss",
          "clip_fraction": "actor/pg_clipfrac", "dual_clip_fraction": "actor/pg_clipfrac_lower",
          "policy_loss": "actor/pg_loss", "learning_rate": "actor/lr", "cap_hit_rate": "truncated_frac",
          "t_step": "timing_s/step", "t_rollout": "timing_s/gen", "zero_std_group_ratio": "zero_std_group_frac"}
DROP = {"wall_iso"}


def convert(rows: Rows) -> Rows:
    return rename_columns(rows, RENAME, DROP, "global_step")


def main(argv: list[str]) -> int:
    return main_csv(argv, convert, "lab/public/terrense_csv.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
