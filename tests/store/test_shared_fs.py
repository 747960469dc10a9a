"""A folder store on a shared filesystem (NFS-like): rename is atomic, but a directory listing may lag the files —
naming one this client cannot open (yet, or any more), or not yet naming one that is there. Readers must take both
in their stride: the first is skipped, the second shows at the next listing."""

from __future__ import annotations

import os

from collapsewatch import Monitor
from collapsewatch.store import Store, segments
from collapsewatch.store.queries import segment_files, step_rows
from tests.conftest import random_batch


def _run(store, steps: int = 3) -> None:
    """One step per flush, no compaction: one step_metrics segment per step."""
    mon = Monitor(store, run="n", detectors=False, compact_every=0)
    for step in range(steps):
        mon.observe(random_batch(B=4, T=8, seed=step), step=step)
        mon.flush()
    mon.close(compact=False)
    assert len(os.listdir(store / "n" / "step_metrics")) == steps


def test_a_listed_file_that_cannot_be_opened_is_skipped(store, monkeypatch):
    _run(store)
    folder = store / "n" / "step_metrics"
    ghost = folder / "r0-000099-deadbeef.parquet"
    ghost.write_bytes((folder / sorted(os.listdir(folder))[0]).read_bytes())
    stale = [e for e in os.scandir(folder) if e.name == ghost.name]  # the listing names it ...
    ghost.unlink()  # ... the file is not there for this client
    real = os.scandir

    def lagging(path):
        entries = list(real(path))
        return entries + stale if os.fspath(path) == os.fspath(folder) else entries

    monkeypatch.setattr(segments.os, "scandir", lagging)
    s = Store(store)
    names = [os.path.basename(p) for p, _ in segment_files(s, "n", "step_metrics")]
    assert ghost.name not in names and len(names) == 3  # the three flushes' segments, the ghost skipped
    assert step_rows(s, "n", ["n_seqs"])["step"].tolist() == [0, 1, 2]
    assert segments.bad_files(store) == []  # a file gone is not a bad file


def test_a_file_not_yet_listed_shows_at_the_next_listing(store, monkeypatch):
    _run(store)
    folder = store / "n" / "step_metrics"
    newest = sorted(os.listdir(folder))[-1]  # step 2's segment (flush numbers sort by name)
    real = os.scandir
    monkeypatch.setattr(segments.os, "scandir",
                        lambda path: [e for e in real(path) if e.name != newest])  # the listing lags behind it
    s = Store(store)
    listed = [os.path.basename(p) for p, _ in segment_files(s, "n", "step_metrics")]
    assert len(listed) == 2 and newest not in listed
    monkeypatch.undo()  # the listing catches up
    assert [os.path.basename(p) for p, _ in segment_files(s, "n", "step_metrics")] == sorted(os.listdir(folder))
    assert step_rows(s, "n", ["n_seqs"])["step"].tolist() == [0, 1, 2]
