"""`collapsewatch compact`: temporary files of killed writers and exports are removed once stale; a read-only
store gives one line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app as cli_app
from collapsewatch.store import StoreWriter
from collapsewatch.store.compact import STALE_TMP_S


def _finished_run(root, run="f"):
    w = StoreWriter(root, run, heartbeat_s=3600)
    for step in range(2):
        w.append("step_metrics", {"run": [run], "rank": [0], "step": [step], "n_seqs": [4],
                                  "ts": [datetime.now(timezone.utc)]})
        w.flush()
    w.flush(status="finished")


def test_stale_tmp_files_are_removed(tmp_path):
    _finished_run(tmp_path)
    run_dir = tmp_path / "f"
    stale_export = run_dir / ".f.1a2b3c4d.duckdb.tmp"  # a compaction killed while exporting
    stale_wal = run_dir / ".f.1a2b3c4d.duckdb.tmp.wal"
    stale_segment = run_dir / "step_metrics" / ".r0-000009-x.parquet.5e6f.tmp"  # a writer killed mid-flush
    fresh_export = run_dir / ".f.9e9e9e9e.duckdb.tmp"  # another compaction exporting right now
    old = time.time() - STALE_TMP_S - 60
    for f in (stale_export, stale_wal, stale_segment, fresh_export):
        f.write_bytes(b"partial")
    for f in (stale_export, stale_wal, stale_segment):
        os.utime(f, (old, old))
    out = CliRunner().invoke(cli_app, ["compact", str(tmp_path)])
    assert out.exit_code == 0 and "compacted 1 run(s): f" in out.stdout, out.output
    assert not stale_export.exists() and not stale_wal.exists() and not stale_segment.exists()
    assert fresh_export.exists() and (run_dir / "f.duckdb").exists()


def test_read_only_store_is_one_line(tmp_path):
    src, ro = tmp_path / "src", tmp_path / "ro"
    _finished_run(src)
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(src), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("a read-only bind mount needs root in a namespace that allows mount")
    try:
        before = sorted(p.name for p in ro.rglob("*"))
        out = CliRunner().invoke(cli_app, ["compact", str(ro)])
        assert out.exit_code == 1
        assert out.output.startswith("error: cannot compact run 'f'") and "not writable" in out.output
        assert len(out.output.strip().splitlines()) == 1 and "Traceback" not in out.output
        assert sorted(p.name for p in ro.rglob("*")) == before
        runs = CliRunner().invoke(cli_app, ["runs", str(ro), "--json"])  # reading still works
        assert runs.exit_code == 0 and '"run":"f"' in runs.stdout
    finally:
        subprocess.run(["umount", str(ro)], check=True)
