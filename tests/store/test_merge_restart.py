"""A merge killed between writing the merged segment and deleting its inputs leaves no duplicate: the merged
segment names its inputs (Parquet metadata), readers skip them, the next compaction deletes them."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from collapsewatch.store import Store, StoreWriter, queries
from collapsewatch.store.compact import compact_run
from collapsewatch.store.writer import REPLACES_KEY, write_merged


def _flush_step(w: StoreWriter, step: int) -> None:
    w.append("step_metrics", {"run": ["m"], "rank": [0], "step": [step], "n_seqs": [2],
                              "ts": [datetime.now(timezone.utc)]})
    w.append("sequences", {"run": ["m"] * 2, "rank": [0] * 2, "step": [step] * 2, "seq_id": [0, 1],
                           "reward": [1.0, 0.0]})
    w.flush()


def test_killed_merge_leaves_no_duplicates(tmp_path):
    w = StoreWriter(tmp_path, "m", heartbeat_s=3600, compact_every=0)
    for step in range(4):
        _flush_step(w, step)
    w.flush(status="finished")
    folder = tmp_path / "m" / "sequences"
    inputs = sorted(folder.glob("*.parquet"))
    assert len(inputs) == 4
    merged = write_merged("sequences", inputs, 0)  # the merge's write and rename; the kill comes before deletes
    names = json.loads(pq.read_schema(merged).metadata[REPLACES_KEY])
    assert names == [p.name for p in inputs]
    # 4 steps × 2 sequences = 8 rows, on disk twice (inputs + merged): every reader counts 8
    s = Store(tmp_path)
    assert s.query("SELECT count(*) AS n, sum(reward) AS r FROM sequences")[["n", "r"]].values.tolist() == [[8, 4.0]]
    assert s.sql("SELECT count(*) AS n FROM sequences")[0]["n"].tolist() == [8]
    assert [Path(p).name for p, _ in queries.segment_files(s, "m", "sequences")] == [merged.name]
    assert queries.token_sequences(s, "m", 0).empty  # no token rows; the per-run path reads the same list
    assert s.query(f"SELECT count(*) AS n FROM ({s.run_view('sequences', 'm')})")["n"].tolist() == [8]
    # the restart's compaction finishes the merge: inputs deleted, rows once, in the export too
    compact_run(tmp_path, "m")
    assert sorted(p.name for p in folder.glob("*.parquet")) == [merged.name]
    assert Store(tmp_path).query("SELECT count(*) AS n FROM sequences")["n"].tolist() == [8]
    exported = duckdb.connect(str(tmp_path / "m" / "m.duckdb"), read_only=True)
    assert exported.execute("SELECT count(*) FROM sequences").fetchone() == (8,)
