"""Warm overview load (layout + JSON encoding, what Dash sends) of the shipped collapsing sample run, default
smoothing and raw: a quick check that needs no 20 M-token store.

    .venv/bin/python bench/bench_overview_samples.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from plotly.io.json import to_json_plotly

from collapsewatch.dashboard import create_app, history

SAMPLES = Path(__file__).resolve().parents[1] / "sample_runs" / "store"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--run", default="grpo-collapse")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        shutil.copytree(SAMPLES, root)  # a copy: opening a store may upgrade its _schema
        create_app(root)
        from collapsewatch.dashboard.pages import overview

        for label, kw in (("16-step smoothing (default)", {}), ("raw", {"smooth": "1"})):
            history.clear()
            overview.layout(run=a.run, **kw)
            ms = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                to_json_plotly(overview.layout(run=a.run, **kw))
                ms.append((time.perf_counter() - t0) * 1000)
            print(f"overview warm, {a.run}, {label}: p50 {np.percentile(ms, 50):.0f} ms, "
                  f"p95 {np.percentile(ms, 95):.0f} ms (n={a.repeat})")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
