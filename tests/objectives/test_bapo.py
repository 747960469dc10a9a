"""bapo: the bound search by hand, values and gradients at the chosen bounds, and parity with the released code."""

import math

import pytest
import torch

from collapsewatch.objectives import BapoParams, LossInputs, aggregate, compute_objective
from collapsewatch.objectives.bapo import bound_schedule, step_contributions

from .references import bapo_policy_loss

F64 = torch.float64
SMALL = {"lower_start": 0.6, "lower_max": 0.7, "lower_step": 0.1, "upper_start": 1.2, "upper_max": 1.4,
         "upper_step": 0.2, "dual_clip_c": None}


def _hand_case():
    # Row 0, A = +1: r = [2.0, 1.0, (masked)];  row 1, A = −1: r = [0.3, 1.0, 1.0].
    r = torch.tensor([[2.0, 1.0, 7.0], [0.3, 1.0, 1.0]], dtype=F64)
    logp = (r.log() - 1.0).clone().requires_grad_()
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=F64)
    inputs = LossInputs(logp=logp, logp_old=torch.full_like(r, -1.0), advantages=torch.tensor([1.0, -1.0], dtype=F64),
                        mask=mask)
    return logp, mask, inputs


def test_schedule_raises_low_first_then_high():
    assert bound_schedule(BapoParams(**SMALL)) == [(0.6, 1.2), (0.7, 1.2), (0.7, 1.4)]
    assert bound_schedule(BapoParams(target=1.0, lower_step=0.0, upper_step=0.0)) == [(0.6, 1.2)]
    default = bound_schedule(BapoParams())
    assert default[0] == (0.6, 1.2) and default[-1] == (0.8, 2.0)
    assert [lo for lo, _ in default[:6]] == pytest.approx([0.6, 0.65, 0.7, 0.75, 0.8, 0.8])


@pytest.mark.parametrize(
    ("target", "bounds", "balance"),
    [
        # Σ positive = min(2, c_high)·1 + 1·1 = c_high + 1;  Σ negative = max(0.3, c_low)·1 + 1 + 1 = c_low + 2.
        # pairs (0.6, 1.2) → 2.2/2.6 = 0.846154;  (0.7, 1.2) → 2.2/2.7 = 0.814815;  (0.7, 1.4) → 2.4/2.7 = 0.888889.
        (0.8, (0.6, 1.2), 2.2 / 2.6),  # the start pair already meets it
        (0.85, (0.7, 1.4), 2.4 / 2.7),  # raising c_low only adds to Σ negative; c_high then gets there
        (0.9, (0.7, 1.4), 2.4 / 2.7),  # never met: the last pair of the search
    ],
)
def test_bound_search_by_hand(target, bounds, balance):
    _, _, inputs = _hand_case()
    out = compute_objective("bapo", inputs, BapoParams(target=target, **SMALL))
    assert out.intermediates["bapo_clip_low"][0, 0].item() == pytest.approx(bounds[0])
    assert out.intermediates["bapo_clip_high"][0, 0].item() == pytest.approx(bounds[1])
    assert out.intermediates["bapo_pos_neg_ratio"][0, 0].item() == pytest.approx(balance, rel=1e-7)
    # the chosen pair is also the objective's step scalars, 0-dim: what a trainer logs without knowing the objective
    assert {k: (v.shape, v.item()) for k, v in out.scalars.items()} == {
        "bapo_clip_low": ((), pytest.approx(bounds[0])), "bapo_clip_high": ((), pytest.approx(bounds[1]))}


def test_loss_and_gradient_at_chosen_bounds():
    # Chosen pair (0.7, 1.4) (target 0.85, above).
    # Row 0, A = +1: r = 2 > 1.4 → ℓ = −1.4, clipped, no gradient, clip_high;  r = 1 → ℓ = −1, dℓ/dlogp = −A·r = −1.
    # Row 1, A = −1: r = 0.3 < 0.7 → ℓ = max(0.3, 0.7) = 0.7, clipped, no gradient, clip_low;
    #                r = 1 → ℓ = 1, dℓ/dlogp = −A·r = +1 (twice).
    logp, mask, inputs = _hand_case()
    out = compute_objective("bapo", inputs, BapoParams(target=0.85, **SMALL))
    torch.testing.assert_close((out.loss * mask), torch.tensor([[-1.4, -1.0, 0.0], [0.7, 1.0, 1.0]], dtype=F64))
    assert out.intermediates["clip_high"].tolist() == [[True, False, False], [False, False, False]]
    assert out.intermediates["clip_low"].tolist() == [[False, False, False], [True, False, False]]
    (out.loss * mask).sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -1.0, 0.0], [0.0, 1.0, 1.0]], dtype=F64))


