"""sapo_soft (Qwen's Soft Adaptive PO): hand-derived gate values and gradients, and parity with TRL's "sapo"."""

import math

import pytest
import torch

from collapsewatch.objectives import LossInputs, SapoSoftParams, aggregate, compute_objective

from .references import trl_loss


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_soft_gate_values_and_gradients():
    # f(r) = (4/τ)·σ(τ(r − 1)), τ = 1 for A > 0 and 1.05 for A ≤ 0; ℓ = −f(r)·A.
    # t0: r=1,   A=+1:  f = 4·σ(0) = 2                          → ℓ = −2
    # t1: r=1,   A=−1:  f = (4/1.05)·0.5 = 1.904762             → ℓ = +1.904762
    # t2: r=2,   A=+1:  f = 4·σ(1) = 4·0.731059 = 2.924234      → ℓ = −2.924234
    # t3: r=0.5, A=−2:  f = (4/1.05)·σ(−0.525)                  → ℓ = +2·f
    # dℓ/dlogp = −A·f'(r)·r = −A·4·σ(1−σ)·r   (τ cancels): t0 = −1 (plain policy gradient at r = 1)
    ratios = [1.0, 1.0, 2.0, 0.5]
    adv = [1.0, -1.0, 1.0, -2.0]
    logp = torch.log(torch.tensor([ratios], dtype=torch.float64)).requires_grad_()
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([adv], dtype=torch.float64),
                        mask=torch.ones_like(logp))
    out = compute_objective("sapo_soft", inputs)
    f3 = 4.0 / 1.05 * _sigmoid(-0.525)
    expected = [-2.0, 4.0 / 1.05 * 0.5, -4.0 * _sigmoid(1.0), 2.0 * f3]
    torch.testing.assert_close(out.loss, torch.tensor([expected], dtype=torch.float64))
    gate = torch.tensor([[2.0, 4.0 / 1.05 * 0.5, 4.0 * _sigmoid(1.0), f3]], dtype=torch.float64)
    torch.testing.assert_close(out.intermediates["soft_gate"], gate)
    out.loss.sum().backward()

    def grad(a, r, tau):
        s = _sigmoid(tau * (r - 1.0))
        return -a * 4.0 * s * (1.0 - s) * r

    expected_grad = [grad(1.0, 1.0, 1.0), grad(-1.0, 1.0, 1.05), grad(1.0, 2.0, 1.0), grad(-2.0, 0.5, 1.05)]
    assert expected_grad[0] == pytest.approx(-1.0) and expected_grad[1] == pytest.approx(1.0)
    torch.testing.assert_close(logp.grad, torch.tensor([expected_grad], dtype=torch.float64))


def test_params_validation():
    with pytest.raises(ValueError):
        SapoSoftParams(tau_pos=0.0)


@pytest.mark.parametrize("taus", [(1.0, 1.05), (0.5, 2.0)])
def test_parity_with_trl_sapo(taus):
    pytest.importorskip("trl")
    g = torch.Generator().manual_seed(1)
    B, T = 4, 6
    logp = (-2.0 * torch.rand(B, T, generator=g)).requires_grad_()
    logp_old = logp.detach() + 0.5 * torch.randn(B, T, generator=g)
    mask = torch.ones(B, T)
    mask[1, 3:] = 0
    adv = torch.tensor([1.3, -0.7, 0.0, -1.1])
    expected = trl_loss("sapo", logp, logp_old, adv, mask, tau_pos=taus[0], tau_neg=taus[1])
    (expected_grad,) = torch.autograd.grad(expected, logp)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask)
    out = compute_objective("sapo_soft", inputs, SapoSoftParams(tau_pos=taus[0], tau_neg=taus[1]))
    ours = aggregate(out.loss, mask, "seq_mean_token_mean")  # TRL's "sapo" uses the per-sequence mean
    (ours_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours_grad, expected_grad)
