"""An object-store reader sees every published flush whole or not at all, against a real S3 server (moto): a merge
between a reader's listing and its downloads loses no row, a published flush missing a segment is left out whole,
warned about and reported by ``check``, and an endpoint down mid-run and back loses no row."""

from __future__ import annotations

import logging
import os
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
    """A moto server in a process of its own (a real HTTP endpoint apart from the reader's and writer's process)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.s3server"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    endpoint = proc.stdout.readline().strip()
    s = s3server.S3Server(None, endpoint)
    s.create_bucket("flushes")
    yield proc, s
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


def test_a_merged_segment_merged_again_after_the_listing_reports_no_flush_broken(url, tmp_path, monkeypatch,
                                                                                 caplog):
    # Three flushes merged into c1 by the writer's own merge (merge_segments), their markers not yet retired: the
    # state between a writer's merge and its retire. A fourth flush after it. The reader (a fresh, lazy mirror: it
    # fetches no segment but reads c1's footer to check the three markers) lists and reads the markers; before it
    # reads that footer the writer merges c1 and flush 4 into c2 (its markers still there). The code before read the
    # gone c1 as "replaces nothing" and hid flushes 1-3 as broken (a step count that fell while a run wrote: CI of
    # 2026-11-28); now it lists again and finds c2, which names all four flushes (transitively).
    from collapsewatch.store.writer import merge_segments

    def merge(names: str) -> None:
        for table in ("step_metrics", "sequences"):
            merge_segments(table, sorted((w.where.local / "m" / table).glob(names)), 0, w.where)

    w = StoreWriter(url, "m", compact_every=0, heartbeat_s=3600)
    for s in range(3):
        _flush(w, [2 * s, 2 * s + 1])
    merge("r0-0*.parquet")  # c1 <- flushes 1-3
    _flush(w, [6, 7])
    w.flush("finished")
    remote = parse_url(url)
    assert len(remote.list("m/_published")) == 4  # flushes 1-3 merged, their markers still there
    read = Remote._read
    merged: list[int] = []

    def read_then_merge(self, rel):
        out = read(self, rel)
        if "/_published/" in rel and not merged:  # the reader reads a marker: the writer merges again
            merged.append(1)
            merge("r0-*.parquet")  # c2 <- c1 + flush 4; c1 deleted
        return out

    monkeypatch.setattr(Remote, "_read", read_then_merge)
    caplog.set_level(logging.WARNING, logger="collapsewatch.store")
    local = tmp_path / "mirror"
    mirror.sync(remote, local)
    assert merged == [1]
    assert mirror.broken_flushes(local) == []
    assert not [r for r in caplog.records if "missing" in r.getMessage()]
    assert _counts(local) == (8, 0)  # 8 steps (4 flushes x 2), each with its 4 sequence rows


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


def test_an_endpoint_outage_mid_run_loses_no_row(tmp_path, monkeypatch):
    """The issue's trial in seconds: a writer flushing every 2 steps and compacting every 3 segments, a reader
    syncing its mirror in a loop, and the endpoint down mid-run (stopped, then served again on the same port: moto
    keeps the bucket). In the outage uploads fail and flushes wait in the writer's spool; once it is back they are
    published and compacted in a burst — the burst that lost the trial's rows, merging flushes between a reader's
    listing and its downloads. Every read that succeeds: each step with its step row has its 4 sequence rows (never
    half a flush) and never fewer steps than the read before; at the end every step is there."""
    from moto.server import ThreadedMotoServer

    server = s3server.start()  # its own server: this test stops it
    server.create_bucket("outage")
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    n_steps = 60
    w = StoreWriter("s3://outage/run", "o", compact_every=3, heartbeat_s=3600, upload_retry_s=0.2)
    down, stopped, back = threading.Event(), threading.Event(), threading.Event()

    def write() -> None:
        for s in range(0, n_steps, 2):
            if s == 10:
                down.set()  # the main thread stops the endpoint now; steps 10-29 meet the outage
                stopped.wait(60)
            if s == 30:
                back.wait(60)  # steps 30-59 after it is back: the first flush publishes the backlog in a burst
            _flush(w, [s, s + 1])
            time.sleep(0.02)
        w.flush("finished")

    writer = threading.Thread(target=write)
    reads: list[tuple[int, int]] = []
    failed: list[str] = []
    remote, local = parse_url("s3://outage/run"), tmp_path / "mirror"

    def read() -> None:
        while writer.is_alive() or len(reads) < 2:
            try:
                mirror.sync(remote, local)
            except OSError as e:  # the endpoint is down: this sync fails, the mirror keeps its last state
                failed.append(str(e).splitlines()[0])
            reads.append(_counts(local))

    reader = threading.Thread(target=read)
    writer.start()
    reader.start()
    again = None
    try:
        down.wait(60)
        server.stop()
        stopped.set()
        for _ in range(600):  # until an upload has failed (seconds of SDK retries)
            if w.write_errors:
                break
            time.sleep(0.05)
        time.sleep(0.5)  # more flushes go to the spool only
        again = ThreadedMotoServer(ip_address="127.0.0.1", port=int(server.endpoint.rsplit(":", 1)[1]),
                                   verbose=False)
        again.start()
        back.set()
        writer.join(120)
        reader.join(120)
        assert w.write_errors > 0 and w.unpublished() == 0  # uploads failed in the outage; all published after
        assert all(half == 0 for _, half in reads), reads  # never a step without its sequences
        seen = [n for n, _ in reads]
        assert seen == sorted(seen), seen  # never fewer steps than a read before (the last may precede the end)
        mirror.sync(remote, local)
        assert _counts(local) == (n_steps, 0)
        print(f"{len(reads)} reads ({len(failed)} failed in the outage), {sum(h > 0 for _, h in reads)} with half a "
              f"flush, {sum(b < a for a, b in zip(seen, seen[1:], strict=False))} with fewer steps than before")
    finally:
        stopped.set()
        back.set()
        if again is not None:
            again.stop()
