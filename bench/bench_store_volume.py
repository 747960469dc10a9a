"""Store volume: bytes per token row, per sequence row and per step, measured on a store's compacted segments, and
what that makes per 1,000 steps of a run at the LLDS paper's settings with the default token sampling.

    python -m bench.bench_store_volume [STORE]      (default: sample_runs/store, runs of the built-in trainer)

Settings assumed (the LLDS authors' run script ``train_grpo_nqhot.sh``, github.com/vengdeng/LLDS-On-Group-Relative-
Policy-Optimization-Collapse-in-Search-R1 @ e308422): ``data.train_batch_size=512`` prompts × ``rollout.n_agent=5``
= 2,560 sequences per step, ``max_turns=3``, ``max_response_length=500`` per turn, ``max_obs_length=500`` — at most
3 × (500 + 500) = 3,000 response-side tokens per sequence (token rows keep model and observation tokens). Ranks
only split these rows: 64 GPUs write the same rows as 4, plus one step row per rank.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from collapsewatch.recorder import Sampling

ROOT = Path(__file__).resolve().parents[1]
SEQS_PER_STEP = 512 * 5
MAX_TOKENS_PER_SEQ = 3 * (500 + 500)
RANKS = 64


def measure(store: Path) -> dict[str, float]:
    """Bytes per token row, per sequence row, and per (step, rank) of step_metrics + scalars, over every run."""
    size = {t: 0 for t in ("tokens", "sequences", "step_metrics", "scalars")}
    rows = dict.fromkeys(size, 0)
    for t in size:
        for f in store.glob(f"[!_]*/{t}/*.parquet"):
            size[t] += f.stat().st_size
            rows[t] += pq.ParquetFile(f).metadata.num_rows
    return {"token_row": size["tokens"] / rows["tokens"], "sequence_row": size["sequences"] / rows["sequences"],
            "step_rank": (size["step_metrics"] + size["scalars"]) / rows["step_metrics"],
            "token_rows": rows["tokens"], "sequence_rows": rows["sequences"], "steps": rows["step_metrics"]}


def per_1000_steps(m: dict[str, float], tokens_per_seq: int, s: Sampling) -> dict[str, float]:
    """GB per 1,000 steps at the settings of the module docstring."""
    gb = 1e-9 * 1000
    return {"tokens": gb * s.expected_seqs(SEQS_PER_STEP) * tokens_per_seq * m["token_row"],
            "sequences": gb * SEQS_PER_STEP * m["sequence_row"], "steps": gb * RANKS * m["step_rank"]}


def main() -> None:
    store = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "sample_runs" / "store"
    m = measure(store)
    print(f"{store}: {m['token_rows']:,} token rows, {m['sequence_rows']:,} sequence rows, {m['steps']:,} step rows")
    print(f"bytes per token row {m['token_row']:.1f}, per sequence row {m['sequence_row']:.1f}, "
          f"per step and rank (step_metrics + scalars) {m['step_rank']:.0f}")
    for label, s in (("default (cap 64 sequences per step)", Sampling()),
                     ("without the cap (token_seqs_per_step=0, the default before it)", Sampling(token_seqs_per_step=0))):
        print(f"\nsampling {label}: {s.expected_seqs(SEQS_PER_STEP):.0f} of {SEQS_PER_STEP:,} sequences per step "
              "keep token rows")
        print("| tokens per sequence | token rows GB / 1,000 steps | sequence rows GB | step rows GB (64 ranks) |")
        print("|---:|---:|---:|---:|")
        for n in (500, 1000, MAX_TOKENS_PER_SEQ):
            v = per_1000_steps(m, n, s)
            print(f"| {n:,} | {v['tokens']:.1f} | {v['sequences']:.2f} | {v['steps']:.3f} |")


if __name__ == "__main__":
    main()
