"""Monitor: no silent loss of what a trainer hands it (16-bit, numpy, empty batches), and who may write a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from collapsewatch import Monitor, TokenBatch, connect
from collapsewatch.recorder import Sampling
from collapsewatch.runlock import RunExistsError, RunInUseError, lock_path

ROOT = Path(__file__).resolve().parents[1]
ALL_TOKENS = Sampling(token_every=1)


def _two_seqs(**kw) -> TokenBatch:
    """B = 2, T = 2, every token a model token; values exact in bfloat16 (k/2 with small k)."""
    logp_old = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]])
    return TokenBatch(logp=logp_old.clone(), mask=torch.ones(2, 2), logp_old=logp_old,
                      advantages=torch.tensor([1.0, -1.0]), **kw)


def test_16bit_tensors_keep_every_row(store):
    b = _two_seqs(logp_rollout=torch.tensor([[-1.5, -2.0], [-0.5, -1.0]], dtype=torch.bfloat16),
                  rewards=torch.tensor([1.0, 0.0], dtype=torch.float16))
    with Monitor(store, "bf16", detectors=False, sampling=ALL_TOKENS) as mon:
        mon.observe(b, step=0)
    con = connect(store)
    # is_log_ratio = logp_old − logp_rollout = [[0.5, 0], [0, −0.5]]
    assert con.execute("SELECT seq_id, pos, logp_rollout, is_log_ratio FROM tokens ORDER BY seq_id, pos"
                       ).fetchall() == [(0, 0, -1.5, 0.5), (0, 1, -2.0, 0.0), (1, 0, -0.5, 0.0), (1, 1, -1.0, -0.5)]
    # |is_log_ratio| mean = (0.5 + 0 + 0 + 0.5) / 4 = 0.25; rewards [1, 0] → mean 0.5
    assert con.execute("SELECT is_log_ratio_abs_mean, reward_mean FROM steps").fetchone() == (0.25, 0.5)
    assert con.execute("SELECT probe_errors FROM runs").fetchone() == (0,)


def test_numpy_fields_are_converted(store):
    b = _two_seqs()
    b.rewards = np.array([1.0, 0.0])  # numpy, as a reward function returns it
    b.group_ids = np.array([7, 7])
    with Monitor(store, "np", detectors=False) as mon:
        mon.observe(b, step=0)
    con = connect(store)
    assert con.execute("SELECT seq_id, group_id, reward FROM sequences ORDER BY seq_id").fetchall() == [
        (0, 7, 1.0), (1, 7, 0.0)]
    # one group with rewards {1, 0}: not zero-std → 0.0; reward mean 0.5
    assert con.execute("SELECT reward_mean, zero_std_group_frac FROM steps").fetchone() == (0.5, 0.0)


def test_a_batch_built_from_numpy_arrays_is_observed(store):
    # the README's loop with numpy everywhere: TokenBatch takes numpy logp / mask at construction (they were refused
    # as "must be a torch.Tensor"), and group_zero_std takes numpy group ids and rewards (a bare AttributeError before)
    from collapsewatch.batch import group_zero_std

    groups, rewards = np.array([7, 7, 8, 8]), np.array([1.0, 0.0, 1.0, 1.0])
    zero = group_zero_std(groups, rewards)
    assert zero.tolist() == [False, False, True, True]  # group 7 {1, 0}: signal; group 8 {1, 1}: none
    b = TokenBatch(logp=np.full((4, 3), -0.5, dtype=np.float32), mask=np.ones((4, 3), dtype=np.float32),
                   group_ids=groups, rewards=rewards, group_zero_std=zero)
    assert isinstance(b.logp, torch.Tensor) and b.logp.shape == (4, 3)
    with Monitor(store, "np-built", detectors=False) as mon:
        mon.observe(b, step=0)
    # reward mean (1 + 0 + 1 + 1) / 4 = 0.75; zero-std share 2 of 4 sequences' groups → 0.5
    assert connect(store).execute("SELECT reward_mean, zero_std_group_frac FROM steps").fetchone() == (0.75, 0.5)
    with pytest.raises(TypeError, match=r"group_zero_std: rewards must be a torch\.Tensor or a numpy array, got list"):
        group_zero_std(groups, [1.0, 0.0, 1.0, 1.0])


@pytest.mark.parametrize(("value", "message"), [
    ([1.0, 0.0], r"TokenBatch\.rewards must be a torch\.Tensor \(or numpy array\), got list"),
    (np.array(["a", "b"]), r"TokenBatch\.rewards is a numpy array of dtype <U1"),
    (np.ones(3), r"rewards \(3,\) \(expected \(2,\)\)"),
])
def test_unusable_fields_are_refused_at_observe(store, value, message):
    b = _two_seqs()
    b.rewards = value  # replaced after construction, so only observe can catch it
    with Monitor(store, "bad", detectors=False) as mon:
        with pytest.raises((TypeError, ValueError), match=message):
            mon.observe(b, step=0)


def test_empty_batches_keep_the_step_row(store):
    with Monitor(store, "empty", detectors=False) as mon:
        mon.observe(TokenBatch(logp=torch.zeros(0, 5), mask=torch.zeros(0, 5)), step=0)  # B = 0
        mon.observe(TokenBatch(logp=torch.zeros(2, 0), mask=torch.zeros(2, 0), rewards=torch.ones(2)), step=1)  # T = 0
        mon.observe(TokenBatch(logp=torch.zeros(0, 5), mask=torch.zeros(0, 5)), step=2)  # an empty micro-batch ...
        mon.observe(_two_seqs(rewards=torch.tensor([1.0, 0.0])), step=2)  # ... beside a real one
    con = connect(store)
    # steps 0 and 1 measured nothing: counts, NULL metrics; step 2 is the real micro-batch alone (4 model tokens)
    assert con.execute("SELECT step, n_seqs, n_model_tokens, reward_mean FROM steps ORDER BY step").fetchall() == [
        (0, 0, 0, None), (1, 2, 0, None), (2, 2, 4, 0.5)]
    assert con.execute("SELECT probe_errors FROM runs").fetchone() == (0,)


def test_a_second_monitor_on_a_live_rank_is_refused(store):
    first = Monitor(store, "dup", detectors=False)
    with pytest.raises(RunInUseError, match="another Monitor"):
        Monitor(store, "dup", detectors=False, resume=True)
    Monitor(store, "dup", rank=1, world_size=2, detectors=False).close()  # another rank of the same run is fine
    first.close()
    assert not lock_path(store, "dup", 0).exists()
    Monitor(store, "dup", detectors=False, resume=True).close()  # once closed, the rank can be resumed


def test_a_live_writer_in_another_process_is_refused_and_its_stale_lock_taken_over(store):
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, sys; from collapsewatch import Monitor; "
         f"m = Monitor({str(store)!r}, 'other', detectors=False); print('ready', flush=True); sys.stdin.readline(); "
         "os.kill(os.getpid(), signal.SIGKILL)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(RunInUseError, match=f"process {child.pid}"):
            Monitor(store, "other", detectors=False, resume=True)
    finally:
        child.stdin.write("go\n")
        child.stdin.flush()
        child.wait(timeout=60)
    assert child.returncode == -9 and lock_path(store, "other", 0).exists()  # SIGKILL left its lock behind
    with pytest.raises(RunExistsError):  # the dead run's name is still not free for a new run ...
        Monitor(store, "other", detectors=False)
    Monitor(store, "other", detectors=False, resume=True).close()  # ... but the stale lock does not block a resume


def test_reusing_a_run_name_needs_resume(store):
    with Monitor(store, "exp", detectors=False) as mon:
        mon.observe(_two_seqs(), step=0)
    (store / "exp-2").mkdir()  # the suggestion skips names in use
    with pytest.raises(RunExistsError, match=r"--resume .*resume=True.*fresh name, e\.g\. exp-3"):
        Monitor(store, "exp", detectors=False)
    with Monitor(store, "exp", detectors=False, resume=True) as mon:
        mon.observe(_two_seqs(), step=1)
    con = connect(store)
    assert con.execute("SELECT count(*), count(DISTINCT step) FROM steps WHERE run = 'exp'").fetchone() == (2, 2)
    assert con.execute("SELECT count(*) FROM sequences WHERE run = 'exp'").fetchone() == (4,)



def test_log_keeps_one_element_values_and_refuses_others_naming_the_key(store):
    with Monitor(store, "lg", detectors=False) as mon:
        mon.log(0, {"grad_norm": torch.tensor([2.5]), "lr": np.float32(0.5), "loss": np.array([0.25]), "x": None})
        with pytest.raises(TypeError, match=r"log: scalar 'entropy_coef' .* got Tensor\(3,\)"):
            mon.log(1, {"entropy_coef": torch.ones(3)})  # was stored as NULL without a word
    assert connect(store).execute("SELECT key, value FROM scalars ORDER BY key").fetchall() == [
        ("grad_norm", 2.5), ("loss", 0.25), ("lr", 0.5), ("x", None)]


def test_the_on_policy_flag_survives_the_copy(store):
    with Monitor(store, "flag", detectors=False) as mon:
        mon.observe(_two_seqs(on_policy=True), step=0)
        mon.observe(_two_seqs(on_policy=False), step=1)
    # told on-policy: ratio metrics NULL; told off-policy with logp = logp_old: every A>0 ratio is exactly 1
    assert connect(store).execute("SELECT step, on_policy, ratio_p50_pos FROM steps ORDER BY step").fetchall() == [
        (0, True, None), (1, False, 1.0)]
