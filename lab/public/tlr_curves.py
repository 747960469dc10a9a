"""One arm of redswimmer/turn-level-rewards' ``results/phase7c-curves.json`` → a JSONL file `collapsewatch ingest`
reads (docs/lab/public_runs.md).

The repository reproduces a multi-turn search agent paper (HotpotQA, Qwen3.5-0.8B) with five arms. Its curves file is
one JSON object of arms, in two layouts, both written by the authors (``scripts/extract_ppo_curves.py``):

* the GRPO arms (TRL ``GRPOTrainer``; exported from a trackio backend): ``{"reward": [[step, value], …],
  "grad_norm": […], "zero_std": […]}``, each metric its own list of ``[step, value]`` pairs (the reward and the
  zero-std share every second step, the gradient norm every step). ``zero_std`` is TRL's ``frac_reward_zero_std``
  (the authors' §13c names it so);
* the PPO arms (their own ``MTPPOTrainer``'s ``train_log.jsonl``): ``{"reward": [v, …], "format_compliance": […],
  "mean_tool_turns": […], "retrieval_fraction": […], "step": [s, …]}``, parallel lists, steps skipped for memory left
  out by the authors' script.

No library writes this layout, so this script declares its keys: ``reward`` → ``reward_mean``, ``grad_norm`` →
``grad_norm``, ``zero_std`` → ``zero_std_group_frac`` (TRL's share of responses in a zero-std group, the share of
groups when groups are equal in size, as TRL's are), ``mean_tool_turns`` (search calls per episode) →
``tool_calls_mean``; ``format_compliance`` and ``retrieval_fraction`` keep their names (logged scalars no detector
reads). One dict per step, steps ascending; a step that logged only some metrics holds only those.

    python lab/public/tlr_curves.py phase7c-curves.json ARM OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import write  # noqa: E402

NAMES = {"reward": "reward_mean", "grad_norm": "grad_norm", "zero_std": "zero_std_group_frac",
         "mean_tool_turns": "tool_calls_mean", "format_compliance": "format_compliance",
         "retrieval_fraction": "retrieval_fraction"}
"""The file's metric names → the keys written (the catalogue's columns, or the authors' names where none fits)."""


def convert(obj: object, arm: str) -> list[dict[str, Any]]:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object of arms")
    if arm not in obj:
        raise ValueError(f"no arm {arm!r} (the file has {', '.join(sorted(obj))})")
    curves = obj[arm]
    out: dict[int, dict[str, Any]] = {}
    if "step" in curves:  # parallel lists
        steps = curves["step"]
        for key, values in curves.items():
            if key == "step" or key not in NAMES:
                continue
            if len(values) != len(steps):
                raise ValueError(f"{arm}: {key} has {len(values)} values for {len(steps)} steps")
            for s, v in zip(steps, values, strict=True):
                out.setdefault(int(s), {"step": int(s)})[NAMES[key]] = float(v)
    else:  # [step, value] pairs per metric
        for key, pairs in curves.items():
            if key not in NAMES:
                continue
            for s, v in pairs:
                out.setdefault(int(s), {"step": int(s)})[NAMES[key]] = float(v)
    if not out:
        raise ValueError(f"{arm}: no metric this script reads ({', '.join(NAMES)})")
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/tlr_curves.py phase7c-curves.json ARM OUT.jsonl", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[2]), lambda: convert(json.loads(src.read_text(encoding="utf-8")), argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
