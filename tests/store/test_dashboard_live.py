"""Zero HTTP 500s from a real dashboard server polled while a run writes and compacts live (every 2 segments),
on a run without token rows, and on run names that fail validation (they render the "no run" page)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest

from collapsewatch.demo import dashboard_log, start_dashboard
from collapsewatch.store import StoreWriter
from tests.ports import free_port
from tests.store.dash_pages import page_request

ROOT = Path(__file__).resolve().parents[2]
URLS = ["/", "/run/live", "/tokens/live", "/tokens/live?step=3", "/compare?runs=live,quiet", "/run/quiet",
        "/tokens/quiet", "/tokens/quiet?step=abc", "/run/bad name!", "/run/..", "/tokens/../..", "/run/-x",
        "/tokens/" + "a" * 300, "/compare?runs=live,bad name", "/sql", "/run/nope"]


def _page(port: int, url: str) -> int:
    body = page_request(url)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/_dash-update-component", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.slow
def test_no_500_while_a_run_writes_and_compacts(tmp_path):
    store = tmp_path / "store"
    quiet = StoreWriter(store, "quiet", heartbeat_s=3600)  # step rows, no token rows
    quiet.append("step_metrics", {"run": ["quiet"], "rank": [0], "step": [0], "n_seqs": [4],
                                  "ts": [datetime.now(timezone.utc)]})
    quiet.flush(status="finished")
    writer = subprocess.Popen([sys.executable, str(ROOT / "tests/store/writer_proc.py"), str(store), "live", "0", "1",
                               "60", "0.02", "2"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    port = free_port()
    server = start_dashboard(store, port)
    try:
        statuses: list[tuple[str, int]] = []
        while writer.poll() is None:
            statuses += [(url, _page(port, url)) for url in URLS]
        statuses += [(url, _page(port, url)) for url in URLS]  # and once more on the finished, compacted run
        assert writer.returncode == 0
        errors = [(u, s) for u, s in statuses if s != 200]
        assert errors == [] and len(statuses) >= 2 * len(URLS), dashboard_log(server, 8000, problems=True)  # its traceback
    finally:
        server.terminate()
        server.wait(timeout=30)
