"""Drills switch on at exactly the named step, and only then: the hooks by hand, then the real trainer."""

from __future__ import annotations

import json
import math

import pytest
import torch

from collapsewatch import connect
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.drills import Drill
from collapsewatch.trainer.loop import train

SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120"]


def test_lld_scales_negative_advantages_from_at_step_only():
    d = Drill.from_dict({"kind": "lld", "at_step": 5, "strength": 3.0})
    adv = torch.tensor([1.0, -0.5, 0.0, -2.0])
    rows = torch.arange(4)
    assert torch.equal(d.advantages(adv, 4, rows), adv)  # step 4 < 5: untouched
    # step 5: A<0 × 3 → [1, -1.5, 0, -6]; A ≥ 0 unchanged
    assert torch.equal(d.advantages(adv, 5, rows), torch.tensor([1.0, -1.5, 0.0, -6.0]))
    assert torch.equal(d.advantages(adv, 50, rows), torch.tensor([1.0, -1.5, 0.0, -6.0]))


def test_blowup_lr_and_isdd_epochs_and_mismatch_temperature_switch_at_n():
    blow = Drill.from_dict({"kind": "blowup", "at_step": 3, "strength": 10})
    assert [blow.lr(1e-4, s) for s in (2, 3, 4)] == [1e-4, 1e-3, 1e-3]  # 1e-4 × 10 from step 3
    isdd = Drill.from_dict({"kind": "isdd", "at_step": 4, "strength": 3})
    assert [isdd.epochs(1, s) for s in (2, 4, 6)] == [1, 3, 3]
    mis = Drill.from_dict({"kind": "mismatch", "at_step": 2, "strength": 1.5})
    assert [mis.sampling_temperature(0.8, s) for s in (0, 2)] == [0.8, pytest.approx(1.2)]  # 0.8 × 1.5
    assert blow.epochs(1, 10) == 1 and blow.sampling_temperature(0.8, 10) == 0.8  # other kinds: no effect


def test_starvation_zeroes_ceil_share_of_groups():
    d = Drill.from_dict({"kind": "starvation", "at_step": 2, "strength": 0.5})
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    assert torch.equal(d.rewards(rewards, groups, 0, seed=0), rewards)
    out = d.rewards(rewards, groups, 2, seed=0)
    # ceil(0.5 × 3 groups) = 2 groups all-zero (none is all-zero before), the third unchanged
    zeroed = {g for g in range(3) if bool((out[groups == g] == 0).all())}
    kept = {g for g in range(3) if torch.equal(out[groups == g], rewards[groups == g])}
    assert len(zeroed) == 2 and len(kept) == 1 and zeroed | kept == {0, 1, 2}


def test_nonfinite_hits_one_value_at_n_only():
    d = Drill.from_dict({"kind": "nonfinite", "at_step": 7, "tensor": "logp"})
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]])
    out = d.logp(logp, mask, 7)
    assert torch.isnan(out).sum() == 1 and torch.isnan(out[0, 1])  # the first model token of row 0
    out.exp().sum().backward()  # like the ratio exp(logp − logp_old): d/dlogp = exp(NaN) = NaN
    assert torch.isnan(logp.grad).sum() == 1  # the NaN reaches the gradient at that token
    assert torch.equal(d.logp(logp, mask, 6), logp) and torch.equal(d.logp(logp, mask, 8), logp)
    adv = Drill.from_dict({"kind": "nonfinite", "at_step": 7, "tensor": "advantages"})
    a = adv.advantages(torch.ones(4), 7, torch.tensor([2, 0]))
    assert math.isnan(a[2]) and int(torch.isnan(a).sum()) == 1


