"""dddraxxx/Mini-o3's committed per-step curves (exps/train/<run_id>/train_reward_curve.csv, train_curve.csv) -> a CSV
`collapsewatch ingest` reads (docs/lab/public_runs.md).

The authors exported these tables from their verl fork's per-step metrics (`train_step_metrics.jsonl`, not committed);
the column names are theirs, shortened. What each is, from the fork's code (verl/trainer/ppo/metric_utils.py,
ray_trainer.py @ 5914970) and the run READMEs: ``reward_mean`` = critic/rewards/mean (read as is), ``score_mean`` =
critic/score/mean (equal to reward_mean on every row: kept, not mapped, so one column feeds reward),
``response_len_mean`` / ``response_length_mean`` = response_length/mean, ``response_clip_ratio`` =
response_length/clip_ratio, ``exceed_sample_ratio`` / ``exceed_ratio_metric`` = batch/exceed_sample_ratio (the share
of trajectories that hit the assistant-turn or length limit: kept under the fork's key, not mapped). ``reason_counts``
(text) is dropped. Every other column and every cell is copied as it is.

    python lab/public/minio3_csv.py CURVE.csv OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csv_columns import Rows, main_csv, rename_columns  # noqa: E402

RENAME = {"response_len_mean": "response_length/mean",
          "response_length_mean": "response_length/mean", "response_clip_ratio": "response_length/clip_ratio",
          "exceed_sample_ratio": "batch/exceed_sample_ratio", "exceed_ratio_metric": "batch/exceed_sample_ratio"}
DROP = {"reason_counts"}


def convert(rows: Rows) -> Rows:
    return rename_columns(rows, RENAME, DROP, "step")


def main(argv: list[str]) -> int:
    return main_csv(argv, convert, "lab/public/minio3_csv.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
