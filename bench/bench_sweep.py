"""Server time of the sweep view and the runs page's config columns and groups, per refresh, at N runs.

    .venv/bin/python bench/bench_sweep.py STORE [--runs 10 100 1000]

The runs page's table (``history.run_table``) of STORE is read once; its rows are repeated to N runs with distinct
names and configs (``lr`` over three values, ``seed`` over five), so the figures are those of N real run rows without
writing N runs. Best of 5, milliseconds: ``runs_rows`` (the runs page's rows before this view, for scale), the sweep
cold (configs parsed, axes found), after one running run's step moved, with nothing changed, the runs page's rows
with config columns and groups by lr, and the sweep page's chart and table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import pandas as pd

from collapsewatch.dashboard import charts, history, sweep, tables
from collapsewatch.dashboard.app import create_app
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store import Store


def grown(base: pd.DataFrame, n: int) -> pd.DataFrame:
    rows = []
    for i in range(n):
        r = dict(base.iloc[i % len(base)])
        cfg = json.loads(r["config"]) if isinstance(r["config"], str) and r["config"] else None
        if cfg:
            cfg.update(lr=(1e-4, 3e-4, 1e-3)[i % 3], seed=i % 5, run=f"r{i}")
            r["config"] = json.dumps(cfg)
        rows.append({**r, "run": f"r{i:04d}"})
    return pd.DataFrame(rows)


def best(f: Callable[[], object], k: int = 5) -> float:
    times = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def measure(t: pd.DataFrame, view: Callable[..., object]) -> list[float]:
    """The six figures of one row of the table, for the run rows ``t``."""
    sweep._flat_text.cache_clear()
    sweep._sweeps.clear()
    sweep._placed.cache_clear()
    cold = best(lambda: sweep.sweep(t), 1)
    step = [10**6]

    def moved() -> None:
        step[0] += 1
        t.loc[0, "last_step"] = step[0]  # a running run's new step: no config changed
        sweep.sweep(t)

    def draw() -> None:
        s = sweep.sweep(t)
        charts.sweep_figure(s), tables.sweep_rows(s)

    return [best(lambda: tables.runs_rows(t)), cold, best(moved), best(lambda: sweep.sweep(t)),
            best(lambda: view(t, "lr", list(sweep.VERDICTS))), best(draw)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1000])
    a = ap.parse_args()
    create_app(a.store)  # the pages need the app
    from collapsewatch.dashboard.pages import runs as runs_page

    base = history.run_table(Store(a.store), COLUMNS)
    print(f"load average {os.getloadavg()[0]:.1f}; {len(base)} run rows of {a.store} repeated; ms, best of 5")
    names = ("runs_rows", "sweep cold", "1 run moved", "unchanged", "runs view", "sweep draw")
    print(f"{'runs':>6} " + " ".join(f"{h:>12}" for h in names))
    for n in a.runs:
        print(f"{n:>6} " + " ".join(f"{v:>12.1f}" for v in measure(grown(base, n), runs_page.view)))


if __name__ == "__main__":
    main()
