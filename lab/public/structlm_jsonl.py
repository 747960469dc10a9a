"""franalli/struct-lm's GRPO run logs → the JSONL `collapsewatch ingest` reads (docs/lab/public_runs.md).

The repository's trainer (TRL 0.29 ``GRPOTrainer`` and its own callbacks) appends to one
``results/runs/<run>/train_log.jsonl`` every record of a run, each with a ``step``: TRL's log dict per step (``loss``,
``reward``, ``entropy``, ``completions/mean_length`` …, the keys ingest's key table knows), its evaluations
(``eval_*``, ``val_pass@1`` …), its own per-step extras (``zero_spread``, ``generations`` …) — and records that are
not a step's metrics: a config record at step 0 (``dataset_hash``, ``train_tasks`` …) written again at each resume,
``check`` records (``trainable_params``, ``resumed``, ``stop`` …) and, after a resume, per-step rows backfilled from
saved rollouts (``source``: "rollouts, backfilled"). Read as they are, the config and backfilled records rewind the
steps, and ingest keeps only the last attempt (docs/ingest.md): two rows of a 65-step run. This script leaves those
three kinds of record out and merges the others by step (:func:`jsonl_convert.merge_steps`), steps ascending.

    python lab/public/structlm_jsonl.py train_log.jsonl[.gz] OUT.jsonl
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

NOT_METRICS = ("dataset_hash", "check", "source")
"""A record holding one of these keys is a config, a check or a backfilled row, not a step's metrics."""


def convert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Their records → one dict per step, the config / check / backfilled records left out."""
    return jsonl_convert.merge_steps([r for r in rows if not any(k in r for k in NOT_METRICS)], lambda key: key)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python lab/public/structlm_jsonl.py train_log.jsonl[.gz] OUT.jsonl", file=sys.stderr)
        return 2
    src = Path(argv[0])

    def rows() -> list[dict[str, Any]]:
        opener = gzip.open if src.suffix == ".gz" else open
        with opener(src, "rt") as f:
            return convert([json.loads(line) for line in f if line.strip()])

    return jsonl_convert.write(src, Path(argv[1]), rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
