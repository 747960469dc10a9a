"""A restart replaces, in every table (``store/restart.py``): a run resumed from a checkpoint replays steps, and
each table and view then holds each (step, sequence / token / key) once — the new branch's rows — across compaction,
with another rank untouched, and on an object store.

The run: rank 0 writes steps 0–11 with ``random_batch`` (B = 8, T = 16; mask 0 on positions 0–1, turn ids 0),
``log`` grad_norm = step and lr; then ``Monitor(resume=True)`` replays steps 5–9 (a restart from the checkpoint at
step 5) with other batches and grad_norm = 100 + step. By hand, after the restart:

* steps 0–9, one row each: ``steps`` / ``step_metrics`` 10 rows (the old 10–11 belong to the abandoned branch);
* ``sequences``: 8 per step → 80 (the code before: 8 + 16 × 5 + 8 × 2 = 120 over 12 steps);
* ``scalars``: 2 keys per step → 20, grad_norm 0–4 then 105–109 (before: 2 × 12 + 2 × 5 = 34);
* ``tokens``: every 10th step keeps all 8 sequences, the others the sequences ``Sampling.keep`` picks by a hash of
  (step, seq_id) — the same in both branches; each kept sequence has 16 token rows (turn ids ≥ 0: the two
  masked positions are kept for display): 16 × (8 + Σ_{s=1..9} kept(s)).
"""

from __future__ import annotations

import numpy as np
import pytest

from collapsewatch import Monitor, Sampling, connect
from collapsewatch.store.compact import compact_run
from tests.conftest import random_batch


def _session(store, steps: range, base: float, seed: int, resume: bool, rank: int = 0, world: int = 1, **kw) -> None:
    mon = Monitor(store, run="r", rank=rank, world_size=world, resume=resume, flush_steps=2, **kw)
    for s in steps:
        mon.observe(random_batch(seed=seed + s), step=s)
        mon.log(s, {"grad_norm": base + s, "lr": 0.1})
    mon.close()


def _kept_tokens() -> int:
    sampling = Sampling()
    kept = [int(sampling.keep(s, np.arange(8)).sum()) for s in range(1, 10)]
    return 16 * (8 + sum(kept))


def _counts(con, rank: int = 0) -> dict[str, tuple[int, int]]:
    return {t: con.execute(f"SELECT count(*), count(DISTINCT step) FROM {t} WHERE rank = ?", [rank]).fetchone()
            for t in ("steps", "step_metrics", "sequences", "scalars", "tokens")}


def _check(con) -> None:
    counts = _counts(con)
    assert counts["steps"] == (10, 10) and counts["step_metrics"] == (10, 10)
    assert counts["sequences"] == (80, 10)
    assert counts["scalars"] == (20, 10)
    assert counts["tokens"] == (_kept_tokens(), 10)
    grad = con.execute("SELECT step, value FROM scalars WHERE key = 'grad_norm' AND rank = 0 ORDER BY step").fetchall()
    assert grad == [(s, float(s)) for s in range(5)] + [(s, 100.0 + s) for s in range(5, 10)]
    # the sequences of a replayed step are the new batch's: its rewards (seed 1000 + step)
    for s in (4, 7):
        want = float(random_batch(seed=(0 if s < 5 else 1000) + s).rewards.sum())
        got = con.execute("SELECT sum(reward) FROM sequences WHERE step = ? AND rank = 0", [s]).fetchone()[0]
        assert got == pytest.approx(want)
    assert con.execute("SELECT grad_norm FROM steps WHERE step = 9 AND rank = 0").fetchone()[0] == 109.0


@pytest.mark.parametrize("compact_every", [0, 2])  # 2: live compaction merged the old branch's segments
def test_a_restart_leaves_one_row_per_step_in_every_table(tmp_path, compact_every):
    store = tmp_path / "s"
    _session(store, range(12), 0.0, 0, False, compact_every=compact_every)
    _session(store, range(5, 10), 100.0, 1000, True, compact_every=compact_every)
    _check(connect(store))
    compact_run(store, "r")  # compaction afterwards changes nothing
    _check(connect(store))


def test_another_rank_is_untouched(tmp_path):
    store = tmp_path / "s"
    _session(store, range(12), 0.0, 0, False, rank=0, world=2)
    _session(store, range(12), 0.0, 0, False, rank=1, world=2)
    _session(store, range(5, 10), 100.0, 1000, True, rank=0, world=2)
    con = connect(store)
    _check(con)
    assert _counts(con, rank=1)["sequences"] == (96, 12) and _counts(con, rank=1)["scalars"] == (24, 12)


def test_a_restart_replaces_on_an_object_store(tmp_path, monkeypatch):
    import uuid

    from tests.store import s3server

    server = s3server.start()
    try:
        server.create_bucket("cw-restart")
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "machine-a"))
        url = f"s3://cw-restart/{uuid.uuid4().hex[:8]}"
        _session(url, range(12), 0.0, 0, False)
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "machine-b"))  # resumed elsewhere: an empty spool
        _session(url, range(5, 10), 100.0, 1000, True)
        monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "reader"))
        _check(connect(url))
    finally:
        server.stop()


def test_where_a_resumed_writer_starts(tmp_path):
    # what a resume reads before it writes (integrations.trl): the rank's last stored step, and the largest stored
    # sequence id modulo the stride an adapter adds to a sequence trained twice in one step (the TRL tap's 2**40)
    import dataclasses

    import torch

    from collapsewatch.store.restart import last_step, max_seq_id

    store = tmp_path / "s"
    ids = {0: torch.arange(8), 1: torch.arange(8) + 8, 2: torch.arange(8) + 16,
           3: torch.arange(8) + 8 + 2**40}  # step 3 trains step 1's sequences again: stored as id + 2**40
    mon = Monitor(store, run="r", rank=0, world_size=2)
    for s, seq in ids.items():
        mon.observe(dataclasses.replace(random_batch(seed=s), seq_ids=seq), step=s)
    mon.close()
    mon = Monitor(store, run="r", rank=1, world_size=2)
    mon.observe(dataclasses.replace(random_batch(seed=9), seq_ids=torch.arange(8) + 24), step=0)
    mon.close()
    # rank 0 stored steps 0-3, rank 1 step 0, rank 2 nothing
    assert (last_step(store, "r", 0), last_step(store, "r", 1), last_step(store, "r", 2)) == (3, 0, None)
    # ids mod 2**40: rank 0 holds 0-23 (step 3's 8+2**40 … 15+2**40 are 8-15), rank 1 24-31: the largest is 31
    assert max_seq_id(store, "r", 2**40) == 31
    assert max_seq_id(store, "other", 2**40) is None
