"""A run's page as the server builds it, in-process: ``overview.layout`` of one run (its data and the run picker's
``run_names``), after a first build. Prints the median and range of N builds and of ``run_names`` alone.

    python -m bench.run_page STORE RUN [--builds 7]

Time it on a 1-run store and on a 1,000-run store holding the same run (``bench.bench_scale.stores``), each code under
its own warm cache (``COLLAPSEWATCH_CACHE=…``): issue 32 asks for one run's page within 1.5 × its 1-run time.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("run")
    ap.add_argument("--builds", type=int, default=7)
    a = ap.parse_args()
    from collapsewatch.dashboard.app import create_app

    create_app(a.store)
    from collapsewatch.dashboard import state
    from collapsewatch.dashboard.pages import overview
    from collapsewatch.store import queries

    overview.layout(a.run)  # the first: the run's step history read, its judgement loaded
    pages, names = [], []
    for _ in range(a.builds):
        time.sleep(0.2)
        t0 = time.perf_counter()
        overview.layout(a.run)
        pages.append(time.perf_counter() - t0)
        with state.borrow() as s:
            t0 = time.perf_counter()
            queries.run_names(s)
            names.append(time.perf_counter() - t0)

    def cell(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:.1f} ms ({min(xs) * 1000:.1f}–{max(xs) * 1000:.1f})"

    with state.borrow() as s:
        n = len(queries.run_names(s))
    print(f"| {n:,} runs | page {cell(pages)} | run_names {cell(names)} |")


if __name__ == "__main__":
    main()
