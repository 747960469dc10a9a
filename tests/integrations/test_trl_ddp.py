"""Two accelerate ranks on CPU (gloo): each rank is stored under its own rank, and TRL's cross-rank clip fractions
are reproduced from both ranks' token rows.

TRL (``global_masked_mean``) sums flags and mask over the ranks' k-th micro-batches before dividing, then ``log``
averages over the step's micro-batches: logged(s) = mean_k [Σ_ranks Σ_tokens flag·mask / max(Σ_ranks Σ mask, 1)].
Every rank logs that same value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("trl")

from collapsewatch import connect  # noqa: E402

WORKER = Path(__file__).with_name("trl_ddp_worker.py")


@pytest.mark.slow
def test_two_ranks_are_recorded_and_match_trl_cross_rank_clip_fractions(tmp_path):
    root = str(Path(__file__).resolve().parents[2])  # the worker imports tests.integrations.trl_tiny
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",  # a free port
           str(WORKER), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]

    con = connect(tmp_path / "store")
    assert con.execute("SELECT world_size, ranks_seen, status FROM runs").fetchone() == (2, 2, "finished")
    seqs = con.execute("SELECT DISTINCT rank, seq_id FROM sequences").df()
    assert set(seqs["rank"]) == {0, 1}
    assert seqs["seq_id"].is_unique  # global rows: no id is shared between ranks

    rows = []
    for rank in (0, 1):
        log = json.loads((tmp_path / f"micro-{rank}.json").read_text())
        assert log["tap_errors"] == 0
        per_step: dict[int, int] = {}
        for m in log["micro"]:
            k = per_step.get(m["step"], 0)  # the rank's k-th micro-batch of the step (ranks step in lockstep)
            per_step[m["step"]] = k + 1
            rows += [(rank, m["step"], s, k) for s in m["seq_ids"]]
    micro = pd.DataFrame(rows, columns=["rank", "step", "seq_id", "k"])
    tok = con.execute("SELECT rank, step, seq_id, clip_low, clip_high FROM tokens WHERE mask").df()
    tok = tok.merge(micro, on=["rank", "step", "seq_id"], validate="m:1")
    tok["region"] = (tok["clip_low"] | tok["clip_high"]).astype(float)
    per_k = tok.groupby(["step", "k"])["region"].agg(["sum", "count"])
    expected = (per_k["sum"] / per_k["count"].clip(lower=1)).groupby(level="step").mean()
    for rank in (0, 1):
        logged = con.execute("SELECT step, value FROM scalars WHERE key = 'clip_ratio/region_mean' AND rank = ? "
                             "ORDER BY step", [rank]).df().set_index("step")["value"]
        pd.testing.assert_series_equal(logged, expected, check_names=False, check_index_type=False, atol=1e-6)
    assert expected.max() > 0
