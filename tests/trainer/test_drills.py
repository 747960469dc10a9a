"""Drills switch on at exactly the named step, and only then: the hooks by hand, then the real trainer."""

from __future__ import annotations

import json
import math

import pytest
import torch

from collapsewatch import connect
from collapsewatch.objectives import LossInputs, aggregate, compute_advantages, compute_objective
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


def test_length_offsets_every_advantage_from_at_step_only():
    d = Drill.from_dict({"kind": "length", "at_step": 5, "strength": 2.0})
    adv = torch.tensor([1.0, -0.5, 0.0, -2.0])
    rows = torch.arange(4)
    assert torch.equal(d.advantages(adv, 4, rows), adv)  # step 4 < 5: untouched
    # step 5: A + 2 → [3, 1.5, 2, 0]: a group's advantages no longer sum to 0, they sum to 2 × its size
    assert torch.equal(d.advantages(adv, 5, rows), torch.tensor([3.0, 1.5, 2.0, 0.0]))
    assert Drill.from_dict({"kind": "length", "at_step": 0}).strength == 2.0  # the default offset


def _offset_loss_grad(aggregation: str, logp: torch.Tensor, mask: torch.Tensor, rewards: torch.Tensor,
                      step: int) -> torch.Tensor:
    """d(loss)/d(logp) of the GRPO loss on one group, on-policy (r = 1), with the length drill at step 1."""
    adv = compute_advantages(rewards, torch.zeros(len(rewards), dtype=torch.long))
    adv = Drill.from_dict({"kind": "length", "at_step": 1, "strength": 2.0}).advantages(adv, step, torch.arange(2))
    logp = logp.clone().requires_grad_()
    out = compute_objective("grpo", LossInputs(logp=logp, logp_old=logp.detach(), advantages=adv, mask=mask))
    aggregate(out.loss, mask, aggregation, max_len=4).backward()
    return logp.grad


def test_length_drill_gradient_favours_short_responses_under_a_sequence_mean_loss():
    # One group of two responses with equal rewards: group-normalised A = [0, 0] (no signal), so before the
    # drill there is no gradient at all. Response 0 has 1 model token, response 1 has 3.
    logp = torch.full((2, 4), -0.5, dtype=torch.float64)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.float64)
    rewards = torch.tensor([1.0, 1.0], dtype=torch.float64)
    assert not _offset_loss_grad("seq_mean_token_mean", logp, mask, rewards, step=0).any()
    # From the drill on A = [2, 2]; on-policy ℓ_t = −A·r_t with dℓ_t/dlogp_t = −A·r = −A. seq_mean_token_mean
    # over S = 2 sequences: d loss/d logp_it = −A_i / (S·n_i): response 0: −2/(2·1) = −1; response 1 (n = 3):
    # −2/(2·3) = −1/3 on each token. log π(y_i) = Σ_t logp_it is pushed up with weight 1 vs 1/3: the short
    # response 3 × harder, the ratio of the lengths (∝ 1/|y|, the length bias).
    grad = _offset_loss_grad("seq_mean_token_mean", logp, mask, rewards, step=1)
    third = 1 / 3
    torch.testing.assert_close(grad, torch.tensor([[-1.0, 0, 0, 0], [-third, -third, -third, 0]], dtype=torch.float64))
    # A per-token-sum loss (seq_mean_token_sum_norm, L = 4): −A/(S·L) = −2/(2·4) = −1/4 on every token, so each
    # response's log-likelihood gets the same push: no length term
    grad = _offset_loss_grad("seq_mean_token_sum_norm", logp, mask, rewards, step=1)
    torch.testing.assert_close(grad, -0.25 * mask)


def test_length_drill_expected_gradient_is_the_gradient_of_an_expected_brevity_bonus():
    # A policy over two responses: "short" (1 token, probability p = σ(θ)) and "long" (3 tokens: first token
    # 1 − p, then two certain tokens). Exact expectation over both responses of the drilled loss (A = 0 + s, s = 2,
    # seq_mean_token_mean over one sequence at a time), on-policy:
    #   E[loss] gradient = Σ_y π(y)·d/dθ[−(s/|y|)·log π(y)] = −s·p(1−p) + (s/3)·p(1−p) = −(2/3)·s·p(1−p),
    # which is −d/dθ E[s/|y|] = −s·(1 − 1/3)·p(1−p): descending it raises p, the short response.
    # At θ = 0 (p = 1/2): −(2/3)·2·(1/4) = −1/3. Under seq_mean_token_sum_norm (L = 3) it is
    # −(s/3)·[(1−p)·p − p·(1−p)] = 0: the offset has no length term in expectation.
    def expected_grad(aggregation: str) -> float:
        theta = torch.zeros((), dtype=torch.float64, requires_grad=True)
        p = torch.sigmoid(theta)
        zero = torch.zeros((), dtype=torch.float64)
        logp = torch.stack([torch.stack([torch.log(p), zero, zero]),
                            torch.stack([torch.log(1 - p), zero, zero])])  # (2, 3)
        mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.float64)
        adv = Drill.from_dict({"kind": "length", "at_step": 0}).advantages(torch.zeros(2, dtype=torch.float64), 0,
                                                                           torch.arange(2))  # [2, 2]
        out = compute_objective("grpo", LossInputs(logp=logp, logp_old=logp.detach(), advantages=adv, mask=mask))
        per_response = torch.stack([aggregate(out.loss[i : i + 1], mask[i : i + 1], aggregation, max_len=3)
                                    for i in range(2)])  # (2,) each response's loss alone
        weights = torch.stack([p, 1 - p]).detach()  # π(y), the expectation's weights (not differentiated)
        (weights * per_response).sum().backward()
        return float(theta.grad)

    assert expected_grad("seq_mean_token_mean") == pytest.approx(-1 / 3)
    assert expected_grad("seq_mean_token_sum_norm") == pytest.approx(0.0, abs=1e-12)


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
    ({"kind": "length", "at_step": 2, "strength": -2.0}, "drill.strength"),
    ({"kind": "length", "at_step": 2, "strength": float("inf")}, "drill.strength"),
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


def test_length_drill_in_the_trainer_offsets_the_stored_advantages_from_n_only(store):
    runs = {}
    for name, drill in (("plain", {}), ("short", {"kind": "length", "at_step": 2, "strength": 2.0})):
        cfg = load_config(overrides=SMALL, steps=4, store=str(store), run=name, progress=False,
                          aggregation="seq_mean_token_mean", drill=drill)
        train(cfg)
        runs[name] = connect(store).execute(
            "SELECT step, sum(advantage), sum(reward) FROM sequences WHERE run = ? GROUP BY step ORDER BY step",
            [name]).fetchall()
    # 2 questions × 4 responses, 2 mini-batches: each rollout's 8 rows are split over two steps. Group-normalised
    # advantages sum to 0 over a rollout (each group's do); from step 2 each of the 8 rows carries + 2: Σ = 16.
    adv = {name: [a for _, a, _ in rows] for name, rows in runs.items()}
    assert adv["short"][0] + adv["short"][1] == pytest.approx(0.0, abs=1e-5)
    assert adv["short"][2] + adv["short"][3] == pytest.approx(16.0, abs=1e-5)
    # before the onset the drilled run is the undrilled one (same seed): same rollouts, same advantages
    assert runs["short"][:2] == runs["plain"][:2]
    assert adv["plain"][2] + adv["plain"][3] == pytest.approx(0.0, abs=1e-5)
