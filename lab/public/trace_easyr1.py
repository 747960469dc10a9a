"""maveryn/trace-internal's W&B snapshot (paper/trace/data/training_dynamics_wandb.json) → JSONL `collapsewatch ingest`
reads (docs/lab/public_runs.md).

The paper's script (paper/trace/scripts/build_training_dynamics.py) stores, per run ("3B", "7B"), the 500 EasyR1
updates of five W&B keys under short names (its "metrics" block says which): training_reward = ``reward/overall``
(0.95·exact answer + 0.05·JSON format, mean over the step's 128 × 8 responses), answer_accuracy = ``reward/accuracy``
(exact answer, 0/1 per response: the correct share), mean_response_length = ``response_length/mean``,
response_clip_ratio = ``response_length/clip_ratio`` (EasyR1's, as verl's: share of responses at the length cap),
sampled_token_entropy_estimate = ``actor/entropy_loss`` (EasyR1 logs the policy's mean token entropy under this name;
the paper calls it "the sampled-token entropy estimate recorded by the policy optimizer"). Rows are written with
catalogue names for the reward, correct share and entropy, and verl's names (which ingest maps) for the length pair;
``update`` is the step.

    python lab/public/trace_easyr1.py training_dynamics_wandb.json 3B OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl_convert import write  # noqa: E402

KEYS = {"reward_mean": "training_reward", "correct_frac": "answer_accuracy",
        "response_length/mean": "mean_response_length", "response_length/clip_ratio": "response_clip_ratio",
        "entropy_mean": "sampled_token_entropy_estimate"}


def rows(snapshot: dict, scale: str) -> list[dict]:
    """The run ``scale``'s updates as ingest rows (step = ``update``); a key the update lacks is left out."""
    runs = snapshot.get("runs", {})
    if scale not in runs:
        raise ValueError(f"no run {scale!r} (runs: {', '.join(runs) or 'none'})")
    return [{"step": h["update"], **{ours: h[theirs] for ours, theirs in KEYS.items() if h.get(theirs) is not None}}
            for h in runs[scale]["history"]]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/trace_easyr1.py SNAPSHOT.json 3B|7B OUT.jsonl", file=sys.stderr)
        return 2
    src, scale = Path(argv[0]), argv[1]
    return write(src, Path(argv[2]), lambda: rows(json.loads(src.read_text()), scale))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
