"""An object-store reader sees every published flush whole or not at all, against a real S3 server (moto): a merge
between a reader's listing and its downloads loses no row, a published flush missing a segment is left out whole,
warned about and reported by ``check``, and an endpoint paused (SIGSTOP) and resumed mid-run loses no row."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from collapsewatch.store import StoreWriter, mirror
from collapsewatch.store.compact import compact_run
from collapsewatch.store.location import Remote, parse_url
from collapsewatch.store.views import create_views
from tests.store import s3server

ROOT = Path(__file__).resolve().parents[2]
SEQS = 4  # sequence rows per step


@pytest.fixture(scope="module")
def server():
    """A moto server in a process of its own, so that a test can pause it (SIGSTOP) like a stalled endpoint."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.s3server"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    endpoint = proc.stdout.readline().strip()
    s = s3server.S3Server(None, endpoint)
    s.create_bucket("flushes")
    yield proc, s
    proc.send_signal(signal.SIGCONT)
    proc.kill()
    proc.wait()


@pytest.fixture
def url(server, tmp_path, monkeypatch):
    for k, v in server[1].env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    return f"s3://flushes/{uuid.uuid4().hex[:8]}"


def _flush(w: StoreWriter, steps: list[int]) -> None:
    """One flush: a step row and SEQS sequence rows per step."""
    n = len(steps)
    w.append("step_metrics", {"run": [w.run] * n, "rank": [0] * n, "step": steps, "n_seqs": [SEQS] * n,
                              "ts": [datetime.now(timezone.utc)] * n})
    w.append("sequences", {"run": [w.run] * n * SEQS, "rank": [0] * n * SEQS, "step": steps * SEQS,
                           "seq_id": [i for i in range(SEQS) for _ in steps]})
    w.flush()


def _counts(root: Path) -> tuple[int, int]:
    """(steps with a step row, steps whose step row and SEQS sequence rows are not both there) in a mirror."""
    con = duckdb.connect(":memory:")
    create_views(con, root)
    return con.execute(f"""
        WITH s AS (SELECT DISTINCT step FROM step_metrics),
             q AS (SELECT step, count(*) AS n FROM sequences GROUP BY step)
        SELECT (SELECT count(*) FROM s),
               (SELECT count(*) FROM s FULL JOIN q USING (step) WHERE s.step IS NULL OR coalesce(q.n, 0) <> {SEQS})
    """).fetchone()


def test_a_merge_between_listing_and_downloads_loses_no_row(url, tmp_path, monkeypatch):
    # three flushes published; the reader lists them, then — before its GETs — the writer merges them (uploads the
    # merged segment, which that listing lacks, and deletes the three). The code before skipped the deleted objects:
    # this sync installed 0 of 6 steps. Now it lists again and finds the merged segment.
    w = StoreWriter(url, "m", compact_every=0, heartbeat_s=3600)
    for s in range(3):
        _flush(w, [2 * s, 2 * s + 1])
    w.flush("finished")
    listed = Remote.list
    merged: list[int] = []

    def list_then_merge(self, rel=""):
        out = listed(self, rel)
        if rel == "" and not merged:  # the reader's listing (compaction lists the run's folder)
            merged.append(-1)
            merged[0] = compact_run(w.where, "m", rank=0, export=False)  # real uploads and deletes
        return out

    monkeypatch.setattr(Remote, "list", list_then_merge)
    local = tmp_path / "mirror"
    mirror.sync(parse_url(url), local)
    assert merged == [6]  # 3 step_metrics + 3 sequences segments merged (2 tables × 3 flushes)
    assert _counts(local) == (6, 0)  # 6 steps, each with its 4 sequence rows


def test_a_flush_missing_a_segment_is_left_out_whole_and_reported(url, tmp_path, caplog):
    from typer.testing import CliRunner

    from collapsewatch.cli import app as cli_app

    w = StoreWriter(url, "x", compact_every=0, heartbeat_s=3600)
    _flush(w, [0, 1])
    _flush(w, [2, 3])
    w.flush("finished")
    remote = parse_url(url)
    lost = next(r for r in remote.list("x/sequences") if "-000002-" in r)  # flush 2's sequences, deleted by hand
    remote.delete(lost)
    caplog.set_level(logging.WARNING, logger="collapsewatch.store")
    local = tmp_path / "mirror"
    mirror.sync(remote, local)
    assert _counts(local) == (2, 0)  # flush 1 whole; flush 2's step rows are not read without its sequences
    marker = lost.replace("sequences/", "_published/").removesuffix(".parquet")
    warned = [r.getMessage() for r in caplog.records if "missing" in r.getMessage()]
    assert len(warned) == 1 and f"{url}/{marker}" in warned[0] and "sequences/" in warned[0]
    out = CliRunner().invoke(cli_app, ["check", url])
    assert out.exit_code == 1 and f"{url}/{marker}: published flush is missing sequences/" in out.stdout, out.output


def test_an_endpoint_paused_mid_run_loses_no_row(server, url, tmp_path):
    """The issue's trial in seconds: a writer flushing every 2 steps and compacting every 3 segments, a reader
    syncing its mirror in a loop, the endpoint paused (SIGSTOP) twice for a second and resumed. Every read: each
    step with its step row has its 4 sequence rows (never half a flush) and the step count never goes down."""
    proc, _ = server
    n_steps = 40
    w = StoreWriter(url, "o", compact_every=3, heartbeat_s=3600, upload_retry_s=0.2)
    flushed = threading.Event()

    def write() -> None:
        for s in range(0, n_steps, 2):
            _flush(w, [s, s + 1])
            if s >= 10:
                flushed.set()
            time.sleep(0.01)
        w.flush("finished")

    writer = threading.Thread(target=write)
    writer.start()
    reads: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    remote, local = parse_url(url), tmp_path / "mirror"

    def read() -> None:
        while writer.is_alive() or len(reads) < 2:
            try:
                mirror.sync(remote, local)
                reads.append(_counts(local))
            except Exception as e:  # noqa: BLE001 — any failure of a read is counted, and fails the test
                errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    flushed.wait(60)
    for _ in range(2):
        proc.send_signal(signal.SIGSTOP)
        time.sleep(1.0)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.3)
    writer.join(120)
    reader.join(120)
    assert errors == [] and w.write_errors == 0
    assert all(half == 0 for _, half in reads), reads  # never a step without its sequences
    seen = [n for n, _ in reads]
    assert seen == sorted(seen) and seen[-1] == n_steps, seen  # never fewer steps than a read before; all at the end
    mirror.sync(remote, local)
    assert _counts(local) == (n_steps, 0)
    print(f"{len(reads)} reads, {sum(h > 0 for _, h in reads)} with half a flush")  # the trial's counts (pytest -s)
