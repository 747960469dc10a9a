"""Trinity-RFT's tutorial curve exports → a CSV `collapsewatch ingest` reads (docs/lab/public_runs.md).

agentscope-ai/Trinity-RFT (branch ``tutorial``) commits per-step curves of its ALFWorld runs as
``scripts/rl_tutorial/sample_data/*_metrics.csv``: one row per trainer step, short column names. What each name is
comes from the tutorial's own record, ``sample_data/lora32_provenance.json`` ("fields"): ``score`` =
``critic/score/mean``, ``entropy`` = ``actor/entropy_loss``, ``response_clip_ratio`` = ``response_length/clip_ratio``,
``prompt_length_mean`` = ``prompt_length/mean``, ``train_step_seconds`` = ``time/train_step``,
``update_actor_seconds`` = ``time/update_actor``, ``tokens`` = ``perf/total_num_tokens``; ``step`` is the trainer's
iteration. This script writes the same table with those trainer (verl) keys as its header, so ingest's key table
(collapsewatch/ingest/keys.py) says what they mean; ``runners`` (a stage's configured rollout concurrency, not a
logged value) is left out. Every other column and every cell is copied as it is (an empty cell stays empty: not
logged at that step).

    python lab/public/trinity_csv.py METRICS.csv OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csv_columns import Rows, main_csv, rename_columns  # noqa: E402

RENAME = {"score": "critic/score/mean", "entropy": "actor/entropy_loss",
          "response_clip_ratio": "response_length/clip_ratio", "prompt_length_mean": "prompt_length/mean",
          "train_step_seconds": "time/train_step", "update_actor_seconds": "time/update_actor",
          "tokens": "perf/total_num_tokens"}
"""Their column → the trainer key it is (lora32_provenance.json "fields")."""
DROP = {"runners"}


def convert(rows: Rows) -> Rows:
    """Header renamed, dropped columns removed; the step column must be there."""
    return rename_columns(rows, RENAME, DROP, "step")


def main(argv: list[str]) -> int:
    return main_csv(argv, convert, "lab/public/trinity_csv.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
