"""The long and wide rows of the scale bench: a 10,000-step run, and a compare of 50 runs.

    python -m bench.scale_long [--dir DIR] [--steps 10000] [--wide 1000] [--compare 50] [--repeats 3]

Writes one run of ``--steps`` steps through the public ``Monitor`` API into ``DIR/long<steps>`` (``bench.scale_store``:
the same batches as the bench's 50-step runs, kept between invocations), then times, side by side and interleaved,
on it and on ``DIR/n1`` (one 50-step run of the same shape, ``bench.bench_scale`` writes it):

* commands, each a new process: ``sql`` of the run's step rows, ``detect --run``;
* in one process per store and try: the run page's data (``dashboard.live.load``, cold), the run's step rows;
* the compare page's figure (``pages.compare.draw``: reward and entropy, cold then warm) of ``--compare`` runs of
  ``DIR/n<wide>`` beside the same for 3 of its runs.

Each run is judged once before the tries (its verdict kept, as for a reader's second look). Prints a table (medians of
``--repeats`` tries, with their range).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_scale import ONE_RUN_SQL, REPO, cli, timed, version_env

METRICS = ["reward_mean", "entropy_mean"]


def probe(store: Path, run: str, compare: int) -> dict[str, float]:
    """In-process timings on ``store``: the run page of ``run``; with ``compare``, the compare figure of that many
    runs, then of 3 (each cold: a new process per probe)."""
    from collapsewatch.store import Store, queries
    from dashboard import live, state
    from dashboard.figures import COLUMNS

    out: dict[str, float] = {}
    state.configure(store)
    if compare:
        from dashboard.app import create_app

        create_app(str(store))  # pages register with an app
        from dashboard.pages import compare as page

        runs = queries.run_names(Store(store))
        for n in (compare, 3):
            for when in ("cold", "warm"):
                t0 = time.perf_counter()
                page.draw(runs[:n], METRICS)
                out[f"compare page figure, {n} runs ({when})"] = time.perf_counter() - t0
        return out
    t0 = time.perf_counter()
    live.load(run)
    out["run page data (cold)"] = time.perf_counter() - t0
    s = Store(store)
    queries.step_rows(s, run, COLUMNS)
    t0 = time.perf_counter()
    queries.step_rows(s, run, COLUMNS)
    out["one run's step rows (warm)"] = time.perf_counter() - t0
    return out


def run_probe(store: Path, run: str, compare: int, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "bench.scale_long", "--probe", str(store), run, str(compare)],
                          capture_output=True, text=True, env=env, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"probe of {store} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(values: list[float]) -> str:
    med = statistics.median(values)
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1000.0)
    return f"{med * scale:,.0f} {unit} ({min(values) * scale:,.0f}–{max(values) * scale:,.0f})" if unit == "ms" \
        else f"{med:.2f} s ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    from bench.scale_store import grow, run_name

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "collapsewatch-scale")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--wide", type=int, default=1000, help="the store DIR/n<WIDE> whose runs are compared")
    ap.add_argument("--compare", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--probe", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe:
        print(json.dumps(probe(Path(a.probe[0]), a.probe[1], int(a.probe[2]))))
        return
    run = run_name(0)
    long_store, short_store, wide = a.dir / f"long{a.steps}", a.dir / "n1", a.dir / f"n{a.wide}"
    for store, steps in ((long_store, a.steps), (short_store, 50)):
        t0 = time.perf_counter()
        if grow(store, 1, steps, 16, 48):
            print(f"wrote {store} ({steps} steps) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    env = version_env(REPO, a.dir / "cache-long")  # this checkout's code, its own reader cache
    for store in (long_store, short_store):  # untimed: each run judged once (its verdict kept), as a reader's second look
        timed(cli("detect", str(store), "--run", run), env)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(a.repeats):
        for label, store in ((f"{a.steps:,} steps", long_store), ("50 steps", short_store)):
            for name, cmd in (("sql: the run's step rows", cli("sql", str(store), ONE_RUN_SQL.format(run=run))),
                              ("detect --run", cli("detect", str(store), "--run", run))):
                times.setdefault((name, label), []).append(timed(cmd, env))
            for name, took in run_probe(store, run, 0, env).items():
                times.setdefault((name, label), []).append(took)
        if wide.is_dir():
            for name, took in run_probe(wide, run, a.compare, env).items():
                times.setdefault((name, f"{a.wide:,}-run store"), []).append(took)
    print("| what | store | time: median (range) |\n|---|---|---:|")
    for (name, label), values in times.items():
        print(f"| {name} | {label} | {fmt(values)} |")


if __name__ == "__main__":
    main()
