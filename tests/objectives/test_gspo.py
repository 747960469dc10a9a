"""gspo: sequence ratio by hand, clipping of whole sequences, and parity with TRL's sequence-level path."""

import math

import pytest
import torch

from collapsewatch.objectives import GspoParams, LossInputs, aggregate, compute_objective

from .references import trl_loss


def test_sequence_ratio_and_clip_by_hand():
    # Row 0, A=+1: log r = [0.2, −0.1, (masked) 5.0] → mean over the mask = 0.05, s = e^0.05 = 1.051271.
    #   s > 1 + 4e-4 → both tokens clipped: ℓ = −min(s, 1.0004)·1 = −1.0004, no gradient; clip_high on both.
    #   The masked token's log r = 5 must not enter the mean (it would give s = e^1.7).
    # Row 1, A=−1: log r = [2e-4, −2e-4, 0] (all in the mask) → mean 0, s = 1 inside the band:
    #   ℓ = −min(−1, −1) = 1 per token, dℓ/dlogp_t = −A·s = +1 per token (its own log-prob's gradient).
    log_r = torch.tensor([[0.2, -0.1, 5.0], [2e-4, -2e-4, 0.0]], dtype=torch.float64)
    logp = (log_r - 1.0).clone().requires_grad_()
    logp_old = torch.full_like(log_r, -1.0)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=torch.tensor([1.0, -1.0], dtype=torch.float64),
                        mask=mask)
    out = compute_objective("gspo", inputs)
    s0 = torch.full((2,), math.exp(0.05), dtype=torch.float64)
    torch.testing.assert_close(out.intermediates["seq_ratio"][0, :2], s0)
    torch.testing.assert_close(out.intermediates["seq_ratio"][1], torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(out.loss[0, :2], torch.full((2,), -1.0004, dtype=torch.float64))
    torch.testing.assert_close(out.loss[1], torch.ones(3, dtype=torch.float64))
    assert out.intermediates["clip_high"].tolist() == [[True, True, False], [False, False, False]]
    (out.loss * mask).sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64))


def test_small_ratio_drift_within_band_is_not_clipped():
    # Row A=+1 with mean log r = 1e-4: s = 1.0001 < 1.0004 → unclipped, ℓ = −s, gradient −A·s per token.
    logp = torch.tensor([[1e-4, 1e-4]], dtype=torch.float64, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([1.0], dtype=torch.float64),
                        mask=torch.ones_like(logp))
    out = compute_objective("gspo", inputs)
    torch.testing.assert_close(out.loss, torch.full((1, 2), -math.exp(1e-4), dtype=torch.float64))
    assert not out.intermediates["clip_region"].any()
    out.loss.sum().backward()
    torch.testing.assert_close(logp.grad, torch.full((1, 2), -math.exp(1e-4), dtype=torch.float64))


@pytest.mark.parametrize("eps", [(3e-4, 4e-4), (0.05, 0.1)])
def test_parity_with_trl_sequence_level(eps):
    # TRL's importance_sampling_level="sequence" keeps the full gradient of exp(mean log r) (B, 1); our token form
    # sg[s]·π/sg[π] aggregated with seq_mean_token_mean must give the same loss and the same gradient.
    pytest.importorskip("trl")
    g = torch.Generator().manual_seed(2)
    B, T = 6, 5
    logp = (-2.0 * torch.rand(B, T, generator=g)).requires_grad_()
    logp_old = logp.detach() + 0.05 * torch.randn(B, T, generator=g)
    mask = torch.ones(B, T)
    mask[0, 3:] = 0
    mask[4, 1:] = 0
    adv = torch.randn(B, generator=g)
    expected = trl_loss("grpo", logp, logp_old, adv, mask, eps_low=eps[0], eps_high=eps[1], sequence_level=True)
    (expected_grad,) = torch.autograd.grad(expected, logp)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask)
    out = compute_objective("gspo", inputs, GspoParams(eps_low=eps[0], eps_high=eps[1]))
    ours = aggregate(out.loss, mask, "seq_mean_token_mean")
    (ours_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours_grad, expected_grad)
    if eps == (3e-4, 4e-4):  # the paper's tiny band clips most of these sequences: the test covers both branches
        assert 0 < out.intermediates["clip_region"].any(dim=-1).sum() < B
