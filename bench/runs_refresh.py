"""The runs page's refresh as the server does it, in-process: ``history.run_table``, ``pages.runs.view`` and the JSON
(plotly's encoder, as Dash) of what the refresh sends the browser — the grid transaction of the rows that changed
since the previous refresh (``tables.grid_changes``), or every shown row where the code has no transactions (an
older checkout). Prints the median, range and bytes sent of N refreshes 0.3 s apart after a first.

    python -m bench.runs_refresh STORE [--refreshes 7]

Time two codes side by side by running it under each in turn, each with its own warm cache
(``COLLAPSEWATCH_CACHE=…``): the first refresh judges every run that cache has not seen. Run it beside
``python -m bench.scale_store STORE --live RUN --seconds 110`` for a refresh with a live run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--refreshes", type=int, default=7)
    a = ap.parse_args()
    from plotly.utils import PlotlyJSONEncoder

    from collapsewatch.dashboard.app import create_app

    create_app(a.store)
    from collapsewatch.dashboard import tables
    from collapsewatch.dashboard.pages import runs
    from collapsewatch.dashboard.sweep import VERDICTS

    sends_changes = hasattr(tables, "grid_changes")
    v = runs.view(runs._table(), None, list(VERDICTS))
    held = runs.hold(v) if sends_changes else None
    times, sizes = [], []
    for _ in range(a.refreshes):
        time.sleep(0.3)
        t0 = time.perf_counter()
        v = runs.view(runs._table(), None, list(VERDICTS))
        sent: object = v["shown"]
        if sends_changes:
            change = runs.sent(v, held, False) if hasattr(runs, "sent") else tables.grid_changes(
                runs._held.get(held), [r["name"] for r in v["shown"]], v["keys"], v["shown"])
            if change is not None:
                sent = change
            if change != {}:
                held = runs.hold(v)
        summary = v["summary"] if "summary" in v else runs._summary(v["rows"], len(v["shown"]))
        body = json.dumps({"rows": sent, "summary": summary}, cls=PlotlyJSONEncoder)
        times.append(time.perf_counter() - t0)
        sizes.append(len(body))
    print("| runs | refresh, median | min–max | sent |\n|---:|---:|---|---:|")
    print(f"| {len(v['rows']):,} | {statistics.median(times) * 1000:.1f} ms | {min(times) * 1000:.1f}–"
          f"{max(times) * 1000:.1f} ms | {statistics.median(sizes) / 1000:.1f} kB |")


if __name__ == "__main__":
    main()
