"""One run of a long-form metrics CSV (``run_name,metric,step,value``) → a JSONL file `collapsewatch ingest` reads.

garg-aayush/building-from-scratch (``grpo/results/*/*_data.csv``, docs/lab/public_runs.md) commits each GRPO
ablation's curves as one long table exported from W&B: a row per (run, metric, logged point), ``step`` the GRPO step
(one rollout batch). Off-policy runs log their ``train/*`` metrics once per *optimizer* step, several rows carrying
the same GRPO step, in logging order. No library writes this table, so ``collapsewatch ingest`` has no reader for it
and KEY_MAP (the one home of the libraries' key meanings) does not name its keys; this lab script declares what its
keys mean, for this corpus only, and writes one JSON object per optimizer step:

* the step is the optimizer step: the position (0, 1, …) of a ``train/*`` row among the run's rows of that metric,
  in file order (equal to the GRPO step for on-policy runs, one optimizer step per GRPO step); an ``eval/*`` row of
  GRPO step g is written at the first optimizer step of g (at g when the run has no train row at all; left out and
  counted when train rows exist but none carries g);
* ``train/entropy`` → ``entropy_mean`` (the repository's mean per-token entropy of the policy over the response
  tokens, grpo/Notes.md), ``train/grad_norm`` → ``grad_norm`` (its pre-clip total norm),
  ``train/mean_response_length`` → ``response_length_mean`` (response tokens);
* every other metric (``eval/reward``: the validation answer reward, not the rollout batch's reward;
  ``eval/format_reward``) is kept under its own name: in ``scalars``, read by no detector.

    python lab/public/runs_csv.py TABLE.csv RUN_NAME OUT.jsonl
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CATALOGUE = {"train/entropy": "entropy_mean", "train/grad_norm": "grad_norm",
             "train/mean_response_length": "response_length_mean"}
"""Their metric → catalogue column; the module docstring says how each is defined."""
COLUMNS = ("run_name", "metric", "step", "value")


def convert(rows: Iterable[dict[str, str]], run_name: str) -> tuple[list[dict[str, Any]], int]:
    """The table's rows → (one dict per optimizer step of ``run_name`` ({"step": n, column or metric: value}),
    ascending; the eval rows left out)."""
    mine = [r for r in rows if r["run_name"] == run_name]
    if not mine:
        raise ValueError(f"no row of run {run_name!r}")
    seen: dict[str, int] = {}  # train metric → rows of it so far
    first_of: dict[int, int] = {}  # GRPO step → its first optimizer step
    out: dict[int, dict[str, Any]] = {}
    evals: list[tuple[int, str, float]] = []
    for r in mine:
        grpo_step, value = int(r["step"]), float(r["value"])
        if not r["metric"].startswith("train/"):
            evals.append((grpo_step, r["metric"], value))
            continue
        step = seen.get(r["metric"], 0)
        seen[r["metric"]] = step + 1
        first_of[grpo_step] = min(first_of.get(grpo_step, step), step)
        out.setdefault(step, {"step": step})[CATALOGUE.get(r["metric"], r["metric"])] = value
    left_out = 0
    for grpo_step, metric, value in evals:
        step = first_of.get(grpo_step, None if first_of else grpo_step)
        if step is None:
            left_out += 1
            continue
        out.setdefault(step, {"step": step})[metric] = value
    return [out[s] for s in sorted(out)], left_out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/runs_csv.py TABLE.csv RUN_NAME OUT.jsonl", file=sys.stderr)
        return 2
    src, run_name, dst = Path(argv[0]), argv[1], Path(argv[2])
    try:
        with src.open(newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise ValueError(f"columns {reader.fieldnames}, expected {', '.join(COLUMNS)}")
            steps, left_out = convert(reader, run_name)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {src}: {e}", file=sys.stderr)
        return 1
    dst.write_text("".join(json.dumps(s) + "\n" for s in steps))
    print(f"{src}: run {run_name!r} → {len(steps)} optimizer steps in {dst}; {left_out} eval row(s) at a GRPO step "
          "no train row carries left out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
