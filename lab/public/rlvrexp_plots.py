"""One run of halflearned/rlvr-experiments' plot data (``writeup/interactive/<prefix>_plots.js``) → a JSONL file
`collapsewatch ingest` reads (docs/lab/public_runs.md).

The repository (GRPO and DAPO of Qwen3-1.7B-Base with the authors' own asynchronous trainer) publishes its runs'
training curves inside the JavaScript of an interactive write-up: ``const <prefix>Data = {"runs": [{"id": …,
"steps": [...], "<metric>": [...], …}, …], …};``, written by their ``generate_staleness_plots.py``. No library writes
this, so this script declares what the keys mean, from the trainer's source (``src/rlvr_experiments/``):

* ``reward_overall`` → ``reward_mean``: the mean reward of every completion of the step (``algorithms/grpo.py``);
* ``frac_all_correct`` + ``frac_all_wrong`` → ``zero_std_group_frac``: the share of the step's prompts whose
  completions' rewards are all equal, split there by whether that reward is > 0.5 — together, every zero-std group;
* ``entropy_mean`` → ``entropy_mean`` (mean token entropy of the valid tokens, ``losses.py``); ``kl_mean`` →
  ``kl_ref_mean`` (the k3 estimate of KL(π_θ ∥ π_ref) averaged over valid tokens); ``completion_len`` →
  ``response_length_mean``; ``loss``, ``loss_grpo``, ``loss_sft`` kept as they are (read by no detector);
* each ``eval_<bench>_accuracy`` at its own ``eval_<bench>_steps`` → ``eval/<bench>_accuracy`` at those steps.

The pass@k curves (no step axis) are left out.

    python lab/public/rlvrexp_plots.py PLOTS.js RUN_ID OUT.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
from jsonl_convert import write  # noqa: E402

PER_STEP = {"reward_overall": "reward_mean", "entropy_mean": "entropy_mean", "kl_mean": "kl_ref_mean",
            "completion_len": "response_length_mean", "loss": "loss", "loss_grpo": "loss_grpo",
            "loss_sft": "loss_sft"}


def plot_data(text: str) -> dict[str, Any]:
    """The object assigned to the file's ``const <prefix>Data``."""
    m = re.search(r"^const \w+Data = ", text, re.M)
    if m is None:
        raise ValueError("no 'const <prefix>Data = {…};' in the file")
    obj, _ = json.JSONDecoder().raw_decode(text, m.end())
    if not isinstance(obj, dict) or not isinstance(obj.get("runs"), list):
        raise ValueError("the plot data has no 'runs' list")
    return obj


def convert(data: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    runs = {r.get("id"): r for r in data["runs"]}
    if run_id not in runs:
        raise ValueError(f"no run {run_id!r}; the file has {sorted(k for k in runs if k)}")
    run = runs[run_id]
    steps = run["steps"]
    rows: dict[int, dict[str, Any]] = {int(s): {"step": int(s)} for s in steps}
    for key, name in PER_STEP.items():
        values = run.get(key) or []
        if values and len(values) != len(steps):
            raise ValueError(f"{key}: {len(values)} values for {len(steps)} steps")
        for s, v in zip(steps, values, strict=False):  # values empty or as long as steps (checked above)
            if v is not None:
                rows[int(s)][name] = v
    correct, wrong = run.get("frac_all_correct") or [], run.get("frac_all_wrong") or []
    for s, c, w in zip(steps, correct, wrong, strict=False):
        if c is not None and w is not None:
            rows[int(s)]["zero_std_group_frac"] = c + w
    for key in run:
        m = re.fullmatch(r"eval_(\w+)_accuracy", key)
        if m is None:
            continue
        for s, v in zip(run.get(f"eval_{m[1]}_steps") or [], run[key], strict=False):
            rows.setdefault(int(s), {"step": int(s)})[f"eval/{m[1]}_accuracy"] = v
    return [rows[s] for s in sorted(rows)]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/rlvrexp_plots.py PLOTS.js RUN_ID OUT.jsonl", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[2]), lambda: convert(plot_data(src.read_text(encoding="utf-8")), argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