def test_no_negative_contribution_keeps_the_start_pair():
    # Only A ≥ 0 tokens: Σ negative = 0 → pos/neg = +inf (released code) ≥ any target: no search step.
    logp = torch.zeros(1, 3, dtype=F64, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.full((1, 3), -0.5, dtype=F64),
                        advantages=torch.tensor([1.0], dtype=F64), mask=torch.ones(1, 3))
    out = compute_objective("bapo", inputs)
    assert math.isinf(out.intermediates["bapo_pos_neg_ratio"][0, 0].item())
    assert (out.intermediates["bapo_clip_low"][0, 0].item(), out.intermediates["bapo_clip_high"][0, 0].item()) == (
        pytest.approx(0.6), pytest.approx(1.2))


@pytest.mark.parametrize("target", [0.0, 0.5, 1.0, 1.5, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_parity_with_released_code(target, seed):
    # The released loss (token-mean, dual clip c = 3) against ours aggregated with token_mean: same chosen bounds,
    # same balance, same loss and same gradient. Targets span "met at once" to "never met".
    g = torch.Generator().manual_seed(seed)
    B, T = 8, 6
    logp = (-2.0 * torch.rand(B, T, generator=g, dtype=F64)).requires_grad_()
    logp_old = logp.detach() + 0.6 * torch.randn(B, T, generator=g, dtype=F64)
    mask = (torch.rand(B, T, generator=g) > 0.15).to(F64)
    adv = torch.randn(B, generator=g, dtype=F64)
    p = BapoParams(target=target)
    expected, (lo, hi, bal) = bapo_policy_loss(
        logp_old, logp, adv.unsqueeze(-1).expand(B, T), mask, ratio_low_cur=p.lower_start,
        ratio_high_cur=p.upper_start, ratio_low_max=p.lower_max, ratio_high_max=p.upper_max,
        ratio_low_step=p.lower_step, ratio_high_step=p.upper_step, target_ratio=p.target, eps=p.eps,
        clip_ratio_c=p.dual_clip_c)
    (expected_grad,) = torch.autograd.grad(expected, logp)
    out = compute_objective("bapo", LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask), p)
    ours = aggregate(out.loss, mask, "token_mean")
    (ours_grad,) = torch.autograd.grad(ours, logp)
    assert out.intermediates["bapo_clip_low"][0, 0].item() == lo
    assert out.intermediates["bapo_clip_high"][0, 0].item() == hi
    assert out.intermediates["bapo_pos_neg_ratio"][0, 0].item() == pytest.approx(bal, rel=1e-12)
    # verl's masked_mean adds 1e-8 to the token count: a relative difference of 1e-8 / N in the value.
    torch.testing.assert_close(ours, expected, rtol=1e-8, atol=0.0)
    torch.testing.assert_close(ours_grad, expected_grad, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("bad", [{"lower_start": 0.0}, {"lower_start": 0.9, "lower_max": 0.8}, {"lower_max": 1.1},
                                 {"upper_start": 0.9}, {"upper_max": 1.1}, {"lower_step": -0.1}, {"target": -1.0},
                                 {"dual_clip_c": 1.0}])
def test_params_validation(bad):
    with pytest.raises(ValueError):
        BapoParams(**bad)


def test_step_contributions_use_each_objectives_own_ratio_and_bounds():
    # Hand case above. bapo at target 0.85 chose (0.7, 1.4): Σ pos = 1.4 + 1 = 2.4, Σ neg = 0.7 + 2 = 2.7.
    # grpo (ε 0.2 / 0.28): bounds (0.8, 1.28): Σ pos = 1.28 + 1 = 2.28, Σ neg = max(0.3, 0.8) + 2 = 2.8.
    # sapo_soft has no clip: unclipped r, Σ pos = 2 + 1 = 3, Σ neg = 0.3 + 2 = 2.3.
    _, mask, inputs = _hand_case()
    adv = inputs.advantages
    cases = [("bapo", BapoParams(target=0.85, **SMALL), None, None, [2.4, 2.7]),
             ("grpo", None, 0.2, 0.28, [2.28, 2.8]), ("sapo_soft", None, None, None, [3.0, 2.3])]
    for name, params, lo, hi, expected in cases:
        out = compute_objective(name, inputs, params)
        got = step_contributions(out, adv, mask, lo, hi)
        torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), msg=name)
