"""The shipped sample runs (real trainer runs, written before later schema migrations) open on the dashboard."""

from __future__ import annotations

import shutil
from pathlib import Path

from collapsewatch.dashboard import create_app, history, live
from collapsewatch.store import Store
from collapsewatch.store.queries import run_info

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs" / "store"


def test_runs_written_before_a_migration_still_open(tmp_path):
    # the sample runs' `runs` segments predate migration 0002 (runs.dropped_rows): a scan of one run's folder
    # must still know the column (from the store's typed empty tables), or run_info fails to bind
    root = tmp_path / "store"
    shutil.copytree(SAMPLES, root)
    info = run_info(Store(root), "grpo-collapse")
    assert info is not None and info["status"] == "finished" and info["config"]["lr"] == 0.001
    create_app(root)
    history.clear()
    got = live.load("grpo-collapse")
    assert got is not None and got["state"]["last"] == 199 and len(got["events"]) > 0
    history.clear()


def test_listed_segments_read_metrics_added_after_them(tmp_path):
    # the live overview reads only the segments it has not drawn yet (step_rows(files=...)); the sample runs'
    # segments predate the per-turn ratio metrics, which must read as NULL there, not fail to bind
    from collapsewatch.store.queries import step_rows

    root = tmp_path / "store"
    shutil.copytree(SAMPLES, root)
    files = {t: sorted(str(p) for p in (root / "grpo-collapse" / t).glob("*.parquet"))
             for t in ("step_metrics", "scalars")}
    rows = step_rows(Store(root), "grpo-collapse", ["ratio_p05_pos", "turn_ratio_p05_pos"], after=-1, files=files)
    assert len(rows) == 200 and rows["turn_ratio_p05_pos"].isna().all() and rows["ratio_p05_pos"].notna().any()
