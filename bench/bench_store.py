"""Write throughput: token rows/s through the Recorder → StoreWriter path vs a bare pyarrow write.

Both write the same rows (the `tokens` table of B×T steps, every sequence sampled) to Parquet (zstd), one
file per step, side by side and interleaved (A B A B …, medians) in one run. The recorder column includes
everything the recorder does: the probe's token/sequence/step metrics, host copies, row selection, Arrow
conversion with the schema, the sequences/steps segments and the atomic renames. One-time store set-up
(schema files) is excluded and printed separately.

    python -m bench.bench_store [--B 64] [--T 512] [--steps 10] [--repeats 3]

Last line: the cost of one live-compaction merge (``StoreWriter.compact_every``) of those per-step token segments
into one, against the bare write of the same rows.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from bench.bench_probe import batch
from collapsewatch import Monitor
from collapsewatch.recorder import Sampling
from collapsewatch.store import connect


def recorder_run(d: str, b, steps: int) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    mon = Monitor(d, run="w", detectors=False, sampling=Sampling(token_every=1), flush_steps=1,
                  flush_seconds=3600, queue_size=10**4)
    t_setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for step in range(steps):
        mon.observe(b, step=step)
    mon.close(compact=False)
    t = time.perf_counter() - t0
    rows = connect(d).execute("SELECT count(*) FROM tokens").fetchone()[0]
    return t, t_setup, rows


def bare_run(d: str, tables: list) -> float:
    t0 = time.perf_counter()
    for i, t in enumerate(tables):
        pq.write_table(t, Path(d) / f"bare{i}.parquet", compression="zstd")
    return time.perf_counter() - t0


def merge_run(d: str, tables: list) -> float:
    from collapsewatch.store.writer import merge_segments

    folder = Path(d) / "merge"
    folder.mkdir()
    files = []
    for i, t in enumerate(tables):
        files.append(folder / f"r0-{i:06d}-x.parquet")
        pq.write_table(t, files[-1], compression="zstd")
    t0 = time.perf_counter()
    merged = merge_segments("tokens", files, 0)
    took = time.perf_counter() - t0
    assert pq.read_metadata(merged).num_rows == sum(t.num_rows for t in tables)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    b = batch(args.B, args.T)
    rec, bare, setup, merge = [], [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as d:
            t, t_setup, rows = recorder_run(d, b, args.steps)
            rec.append(t)
            setup.append(t_setup)
            files = sorted((Path(d) / "w" / "tokens").glob("*.parquet"))
            tables = [pq.read_table(f) for f in files]  # exactly the rows the recorder wrote, one per step
            bare.append(bare_run(d, tables))
            merge.append(merge_run(d, tables))
    t_rec, t_bare = statistics.median(rec), statistics.median(bare)
    print(f"{rows:,} token rows per repeat ({args.steps} steps of {args.B}×{args.T}), 1 torch thread, "
          f"median of {args.repeats} interleaved repeats")
    print(f"{'path':<52}{'seconds':>9}{'rows/s':>14}")
    print(f"{'Recorder (probe + Arrow + atomic Parquet segments)':<52}{t_rec:>9.2f}{rows / t_rec:>14,.0f}")
    print(f"{'pyarrow.parquet.write_table of the same rows':<52}{t_bare:>9.2f}{rows / t_bare:>14,.0f}")
    print(f"recorder / bare throughput: {t_bare / t_rec:.2f}×   (one-time store set-up, excluded: "
          f"{statistics.median(setup):.2f} s)")
    t_merge = statistics.median(merge)
    print(f"live compaction, one merge of the {len(tables)} segments into one: {t_merge:.2f} s = "
          f"{t_merge / t_bare:.2f}× the bare write of the same rows")


if __name__ == "__main__":
    main()
