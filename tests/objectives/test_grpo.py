"""grpo: hand-derived PPO-clip values, dual clip, k3 KL, entropy bonus, clamp, and parity with TRL's loss."""

import math

import pytest
import torch

from collapsewatch.objectives import GrpoParams, LossInputs, aggregate, grpo

from .references import trl_loss


def _inputs(ratios, adv, **kw):
    """One row per call site: logp_old = 0 and logp = log r, so the ratio is exactly the given r."""
    logp = torch.log(torch.tensor([ratios], dtype=torch.float64)).requires_grad_()
    adv = torch.tensor([adv], dtype=torch.float64)
    return LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=adv, mask=torch.ones_like(logp), **kw)


def test_clip_values_and_gradients():
    # ε_l = 0.2, ε_h = 0.28; per-token advantages.
    # t0: r=1.5, A=+1: −min(1.5, 1.28) = −1.28, clipped high → no gradient
    # t1: r=0.5, A=+1: −min(0.5, 0.8)  = −0.5, NOT clipped (A>0 falling ratio: the ISDD blind spot),
    #     dℓ/dlogp = −A·r = −0.5
    # t2: r=1.1, A=−1: −min(−1.1, −1.1) = 1.1, inside the band, dℓ/dlogp = −A·r = +1.1
    # t3: r=0.7, A=−1: −min(−0.7, −0.8) = 0.8, clipped low → no gradient
    inputs = _inputs([1.5, 0.5, 1.1, 0.7], [1.0, 1.0, -1.0, -1.0])
    out = grpo(inputs, GrpoParams())
    torch.testing.assert_close(out.loss, torch.tensor([[-1.28, -0.5, 1.1, 0.8]], dtype=torch.float64))
    out.loss.sum().backward()
    torch.testing.assert_close(inputs.logp.grad, torch.tensor([[0.0, -0.5, 1.1, 0.0]], dtype=torch.float64))
    assert out.intermediates["clip_high"].tolist() == [[True, False, False, False]]
    assert out.intermediates["clip_low"].tolist() == [[False, False, False, True]]
    assert out.intermediates["clip_region"].tolist() == [[True, False, False, True]]
    torch.testing.assert_close(out.intermediates["ratio"], torch.tensor([[1.5, 0.5, 1.1, 0.7]], dtype=torch.float64))
    assert "dual_clip" not in out.intermediates and "kl_ref_k3" not in out.intermediates


def test_symmetric_clip_uses_eps_high():
    # r=1.25, A=+1: with ε_h=0.28 it is inside the band (ℓ = −1.25); with ε_h=0.2 it is clipped (ℓ = −1.2).
    assert grpo(_inputs([1.25], [1.0]), GrpoParams()).loss.item() == pytest.approx(-1.25)
    assert grpo(_inputs([1.25], [1.0]), GrpoParams(eps_high=0.2)).loss.item() == pytest.approx(-1.2)


def test_dual_clip():
    # c = 3:
    # t0: r=4, A=−1: max(4, 1.28) = 4, dual clip min(4, −c·A = 3) = 3, flat → no gradient; dual_clip flag
    # t1: r=2, A=−1: max(2, 1.28) = 2 < 3, gradient −A·r = 2
    # t2: r=4, A=+1: max(−4, −1.28) = −1.28, dual clip only acts on A<0
    inputs = _inputs([4.0, 2.0, 4.0], [-1.0, -1.0, 1.0])
    out = grpo(inputs, GrpoParams(dual_clip_c=3.0))
    torch.testing.assert_close(out.loss, torch.tensor([[3.0, 2.0, -1.28]], dtype=torch.float64))
    out.loss.sum().backward()
    torch.testing.assert_close(inputs.logp.grad, torch.tensor([[0.0, 2.0, 0.0]], dtype=torch.float64))
    assert out.intermediates["dual_clip"].tolist() == [[True, False, False]]
    # Without dual clip t0 would be 4.
    assert grpo(_inputs([4.0], [-1.0]), GrpoParams()).loss.item() == pytest.approx(4.0)


