"""Dashboard pages on an object store while a run writes and compacts, with the mirror synced before every query:
the race a page loses when a sync falls between its listing of a run's files and its query, made as likely as it can
be. Every page of ``tests/store/test_dashboard_live.URLS`` is rendered in this process (Flask's test client) again and
again while a writer process (``tests/store/writer_proc.py``: STEPS steps, a flush each, a compaction every 2) writes
to an S3 server on 127.0.0.1 (moto, in this process); prints the renders and failures per page, and the first
failure's traceback.

    python -m bench.race_pages [--steps 60] [--sync-s 0]

``--sync-s 1`` is the dashboard's own pace (``queries.SYNC_S``): a sync at most once a second per process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60, help="steps the writer writes (a flush each)")
    p.add_argument("--sync-s", type=float, default=0.0, help="the readers' sync interval (queries.SYNC_S)")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.store import s3server

    server = s3server.start()
    server.create_bucket("race-pages")
    tmp = Path(tempfile.mkdtemp(prefix="race-pages-"))
    os.environ.update(server.env, COLLAPSEWATCH_CACHE=str(tmp / "reader"), PYTHONPATH=str(ROOT))
    url = "s3://race-pages/store"
    from collapsewatch.store import mirror, queries
    from collapsewatch.store.writer import StoreWriter
    from dashboard.app import create_app
    from tests.store.dash_pages import page_request
    from tests.store.test_dashboard_live import URLS

    quiet = StoreWriter(url, "quiet", heartbeat_s=3600)  # a finished run beside the live one (as the test has)
    quiet.append("step_metrics", {"run": ["quiet"], "rank": [0], "step": [0], "n_seqs": [4],
                                  "ts": [datetime.now(timezone.utc)]})
    quiet.flush(status="finished")
    writer = subprocess.Popen([sys.executable, str(ROOT / "tests/store/writer_proc.py"), url, "live", "0", "1",
                               str(a.steps), "0.02", "2"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              env={**os.environ, "COLLAPSEWATCH_CACHE": str(tmp / "writer")})
    queries.SYNC_S, mirror.SYNC_SHARE = a.sync_s, 0.0
    app = create_app(url)
    app.server.config["PROPAGATE_EXCEPTIONS"] = True  # the exception itself, not a 500 page
    client = app.server.test_client()
    renders, failures, first = Counter(), Counter(), None
    try:
        while True:
            running = writer.poll() is None
            for page in URLS:
                renders[page] += 1
                try:
                    ok = client.post("/_dash-update-component", json=page_request(page)).status_code == 200
                except Exception:
                    ok, first = False, first or f"{page}:\n{traceback.format_exc()}"
                failures[page] += not ok
            if not running:  # one more round on the finished, compacted run
                break
    finally:
        writer.wait()
        server.stop()
    print("| page | renders | failed |\n|---|---:|---:|")
    for page in URLS:
        shown = page if len(page) <= 40 else f"{page[:30]}… ({len(page)} characters)"
        print(f"| `{shown}` | {renders[page]} | {failures[page]} |")
    print(f"| all | {sum(renders.values())} | {sum(failures.values())} |")
    if first:
        print("\nfirst failure, on " + first)


if __name__ == "__main__":
    main()
