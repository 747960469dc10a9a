"""Recorder: the step state machine survives a failure, the queue depth is bounded by flushes, every drop is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.probe import ClipSpec
from collapsewatch.recorder import Close, Observe, Recorder, Sampling
from collapsewatch.store import StoreWriter
from tests.conftest import random_batch

ROOT = Path(__file__).resolve().parents[1]


class DetectorsFailingAtStep0:
    """Stands in for the detector suite the recorder calls while finishing a step: fails on step 0 only."""

    def update(self, row: dict) -> list:
        if row["step"] == 0:
            raise RuntimeError("detector failure while finishing step 0")
        return []


def test_a_failure_finishing_a_step_costs_that_step_only(store):
    writer = StoreWriter(store, "sm", heartbeat_s=3600)
    rec = Recorder(writer, Sampling(), queue_size=64, on_full="block", flush_steps=10, flush_seconds=60,
                   detectors=DetectorsFailingAtStep0())
    rec.start()
    for step in range(2):
        for micro in range(2):  # two micro-batches of 4 sequences per step
            rec.put(Observe(step, random_batch(B=4, seed=10 * step + micro), ClipSpec()))
    rec.call(Close, "finished")
    con = connect(store)
    # step 0 is finished when step 1's first micro-batch arrives; its failure must not cost that micro-batch:
    # step 1 keeps 2 × 4 = 8 sequences (it had 4 before the fix)
    assert con.execute("SELECT step, count(*) FROM sequences GROUP BY step ORDER BY step").fetchall() == [(0, 8), (1, 8)]
    assert con.execute("SELECT step, n_seqs FROM steps ORDER BY step").fetchall() == [(0, 8), (1, 8)]
    assert writer.probe_errors == 1


@pytest.mark.parametrize("flush_steps", [1, 4])
def test_sigkill_loses_at_most_flush_steps_plus_one(store, flush_steps):
    steps = 60
    p = subprocess.run([sys.executable, "-m", "tests.monitor_kill_proc", str(store), str(flush_steps), str(steps)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, p.stderr[-2000:]
    stored = connect(store).execute("SELECT count(*), min(step), max(step) FROM steps").fetchone()
    # back-pressure: the first message of step s waits until steps < s − flush_steps are flushed, so when the last
    # observe returned, at most flush_steps + 1 steps were unwritten (queued, open, or finished and not flushed);
    # before the bound, up to a full queue (64 messages = 32 steps) was lost
    lost = steps - stored[0]
    assert 0 < lost <= flush_steps + 1  # the open step is never written before the kill
    assert stored[1:] == (0, steps - 1 - lost)  # the lost steps are the last ones, none in between


def test_rows_dropped_while_writes_fail_are_written_in_the_run_row(store, monkeypatch):
    import collapsewatch.store.writer as writer_mod
    from collapsewatch import Monitor

    real = writer_mod.pq.write_table
    failing = {"on": True}

    def disk_full(*a, **k):
        if failing["on"]:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    mon = Monitor(store, "full", detectors=False, flush_steps=1)
    monkeypatch.setattr(writer_mod, "MAX_PENDING_ROWS", 25)
    monkeypatch.setattr(writer_mod.pq, "write_table", disk_full)
    for step in range(5):
        mon.log(step, {f"k{i}": float(i) for i in range(10)})  # 10 scalar rows a step, no other table
    mon.flush()
    failing["on"] = False
    mon.close()
    # pending scalars: 10, 20, 30 → the oldest 10 dropped (20 ≤ 25 kept), again after steps 3 and 4: 3 × 10 = 30
    con = connect(store)
    assert con.execute("SELECT dropped_rows FROM run_ranks").fetchone() == (30,)
    assert con.execute("SELECT dropped_rows FROM runs").fetchone() == (30,)  # the run's sum over its ranks
    assert con.execute("SELECT count(*), min(step) FROM scalars").fetchone() == (20, 3)


def test_token_rows_are_capped_per_step_over_ranks(store):
    """A cluster-scale batch must not multiply the token rows (docs/store.md, Volume); sequence rows stay whole.

    token_seqs_per_step=5 over world_size 2 → ⌈5/2⌉ = 3 sequences per rank and step; token_every=1 makes every
    sequence a candidate. Two micro-batches of 8 per step: seq_ids 0..7, then 8..15. Hash h(i) = (i·2654435761 +
    40503·step + 1) mod 2³², at step 0: h(0)=1, h(5)=387276918, h(2)=1013904227, h(7)=1401181144, h(4)=2027808453,
    h(1)=2654435762, h(6)=3041712679, h(3)=3668339988 — the three lowest are 0, 5, 2; the second micro-batch finds
    no room. Step 1 adds 40503 to every h (no wrap-around), same order, and the count starts again."""
    from collapsewatch import Monitor

    sampling = Sampling(token_every=1, token_seqs_per_step=5)
    with Monitor(store, run="cap", rank=0, world_size=2, sampling=sampling, detectors=False) as mon:
        for step in range(2):
            for half in range(2):
                mon.observe(random_batch(B=8, T=4, seed=2 * step + half), step=step)
    con = connect(store)
    assert con.execute("SELECT step, list(DISTINCT seq_id ORDER BY seq_id) FROM tokens GROUP BY step ORDER BY step"
                       ).fetchall() == [(0, [0, 2, 5]), (1, [0, 2, 5])]
    assert con.execute("SELECT count(*) FROM sequences").fetchone() == (32,)  # 2 steps × 16: all kept
    with pytest.raises(ValueError, match="token_seqs_per_step"):
        Sampling(token_seqs_per_step=-1)


def test_the_default_cap_keeps_every_sequence_of_a_small_step(store):
    """Default: a step that keeps all (step % 10 == 0) of 16 sequences keeps all 16 (16 ≤ 64)."""
    from collapsewatch import Monitor

    with Monitor(store, run="small", detectors=False) as mon:
        mon.observe(random_batch(B=16, T=4), step=0)
    assert connect(store).execute("SELECT count(DISTINCT seq_id) FROM tokens").fetchone() == (16,)


def test_expected_token_sequences_per_step():
    # LLDS settings, 2,560 sequences per step: 0.1 · min(2560, 64) + 0.9 · min(0.05 · 2560 = 128, 64) = 6.4 + 57.6
    assert Sampling().expected_seqs(2560) == pytest.approx(64.0)
    # a built-in run of 32 per step is under the cap: 0.1 · 32 + 0.9 · 1.6 = 3.2 + 1.44
    assert Sampling().expected_seqs(32) == pytest.approx(4.64)
    assert Sampling(token_seqs_per_step=0).expected_seqs(2560) == pytest.approx(256 + 0.9 * 128)  # 371.2
