"""RainyFields/Agentic-RL-CA's per-run Wave-1 CSVs → a CSV `collapsewatch ingest` reads (docs/lab/public_runs.md).

A multi-turn search agent (Qwen3-1.7B, Search-R1's protocol: NQ + HotpotQA, up to 4 turns) trained with verl-agent;
the repository's ``extract_metrics.py`` wrote one CSV per run (``docs/reports/2026-07-19_wave1_report/assets/csv``)
from verl-agent console keys, under short names. This lab script puts the keys back, so ingest's catalogue reads them:
``clip_ratio`` ← ``response_length/clip_ratio`` (the share of turn responses that hit the 2,048-token cap →
``truncated_frac``), ``avg_turns`` ← ``episode/length/mean``, ``success_rate`` ← ``episode/success_rate``,
``val_macro_em`` ← ``val-core/macro_em`` (greedy validation every 25 steps); ``reward_mean`` is kept. Step 0 (a
validation-only row) is kept as it is: ingest stores its validation value.

    python arlca_csv.py RUN.arlca.csv OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from csv_columns import Rows, main_csv, rename_columns  # noqa: E402

RENAME = {"clip_ratio": "response_length/clip_ratio", "avg_turns": "episode/length/mean",
          "success_rate": "episode/success_rate", "val_macro_em": "val-core/macro_em"}


def convert(rows: Rows) -> Rows:
    return rename_columns(rows, RENAME, set(), "step")


def main(argv: list[str]) -> int:
    return main_csv(argv, convert, "lab/public/arlca_csv.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
