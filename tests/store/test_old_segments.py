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
    assert st.con.execute("SELECT dropped_rows, dropped_batches FROM runs").fetchall() == [(None, 0)]
    assert st.con.execute("SELECT dropped_rows, dropped_batches FROM run_ranks").fetchall() == [(None, 0)]
