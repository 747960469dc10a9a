"""A read racing compaction is run again for as long as the store keeps changing, not a fixed number of times:
under load, a merge between every listing and its read used up the query layer's 3 tries ("No such file")."""

from __future__ import annotations

from datetime import datetime, timezone

from collapsewatch.store import Store, StoreWriter
from collapsewatch.store.compact import compact_run

MERGES = 6  # more merges in a row than any fixed retry count before (views 3, CLI sql 20 with backoff)


def test_a_query_outlasts_a_merge_after_every_listing(tmp_path, monkeypatch):
    w = StoreWriter(tmp_path, "r", compact_every=0, heartbeat_s=3600)
    step = 0

    def flush() -> None:
        nonlocal step
        w.append("step_metrics", {"run": ["r"], "rank": [0], "step": [step], "n_seqs": [1],
                                  "ts": [datetime.now(timezone.utc)]})
        w.flush()
        step += 1

    flush()
    flush()
    (tmp_path / "r" / "step_metrics" / "junk.parquet").write_text("not parquet")  # views list files: a snapshot
    s = Store(tmp_path)
    views = Store._views
    merges = []

    def views_then_merge(self, names=None):  # each time the views list the files, a writer flushes and merges them
        listed = views(self, names)
        if len(merges) < MERGES:
            flush()
            merges.append(compact_run(tmp_path, "r", rank=0, export=False))
        return listed

    monkeypatch.setattr(Store, "_views", views_then_merge)
    s._dirty = True
    n = s.query("SELECT count(*) AS n FROM step_metrics")["n"].tolist()
    # the query ran after the 6th merge, over every step flushed: 2 at first + 1 per merge
    assert len(merges) == MERGES and n == [2 + MERGES]
