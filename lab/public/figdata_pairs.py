"""One run's per-step pairs in a figure-data JSON → a JSONL file `collapsewatch ingest` reads
(docs/lab/public_runs.md).

Chaoqi31/text2sql-agent-rl keeps the curves of its README's "Training dynamics" figure in
``assets/figdata/figdata.json``: ``{"r1_v2": [[reward, frac_reward_zero_std], ...], "r2_v2": [...], "evals": {...}}``,
one pair per step of a TRL ``GRPOTrainer`` run (``scripts/train_grpo.py``), in step order; ``assets/make_figs.py``
reads the pair as ``[reward, frac_zero]`` and plots ``1 − frac_reward_zero_std``. No library writes this layout, so
this lab script says what the pair holds: TRL's own log keys ``reward`` (the step's mean reward) and
``frac_reward_zero_std`` (the share of the step's groups whose rewards are all equal), written under those names for
ingest's key table to read. The step is the pair's rank from 1 (TRL's ``global_step`` after the first update).

    python lab/public/figdata_pairs.py FIGDATA.json KEY OUT.jsonl
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402

PAIR = ("reward", "frac_reward_zero_std")
"""What each pair holds, in order: TRL's log keys."""


def convert(doc: Any, key: str) -> list[dict[str, Any]]:
    """The pairs under ``key`` → one dict per step ({"step": rank from 1, "reward": …, "frac_reward_zero_std": …})."""
    if not isinstance(doc, dict) or key not in doc:
        keys = ", ".join(sorted(doc)) if isinstance(doc, dict) else type(doc).__name__
        raise KeyError(f"no key {key!r} (there: {keys})")
    pairs = doc[key]
    rows = []
    for i, pair in enumerate(pairs if isinstance(pairs, list) else [pairs]):
        if (not isinstance(pair, list) or len(pair) != len(PAIR)
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair)):
            raise ValueError(f"{key}[{i}] is not a pair of numbers: {pair!r}")
        rows.append({"step": i + 1, **dict(zip(PAIR, pair, strict=True))})
    return rows


def main(argv: list[str]) -> int:
    return jsonl_convert.main_json(argv, "python lab/public/figdata_pairs.py FIGDATA.json KEY OUT.jsonl", convert)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