@pytest.mark.parametrize("bad, msg", [
    ({"kind": "nope", "at_step": 1}, "drill.kind"),
    ({"kind": "lld"}, "drill.at_step"),
    ({"kind": "lld", "at_step": 3, "strength": -1}, "drill.strength"),
    ({"kind": "starvation", "at_step": 2, "strength": 2}, "drill.strength"),
    ({"kind": "isdd", "at_step": 2, "strength": 1.5}, "drill.strength"),
    ({"kind": "lld", "at_step": 3, "when": 1}, "drill: unknown"),
    ({"kind": "nonfinite", "at_step": 3, "tensor": "grad"}, "drill.tensor"),
])
def test_bad_drills_fail_naming_the_key(bad, msg):
    with pytest.raises(ValueError, match=msg):
        Drill.from_dict(bad)


def test_rollout_drills_need_an_aligned_step():
    with pytest.raises(ValueError, match="multiple of mini_batches"):
        load_config(overrides=SMALL, drill={"kind": "isdd", "at_step": 3})  # 2 updates per rollout
    cfg = load_config(overrides=[*SMALL, "drill.kind='lld'", "drill.at_step=3"])
    assert cfg.drill == {"kind": "lld", "at_step": 3}


def _steps(store, run: str, cols: str) -> list[tuple]:
    return connect(store).execute(f"SELECT step, {cols} FROM steps WHERE run = ? ORDER BY step", [run]).fetchall()


def test_blowup_drill_in_the_trainer_changes_lr_from_n_and_is_recorded(store):
    cfg = load_config(overrides=SMALL, steps=4, store=str(store), run="blow", progress=False,
                      drill={"kind": "blowup", "at_step": 2, "strength": 10.0})
    train(cfg)
    lr = cfg.lr  # 5e-5; × 10 = 5e-4 from step 2
    assert _steps(store, "blow", "lr") == [(0, lr), (1, lr), (2, pytest.approx(lr * 10)), (3, pytest.approx(lr * 10))]
    config = json.loads(connect(store).execute("SELECT config FROM runs WHERE run = 'blow'").fetchone()[0])
    assert config["drill"] == {"kind": "blowup", "at_step": 2, "strength": 10.0}  # the store holds the truth


def test_isdd_drill_reuses_the_rollout_from_n(store):
    cfg = load_config(overrides=SMALL, steps=6, store=str(store), run="isdd", progress=False,
                      drill={"kind": "isdd", "at_step": 2, "strength": 2})
    train(cfg)
    # 2 mini-batches per rollout: steps 0-1 rollout 1; from step 2 a rollout feeds 2 × 2 = 4 steps (2-5), so
    # the sequences of steps 4-5 are those of steps 2-3 again (same π_old likelihoods, rewards)
    rows = connect(store).execute(
        "SELECT step, seq_id, reward, logp_old_sum FROM sequences WHERE run = 'isdd' ORDER BY seq_id").fetchall()
    by_steps = lambda steps: sorted((s, r, lp) for st, s, r, lp in rows if st in steps)  # noqa: E731
    assert by_steps({4, 5}) == by_steps({2, 3})
    assert by_steps({2, 3}) != by_steps({0, 1})  # step 2 still starts a fresh rollout


def test_nonfinite_drill_counts_at_n(store):
    cfg = load_config(overrides=SMALL, steps=2, store=str(store), run="nan", progress=False,
                      drill={"kind": "nonfinite", "at_step": 1, "tensor": "logp"})
    train(cfg)
    # step 0 clean; step 1: one NaN in logp before the objective → counted, first_nonfinite = logp
    assert _steps(store, "nan", "nonfinite_logp, first_nonfinite") == [(0, 0, None), (1, 1, "logp")]


def test_mismatch_drill_moves_rollout_logps_from_n(store):
    cfg = load_config(overrides=SMALL, steps=4, store=str(store), run="mis", progress=False,
                      drill={"kind": "mismatch", "at_step": 2, "strength": 2.0})
    train(cfg)
    vals = dict(_steps(store, "mis", "is_log_ratio_abs_mean"))
    # same τ before step 2: HF generate and the recompute agree to float noise; from step 2 the sampler runs
    # at τ = 2 while π_old is at τ = 1, so |logp_old − logp_rollout| is of order a nat per token
    assert max(vals[0], vals[1]) < 1e-3
    assert min(vals[2], vals[3]) > 0.05
