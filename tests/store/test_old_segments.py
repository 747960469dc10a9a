"""A run written before a migration reads with NULL in the new columns, through the all-runs views and the per-run
scans alike (migration 0002 added runs.dropped_rows; a per-run scan used to fail on runs without it)."""

from __future__ import annotations

import pyarrow.parquet as pq

from collapsewatch import Monitor, Store
from collapsewatch.store.queries import run_info
from tests.conftest import random_batch


def test_a_run_row_without_dropped_rows_reads_as_null(store):
    with Monitor(store, "old", detectors=False) as mon:
        mon.observe(random_batch(), step=0)
    path = store / "old" / "runs" / "r0.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["dropped_rows"]), path)  # as a writer before 0002 wrote it
    st = Store(store)
    assert run_info(st, "old")["status"] == "finished"  # the per-run slice of run_ranks
    for view in ("runs", "run_ranks"):  # through the store's query path (it binds the all-runs views on first use)
        got = st.query(f"SELECT dropped_rows IS NULL AS missing, dropped_batches FROM {view}")
        assert got.to_dict("records") == [{"missing": True, "dropped_batches": 0}]


def test_a_schema_stamped_before_a_new_catalogue_metric_does_not_hide_it(store):
    """Catalogue metrics are spliced into migration 0001, so a new metric (e.g. turn_ratio_mean_pos) changed the
    schema under the same version number: a store whose ``_schema`` predates it used to keep its old empty file,
    and user SQL (whose Arrow datasets take that file's schema) lost the new column of every newer segment."""
    from collapsewatch.store.migrations import LATEST_VERSION
    from collapsewatch.store.writer import StoreWriter

    w = StoreWriter(store, "new")
    w.append("step_metrics", {"run": ["new"], "rank": [0], "step": [0], "turn_ratio_mean_pos": [0.5]})
    w.flush("finished")
    empty = store / "_schema" / "step_metrics" / "empty.parquet"  # as an older version left it
    pq.write_table(pq.read_table(empty).drop_columns(["turn_ratio_mean_pos"]), empty)
    (store / "_schema" / "VERSION").write_text(str(LATEST_VERSION))
    before = {p: p.read_bytes() for p in (store / "_schema").rglob("*") if p.is_file()}
    df, _ = Store(store).sql("SELECT step, turn_ratio_mean_pos FROM step_metrics")
    assert df.values.tolist() == [[0, 0.5]]
    assert {p: p.read_bytes() for p in (store / "_schema").rglob("*") if p.is_file()} == before  # read, not fixed
