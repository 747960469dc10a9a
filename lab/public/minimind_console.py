"""A MiniMind GRPO console log → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

MiniMind's GRPO trainer (``trainer/train_grpo.py``) and the R1-style variant a MiniMind user wrote beside it
(``trainer/train_grpo_r1.py``, Coicozoi/minimind-from-scratch) print one line per optimizer step::

    Epoch:[1/1](3/9751), Reward: -1.4468, KL_ref: 0.0409, Adv Std: 0.9257, ..., Avg Response Len: 286.75, ...
    Epoch:[1/1](3/500), Reward: 0.4360, Fmt: 1.00, Correct: 0.00, KL_ref: -0.0050, ..., Avg Len: 100, LR: 0.00000100

between sampled completions and debug banners. ``collapsewatch ingest`` reads no such line (its console reader takes
verl's ``step:N - k:v`` lines, OpenRLHF's ``Global step`` lines and printed dicts), and KEY_MAP (the one home of the
libraries' key meanings) does not name these keys; this lab script declares what they mean, from the two trainers'
code, for this corpus only, and writes one JSON object per line:

* the step is the optimizer step: ``(epoch - 1) × steps_per_epoch + i`` for ``Epoch:[epoch/E](i/steps_per_epoch)``;
* ``Reward`` → ``reward_mean`` (``rewards.mean()``: the mean over the step's B × num_generations completions, before
  the update, as the catalogue's);
* ``Avg Response Len`` / ``Avg Len`` → ``response_length_mean`` (completion tokens up to and including the first
  EOS, mean over the step's completions: the catalogue's count);
* ``Actor Loss`` → ``loss`` (the clipped surrogate plus β × the k3 KL to the reference, token-mean per sequence,
  mean over sequences); ``Learning Rate`` / ``LR`` → ``lr``;
* every other key is kept under ``minimind/<key>``, read by no detector: ``KL_ref`` is the token mean of
  log π_ref − log π_θ (the negative of the k1 estimate of KL(π_θ‖π_ref), not the catalogue's k3), ``Adv Std`` /
  ``Adv Mean`` the group-normalised advantages' std and mean, ``Fmt`` / ``Correct`` the R1 variant's format and
  correct rates.

    python lab/public/minimind_console.py LOG OUT.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CATALOGUE = {"Reward": "reward_mean", "Avg Response Len": "response_length_mean", "Avg Len": "response_length_mean",
             "Actor Loss": "loss", "Learning Rate": "lr", "LR": "lr"}
"""Their key → catalogue column; the module docstring says how each is defined."""
LINE = re.compile(r"^Epoch:\[(\d+)/(\d+)\]\((\d+)/(\d+)\),\s*(.*)$")


def convert(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
    """The log's step lines → (one dict per optimizer step ({"step": n, column or minimind/key: value}), ascending;
    the number of other lines)."""
    out: dict[int, dict[str, Any]] = {}
    other = 0
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            other += 1
            continue
        epoch, per_epoch, i = int(m.group(1)), int(m.group(4)), int(m.group(3))
        step = (epoch - 1) * per_epoch + i
        row: dict[str, Any] = {"step": step}
        for field in m.group(5).split(","):
            key, sep, value = field.partition(":")
            if not sep:
                raise ValueError(f"step {step}: field {field.strip()!r} is not 'Key: value'")
            key = key.strip()
            row[CATALOGUE.get(key, f"minimind/{key}")] = float(value)
        out[step] = row
    if not out:
        raise ValueError("no 'Epoch:[e/E](i/N), Key: value, …' line")
    return [out[s] for s in sorted(out)], other


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python lab/public/minimind_console.py LOG OUT.jsonl", file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    try:
        with src.open(encoding="utf-8", errors="replace") as f:
            steps, other = convert(f)
    except (OSError, ValueError) as e:
        print(f"error: {src}: {e}", file=sys.stderr)
        return 1
    dst.write_text("".join(json.dumps(s) + "\n" for s in steps))
    print(f"{src}: {len(steps)} optimizer steps → {dst}; {other} other line(s) (completions, banners) left out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
