"""A cold ``collapsewatch runs`` — every run judged afresh, as on a store new to the machine or after the detector
rules changed — with its runs judged in one process and in worker processes, side by side: each setting's
``runs STORE --json --workers N`` is timed in turn, round after round, each on an empty reader cache (a fresh
``COLLAPSEWATCH_CACHE``), so machine noise falls on all alike. Prints each setting's median and range of wall
seconds, its ratio to one process, and whether its table (every column) equals one process's.

    python -m bench.runs_workers STORE [--workers 1 2 4] [--rounds 2]

Run it from a checkout (the package is imported from the current directory's ``collapsewatch``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    store = a.store if "://" in a.store else str(Path(a.store).resolve())
    settings = [1, *(w for w in a.workers if w != 1)]
    times: dict[int, list[float]] = {w: [] for w in settings}
    tables: dict[int, list] = {}
    code = str(Path.cwd())
    for _ in range(a.rounds):
        for w in settings:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "PYTHONPATH": code, "COLLAPSEWATCH_CACHE": cache}
                t = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "collapsewatch", "runs", store, "--json", "--workers",
                                       str(w)], env=env, capture_output=True, text=True, cwd=code)
                times[w].append(time.perf_counter() - t)
            if done.returncode:
                sys.exit(f"--workers {w}: runs failed: {done.stderr.strip().splitlines()[-1:]}")
            tables[w] = json.loads(done.stdout)
    base = statistics.median(times[1])
    n = len(tables[1]) if isinstance(tables[1], list) else "?"
    print(f"cold `runs` of {store} ({n} runs), {a.rounds} round(s); CPUs here: {os.cpu_count()}")
    print(f"{'workers':>7} {'median s':>9} {'range s':>15} {'÷ one':>6}  table")
    for w in settings:
        t = times[w]
        same = "same as one process" if tables[w] == tables[1] else "DIFFERS"
        print(f"{w:>7} {statistics.median(t):>9.1f} {min(t):>7.1f}–{max(t):<7.1f} {statistics.median(t) / base:>6.2f}  "
              f"{same}")


if __name__ == "__main__":
    main()