def test_k3_kl_to_reference():
    # r = 1 and A = 0, so only β·k3 remains. d = logp_ref − logp = [0, ln 2, −ln 2]:
    # k3 = e^d − d − 1 = [0, 2 − ln2 − 1, 0.5 + ln2 − 1] = [0, 0.306853, 0.193147]; β = 0.1 → ×0.1
    # dk3/dlogp = 1 − e^d = [0, −1, 0.5] → ×β = [0, −0.1, 0.05]
    ref = torch.tensor([[0.0, math.log(2.0), -math.log(2.0)]], dtype=torch.float64)
    inputs = _inputs([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], logp_ref=ref)
    out = grpo(inputs, GrpoParams(kl_beta=0.1))
    k3 = [0.0, 1.0 - math.log(2.0), math.log(2.0) - 0.5]
    torch.testing.assert_close(out.loss, 0.1 * torch.tensor([k3], dtype=torch.float64))
    torch.testing.assert_close(out.intermediates["kl_ref_k3"], torch.tensor([k3], dtype=torch.float64))
    out.loss.sum().backward()
    torch.testing.assert_close(inputs.logp.grad, torch.tensor([[0.0, -0.1, 0.05]], dtype=torch.float64))


def test_entropy_bonus_and_missing_inputs():
    # A = 0, r = 1: ℓ = −c_H·H = −0.01·[1, 2, 3]
    ent = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    out = grpo(_inputs([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], entropy=ent), GrpoParams(entropy_coef=0.01))
    torch.testing.assert_close(out.loss, torch.tensor([[-0.01, -0.02, -0.03]], dtype=torch.float64))
    with pytest.raises(ValueError, match="logp_ref"):
        grpo(_inputs([1.0], [0.0]), GrpoParams(kl_beta=0.1))
    with pytest.raises(ValueError, match="entropy"):
        grpo(_inputs([1.0], [0.0]), GrpoParams(entropy_coef=0.1))


def test_log_ratio_clamp_is_counted_and_flat():
    # log r = 25 → clamped to 20: r = e^20, flagged; A = −1 sits on the clamp, so no gradient flows.
    logp = torch.tensor([[25.0, 0.5]], dtype=torch.float64, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([-1.0]),
                        mask=torch.tensor([[1.0, 1.0]]))
    out = grpo(inputs, GrpoParams())
    assert out.intermediates["log_ratio_clamped"].tolist() == [[True, False]]
    assert out.intermediates["ratio"][0, 0].item() == pytest.approx(math.exp(20.0))
    out.loss[0, 0].backward()
    assert logp.grad[0, 0].item() == 0.0


def test_flags_are_masked():
    # Same clipped token twice; the second is masked out, so its flag is False.
    logp = torch.log(torch.tensor([[1.5, 1.5]]))
    inputs = LossInputs(logp=logp, logp_old=torch.zeros_like(logp), advantages=torch.tensor([1.0]),
                        mask=torch.tensor([[1.0, 0.0]]))
    assert grpo(inputs, GrpoParams()).intermediates["clip_high"].tolist() == [[True, False]]


def _random_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 7
    logp = (-2.0 * torch.rand(B, T, generator=g)).requires_grad_()
    logp_old = logp.detach() + 0.4 * torch.randn(B, T, generator=g)
    logp_ref = logp.detach() + 0.3 * torch.randn(B, T, generator=g)
    mask = torch.ones(B, T)
    mask[0, 5:] = 0
    mask[2, 2:] = 0
    mask[3, 0] = 0
    adv = torch.randn(B, generator=g)
    return logp, logp_old, logp_ref, mask, adv


@pytest.mark.parametrize(
    ("trl_type", "mode"),
    [("grpo", "seq_mean_token_mean"), ("bnpo", "token_mean"), ("dr_grpo", "seq_mean_token_sum_norm")],
)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_parity_with_trl(trl_type, mode, beta):
    # TRL 1.16 folds the normaliser into loss_type; here it is the aggregation axis. Same tensors, same loss and grad.
    pytest.importorskip("trl")
    logp, logp_old, logp_ref, mask, adv = _random_batch()
    expected = trl_loss(trl_type, logp, logp_old, adv, mask, beta=beta, logp_ref=logp_ref)
    (expected_grad,) = torch.autograd.grad(expected, logp)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask, logp_ref=logp_ref)
    ours = aggregate(grpo(inputs, GrpoParams(kl_beta=beta)).loss, mask, mode)
    (ours_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours_grad, expected_grad)
