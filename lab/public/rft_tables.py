"""One per-step table of a research log's markdown → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

fruitfoxlu/rft (LoRA GRPO of gpt-oss-20b with OpenRLHF 0.9.3 and its own patches) keeps no machine log of its runs in
the repository: its research log ``rl_grpo_research.md`` tabulates each attempt's global steps by hand, one markdown
row per step, values rounded as the author printed them (``39.1%``, ``**0.704**`` for emphasis, ``+0.020``). That is
not a format a library writes, so ``collapsewatch ingest`` has no reader for it and KEY_MAP does not name its column
headers; this lab script declares, for this corpus only, which table each run is (``RUNS``: the heading above it) and
what its columns mean, and writes one JSON object per row:

* the step is the table's ``Step`` column (OpenRLHF's global step: one rollout batch and its updates);
* ``reward`` / ``Reward`` → ``reward_mean`` (the batch's mean reward, as OpenRLHF logs ``reward``);
  ``response_len`` / ``RespLen`` → ``response_length_mean`` (OpenRLHF's ``response_length``);
  ``truncated`` / ``Trunc`` → ``truncated_frac`` (its ``truncated``: share of samples stopped at the length limit);
  ``GradNorm`` → ``grad_norm`` (the author's patch logs the pre-clipping norm; max_norm 1.0) and ``Entropy`` →
  ``entropy_mean`` (the author's patch, token entropy of the policy);
* every other column is kept under ``rft/<column>`` (correctness, losses, KL, clip ratios, learning rate), read by no
  detector;
* a percent is divided by 100; ``**`` emphasis and a leading ``+`` are dropped; an empty cell is left out.

    python lab/public/rft_tables.py rl_grpo_research.md RUN OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RUNS = {"rft-attempt24": "### 4.1 Per-Step Summary (Global Steps 1–17)",
        "rft-attempt26": "#### Training Metrics (Steps 1-34)"}
"""Run name → the heading line above its table in rl_grpo_research.md."""
CATALOGUE = {"reward": "reward_mean", "Reward": "reward_mean", "response_len": "response_length_mean",
             "RespLen": "response_length_mean", "truncated": "truncated_frac", "Trunc": "truncated_frac",
             "GradNorm": "grad_norm", "Entropy": "entropy_mean"}
"""Their column → catalogue column; the module docstring says how each is defined."""


def cell(text: str) -> float | None:
    """A table cell's number (percent → fraction), None for an empty cell."""
    t = text.replace("**", "").strip().lstrip("+")
    if not t:
        return None
    if t.endswith("%"):
        return float(t[:-1]) / 100
    return float(t)


def convert(lines: Iterable[str], heading: str) -> list[dict[str, Any]]:
    """The rows of the first table after ``heading`` → one dict per step ({"step": n, column: value}), ascending."""
    it = iter(lines)
    for line in it:
        if line.rstrip("\n") == heading:
            break
    else:
        raise ValueError(f"no heading {heading!r}")
    rows = [line.strip() for line in it]
    start = next((i for i, r in enumerate(rows) if r.startswith("|")), None)
    if start is None:
        raise ValueError(f"no table after {heading!r}")
    table = []
    for r in rows[start:]:
        if not r.startswith("|"):
            break
        table.append([c.strip() for c in r.strip("|").split("|")])
    header, body = table[0], table[2:]
    if header[0] != "Step":
        raise ValueError(f"table after {heading!r}: first column {header[0]!r}, expected 'Step'")
    out: dict[int, dict[str, Any]] = {}
    for cells in body:
        if len(cells) != len(header):
            raise ValueError(f"table after {heading!r}: row {cells[0]!r} has {len(cells)} cells, header {len(header)}")
        step = int(cells[0])
        row: dict[str, Any] = {"step": step}
        for name, text in zip(header[1:], cells[1:], strict=True):
            value = cell(text)
            if value is not None:
                row[CATALOGUE.get(name, f"rft/{name}")] = value
        out[step] = row
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python lab/public/rft_tables.py rl_grpo_research.md RUN OUT.jsonl", file=sys.stderr)
        return 2
    src, run, dst = Path(argv[0]), argv[1], Path(argv[2])
    try:
        if run not in RUNS:
            raise ValueError(f"run {run!r} is none of {', '.join(RUNS)}")
        with src.open(encoding="utf-8") as f:
            steps = convert(f, RUNS[run])
    except (OSError, ValueError) as e:
        print(f"error: {src}: {e}", file=sys.stderr)
        return 1
    dst.write_text("".join(json.dumps(s) + "\n" for s in steps))
    print(f"{src}: run {run!r} → {len(steps)} steps in {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
