"""Multi-writer throughput of the store: rows/s per writer process and in total, 1 → 8 writers, into a local folder
and into an S3 server on 127.0.0.1 (moto, in this process), through the real ``StoreWriter``.

Each writer is one process (a rank), with its own spool for the S3 store (its own "machine"). It appends real token
rows (the ``tokens`` table of a sample run of the built-in trainer, re-stamped with its rank and step) plus sequence
rows of the same run (one per 10 token rows), ``--rows`` token rows per flush, and flushes ``FLUSHES`` times; rows/s counts token and
sequence rows over the writer's flush loop (imports and start-up excluded; all writers start together).

    python -m bench.bench_multiwriter [--flushes 10] [--writers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_runs" / "store" / "grpo-healthy"

WRITER = """
import json, sys, time
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from collapsewatch.store.writer import StoreWriter
store, rank, flushes, start_at, tokens, sequences = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    float(sys.argv[4]), sys.argv[5], sys.argv[6]
tok, seq = pq.read_table(tokens), pq.read_table(sequences)
w = StoreWriter(store, "bench", rank=rank, world_size=8)
def stamp(t, step):
    t = t.set_column(t.schema.get_field_index("rank"), "rank", pa.array([rank] * t.num_rows, t.schema.field("rank").type))
    return t.set_column(t.schema.get_field_index("step"), "step", pa.array([step] * t.num_rows, t.schema.field("step").type))
while time.time() < start_at:
    time.sleep(0.005)
t0, rows = time.perf_counter(), 0
for step in range(flushes):
    w.append("tokens", stamp(tok, step)); w.append("sequences", stamp(seq, step))
    rows += tok.num_rows + seq.num_rows
    w.flush()
w.flush("finished")
dt = time.perf_counter() - t0
print(json.dumps({"rows": rows, "seconds": dt, "errors": w.write_errors}))
"""


def _inputs(tmp: Path, rows: int) -> tuple[Path, Path]:
    """``rows`` real token rows and the sequence rows of the same steps, from a sample run."""
    import pyarrow.parquet as pq

    from collapsewatch.store.writer import arrow_schemas, conform

    tok = pq.read_table(next((SAMPLE / "tokens").glob("*.parquet")))
    seq = pq.read_table(next((SAMPLE / "sequences").glob("*.parquet")))
    reps = -(-rows // tok.num_rows)
    import pyarrow as pa

    tok = pa.concat_tables([tok] * reps).slice(0, rows)
    n_seq = max(1, rows // 10)  # one sequence row per 10 token rows
    seq = pa.concat_tables([seq] * (-(-n_seq // seq.num_rows))).slice(0, n_seq)
    tp, sp = tmp / "tokens.parquet", tmp / "sequences.parquet"
    pq.write_table(conform(tok, arrow_schemas()["tokens"]), tp)
    pq.write_table(conform(seq, arrow_schemas()["sequences"]), sp)
    return tp, sp


def run(store: str, n: int, flushes: int, inputs: tuple[Path, Path], env: dict[str, str]) -> dict:
    start_at = time.time() + 8.0  # every writer has imported and read its input by then (2 cores, 8 processes)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store, str(r), str(flushes), str(start_at),
                               str(inputs[0]), str(inputs[1])], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**env, "COLLAPSEWATCH_CACHE": str(Path(env["BENCH_TMP"]) / f"machine{r}")})
             for r in range(n)]
    outs = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
    per = [o["rows"] / o["seconds"] for o in outs]
    total = sum(o["rows"] for o in outs) / max(o["seconds"] for o in outs)
    return {"writers": n, "per_writer": sum(per) / len(per), "total": total, "errors": sum(o["errors"] for o in outs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flushes", type=int, default=10)
    ap.add_argument("--rows", type=int, default=20_000, help="token rows per flush")
    ap.add_argument("--writers", default="1,2,4,8")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.store import s3server

    server = s3server.start()
    try:
        server.create_bucket("bench")
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            inputs = _inputs(tmp, args.rows)
            env = {**os.environ, **server.env, "PYTHONPATH": str(ROOT), "BENCH_TMP": str(tmp)}
            print(f"{args.rows:,} token rows + sequence rows per flush, {args.flushes} flushes per writer, "
                  f"{os.cpu_count()} CPU cores")
            print("| store | writers | rows/s per writer | rows/s total | write errors |")
            print("|---|---:|---:|---:|---:|")
            for kind in ("local", "s3"):
                for n in (int(x) for x in args.writers.split(",")):
                    store = str(tmp / f"local{n}") if kind == "local" else f"s3://bench/w{n}"
                    r = run(store, n, args.flushes, inputs, env)
                    print(f"| {kind} | {n} | {r['per_writer']:,.0f} | {r['total']:,.0f} | {r['errors']} |", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
