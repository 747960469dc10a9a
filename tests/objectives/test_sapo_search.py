"""sapo_search (Search Agent PO): penalty by hand, where it must be zero, and parity with the paper's code line."""

import math

import pytest
import torch

from collapsewatch.objectives import GrpoParams, LossInputs, SapoSearchParams, aggregate, compute_objective

from .references import sapo_paper_policy_loss

SYM = GrpoParams(eps_low=0.2, eps_high=0.2)  # Search-R1's symmetric clip, to keep the hand sums short


def _batch():
    # Row 0, A=+1: r = [0.5, 0.9, 1.2];  Row 1, A=−1: r = [0.5, 0.5, 1.0].  logp_old = 0, logp = log r.
    r = torch.tensor([[0.5, 0.9, 1.2], [0.5, 0.5, 1.0]], dtype=torch.float64)
    logp = torch.log(r).requires_grad_()
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    return LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=adv, mask=torch.ones_like(logp))


def test_penalty_by_hand_paper_denominator():
    # τ = 0.8, w = 0.5. Penalised = A ≥ 0 ∧ r ≤ τ: only row 0, t0 (r = 0.5); −log r = ln 2 = 0.693147.
    # Paper: w · mean over the 3 A≥0 tokens = 0.5 · ln2 / 3 = 0.115525.
    # Per token this is 0.5·ln2 scaled by Σmask/Σ(A≥0 mask) = 6/3 = 2 → 0.693147 at (0, 0), so token_mean
    # over the 6 tokens gives 0.693147 / 6 = 0.115525.
    # GRPO part (ε = 0.2): row 0 = [−0.5, −0.9, −1.2], row 1 = [0.8, 0.8, 1.0] → sums to 0.
    # Total token_mean = 0 + 0.115525.
    inputs = _batch()
    out = compute_objective("sapo_search", inputs, SapoSearchParams(base=SYM, w=0.5, tau=0.8))
    expected_penalty = torch.zeros(2, 3, dtype=torch.float64)
    expected_penalty[0, 0] = 0.5 * math.log(2.0) * 2.0
    torch.testing.assert_close(out.intermediates["sapo_penalty"], expected_penalty)
    assert out.intermediates["sapo_penalty_mask"].tolist() == [[True, False, False], [False, False, False]]
    total = aggregate(out.loss, inputs.mask, "token_mean")
    assert total.item() == pytest.approx(0.5 * math.log(2.0) / 3.0)
    # d total / d logp[0,0] = (−A·r + −w·2) / 6 = (−0.5 − 1.0) / 6 = −0.25   (the penalty's pull is −w per token)
    total.backward()
    assert inputs.logp.grad[0, 0].item() == pytest.approx(-0.25)


def test_penalty_zero_for_negative_advantage_rows_and_ratios_above_tau():
    # Row 1 has A < 0 and r = 0.5 ≤ τ twice: no penalty. Row 0 t1 (r = 0.9) and t2 (r = 1.2) are above τ = 0.8.
    out = compute_objective("sapo_search", _batch(), SapoSearchParams(base=SYM, w=0.5, tau=0.8))
    assert torch.all(out.intermediates["sapo_penalty"][1] == 0)
    assert torch.all(out.intermediates["sapo_penalty"][0, 1:] == 0)
    # Loss beyond GRPO only at (0, 0).
    base = compute_objective("grpo", _batch(), SYM)
    extra = (out.loss - base.loss).detach()
    assert extra[0, 0] > 0 and torch.count_nonzero(extra) == 1


def test_zero_advantage_counts_as_positive_and_tau_one_penalises_any_drop():
    # A = 0 is in the A ≥ 0 set (the paper's `advantages[:, 0] >= 0`). With τ = 1, r = 0.9 is penalised too:
    # −log 0.9 = 0.105361; single row, no rescale (Σmask = Σ A≥0 mask).
    logp = torch.log(torch.tensor([[0.9, 1.1]], dtype=torch.float64)).requires_grad_()
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([0.0], dtype=torch.float64),
                        mask=torch.ones_like(logp))
    out = compute_objective("sapo_search", inputs, SapoSearchParams(w=1.0, tau=1.0))
    expected = torch.tensor([[-math.log(0.9), 0.0]], dtype=torch.float64)
    torch.testing.assert_close(out.intermediates["sapo_penalty"], expected)


def test_ratio_equal_to_tau_is_penalised():
    # The paper keeps log r where r ≤ t (``masked_fill(ratio > t, 0)``). At r = τ = 1 the penalty's value is
    # −log 1 = 0 but its gradient is still −w: d/dlogp [w·(−log r)] = −w = −0.5 (single row, no rescale).
    logp = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([0.0], dtype=torch.float64),
                        mask=torch.ones_like(logp))
    out = compute_objective("sapo_search", inputs, SapoSearchParams(w=0.5, tau=1.0))
    assert out.intermediates["sapo_penalty_mask"].tolist() == [[True]]
    out.loss.sum().backward()  # A = 0: the GRPO part has no gradient
    assert logp.grad.item() == pytest.approx(-0.5)


def test_loss_tokens_denominator():
    # No rescale: token_mean gives w·ln2 / 6 (all loss tokens) instead of / 3 (A≥0 tokens): 0.5·0.693147/6 = 0.057762.
    inputs = _batch()
    params = SapoSearchParams(base=SYM, w=0.5, tau=0.8, denominator="loss_tokens")
    out = compute_objective("sapo_search", inputs, params)
    assert aggregate(out.loss, inputs.mask, "token_mean").item() == pytest.approx(0.5 * math.log(2.0) / 6.0)


def test_no_positive_token_gives_no_penalty():
    logp = torch.log(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    adv = torch.tensor([-1.0], dtype=torch.float64)
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=adv, mask=torch.ones_like(logp))
    out = compute_objective("sapo_search", inputs)
    assert torch.all(out.intermediates["sapo_penalty"] == 0) and torch.isfinite(out.loss).all()


def test_params_validation():
    with pytest.raises(ValueError):
        SapoSearchParams(tau=1.5)
    with pytest.raises(ValueError):
        SapoSearchParams(w=-0.1)
    with pytest.raises(ValueError):
        SapoSearchParams(denominator="tokens")


@pytest.mark.parametrize(("t", "w"), [(0.8, 0.2), (1.0, 1.0), (0.5, 0.05)])
def test_parity_with_paper_code(t, w):
    # verl token-mean GRPO + w · kl_term_loss, on a batch with positive, zero and negative advantages, padding and
    # ratios on both sides of t. Advantages are (B, T) as in verl (score broadcast by the response mask).
    g = torch.Generator().manual_seed(3)
    B, T = 6, 8
    logp = (-3.0 * torch.rand(B, T, generator=g, dtype=torch.float64)).requires_grad_()
    logp_old = logp.detach() + 0.6 * torch.randn(B, T, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[1, 5:] = 0
    mask[3, 2:] = 0
    mask[5, 6:] = 0
    score = torch.tensor([1.2, -0.4, 0.0, 0.7, -1.5, 0.3], dtype=torch.float64)
    adv = score.unsqueeze(-1) * mask  # (B, T)
    expected = sapo_paper_policy_loss(logp_old, logp, adv, mask, cliprange=0.2, t=t, w=w)
    (expected_grad,) = torch.autograd.grad(expected, logp)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask)
    out = compute_objective("sapo_search", inputs, SapoSearchParams(base=SYM, w=w, tau=t))
    assert out.intermediates["sapo_penalty_mask"].any()  # the penalty branch is exercised
    ours = aggregate(out.loss, mask, "token_mean")
    (ours_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours_grad, expected_grad)
