"""Dashboard latency on a large synthetic store: overview load, live poll, token drill-down, heatmap.

    .venv/bin/python bench/bench_dashboard.py [--steps 2000] [--token-seqs 16] [--seq-len 625] [--store DIR]

Writes one run through ``StoreWriter`` exactly as the recorder does (a segment per table every 10 steps;
64 sequences per step, ``token-seqs`` × ``seq-len`` token rows per step: 20 M token rows by default). While
the run is live, polls are timed at two history lengths (half the run, then the full run); once the run
is written, page loads and the token drill-down are timed. Times are of the server-side work of each
callback, including the JSON encoding of its response (what Dash sends).

Goals: overview p95 ≤ 300 ms, token drill-down ≤ 200 ms, poll independent of history length.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from plotly.io.json import to_json_plotly

from collapsewatch.dashboard import create_app, history, live, state
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store import queries

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fixtures package (tests/fixtures)
from fixtures.synthetic_store import Shape, SyntheticRun  # noqa: E402

RUN = "bench"
ROWS: list[tuple[str, str, list[float]]] = []


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    if not isinstance(out, pd.DataFrame):
        to_json_plotly(out)  # Dash encodes every callback response: count it
    return (time.perf_counter() - t0) * 1000, out


def record(name: str, history_len: str, times: list[float]) -> None:
    ROWS.append((name, history_len, times))


def measure_polls(writer: SyntheticRun, st: dict, label: str, n: int) -> dict:
    """n × (write 10 steps = one flush; poll): the live overview's refresh, and the same rows read naively."""
    polls, naive, idle = [], [], []
    for _ in range(n):
        writer.write(until=writer.next_step + 10)
        ms, got = timed(live.poll, st)
        st = got["state"]
        polls.append(ms)
        idle.append(timed(live.poll, st)[0])
        with state.borrow() as s:  # without the segment index: the run's view filtered to the new steps
            naive.append(timed(queries.step_rows, s, RUN, COLUMNS, after=st["last"] - 10)[0])
    record("poll: 10 new steps (Patch)", label, polls)
    record("poll: nothing new", label, idle)
    record("  (naive: run view, step > last)", label, naive)
    return st


def measure_pages(steps: list[int], n: int) -> None:
    from collapsewatch.dashboard.pages import overview, tokens

    history.clear()
    record("overview load, cold (first visit)", "full", [timed(overview.layout, run=RUN)[0]])
    record("overview load, warm", "full", [timed(overview.layout, run=RUN)[0] for _ in range(n)])
    record("overview load, warm, raw", "full", [timed(overview.layout, run=RUN, smooth="1")[0] for _ in range(n)])
    record("overview zoomed on an episode", "full", [timed(overview.layout, run=RUN, episode="0",
                                                           **{"from": "900", "to": "1100"})[0] for _ in range(n)])
    record("token steps index, cold", "full", [timed(tokens.layout, run=RUN)[0]])
    record("heatmap ratio, cold", "full", [timed(tokens.heatmap_for, RUN, "ratio", steps[-1])[0]])
    record("heatmap entropy, cold", "full", [timed(tokens.heatmap_for, RUN, "entropy", steps[-1])[0]])
    record("heatmap metric switch, warm", "full", [timed(tokens.heatmap_for, RUN, m, steps[-1])[0]
                                                    for m in ["ratio", "entropy"] * (n // 2)])
    rng = random.Random(0)
    pick, show = [], []
    for step in rng.sample(steps, n):
        ms, (_, value) = timed(tokens._seq_options, RUN, step, None)
        pick.append(ms)
        show.append(timed(tokens.render, value, "ratio", step, RUN)[0])
    record("token drill-down: pick step", "full", pick)
    record("token drill-down: show sequence", "full", show)
    record("token drill-down: step + sequence", "full", [a + b for a, b in zip(pick, show, strict=True)])
    record("heatmap: move to another step", "full", [timed(tokens.move_marker, RUN, "ratio", s)[0]
                                                     for s in rng.sample(steps, n)])


def table() -> str:
    lines = [f"{'operation':40s} {'history':>8s} {'n':>4s} {'p50 ms':>9s} {'p95 ms':>9s} {'max ms':>9s}"]
    for name, hist, t in ROWS:
        a = np.asarray(t)
        lines.append(f"{name:40s} {hist:>8s} {len(a):4d} {np.percentile(a, 50):9.1f} {np.percentile(a, 95):9.1f} "
                     f"{a.max():9.1f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--token-seqs", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=625)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--store", help="folder for the store (default: temporary, deleted afterwards)")
    a = ap.parse_args()
    root = Path(a.store or tempfile.mkdtemp(prefix="cw-bench-"))
    shape = Shape(seqs=64, token_seqs=a.token_seqs, seq_len=a.seq_len)
    half, n = a.steps // 2, a.repeat
    try:
        t0 = time.perf_counter()
        writer = SyntheticRun(root, RUN, a.steps, shape=shape, flush_every=10, heartbeat_s=3600)
        writer.write(until=half - 10 * n)
        build_s = time.perf_counter() - t0
        create_app(root)
        st = live.load(RUN)["state"]
        st = measure_polls(writer, st, str(half), n)
        t1 = time.perf_counter()
        writer.write(until=a.steps - 10 * n)
        build_s += time.perf_counter() - t1
        st = measure_polls(writer, st, str(a.steps), n)
        writer.close()
        with state.borrow() as s:
            n_tokens = int(s.query(f"SELECT count(*) AS n FROM ({s.run_view('tokens', RUN)})")["n"].iloc[0])
            n_segments = len(queries.segment_files(s, RUN, "tokens"))
        size_mb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
        measure_pages(list(range(a.steps)), n)
        print(f"store: {a.steps} steps, {n_tokens:,} token rows in {n_segments} token segments, {size_mb:,.0f} MiB, "
              f"written in {build_s:.0f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
        print(table())
    finally:
        if not a.store:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
