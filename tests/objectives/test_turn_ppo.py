"""turn_ppo: turn ratio and per-turn clip by hand, gradient vs the turn-level surrogate, loop transcription, gspo."""

import math

import pytest
import torch

from collapsewatch.objectives import GspoParams, LossInputs, TurnPpoParams, aggregate, compute_objective

F64 = torch.float64


def _inputs(log_r, mask, adv, turn_ids=None):
    logp = (log_r - 1.0).clone().requires_grad_()
    return logp, LossInputs(logp=logp, logp_old=torch.full_like(log_r, -1.0), advantages=adv, mask=mask,
                            turn_ids=turn_ids)


def test_turn_ratio_and_per_turn_clip_by_hand():
    # Row 0, A = +1, two turns split by a tool token (mask 0, log r = 5 must not enter any mean):
    #   turn 0: log r = [0.1, 0.3] → mean 0.2, w = e^0.2 = 1.221403 > 1.2 → clipped: ℓ = −1.2, no gradient,
    #           clip_high on both tokens;
    #   turn 1: log r = [−0.2, −0.4] → mean −0.3, w = e^−0.3 = 0.740818 < 0.8 but A > 0, so min(w, clip(w)) = w:
    #           ℓ = −0.740818, unclipped, dℓ/dlogp_t = −A·w = −0.740818 per token (its own log-prob's gradient).
    # Row 1, A = −1, one turn: log r = [0.05, −0.05, 0.0, 0.0, (pad)] → mean 0, w = 1: ℓ = +1, gradient +1.
    log_r = torch.tensor([[0.1, 0.3, 5.0, -0.2, -0.4], [0.05, -0.05, 0.0, 0.0, 9.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 1, 1, 1, 0]], dtype=F64)
    turns = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]])
    logp, inputs = _inputs(log_r, mask, torch.tensor([1.0, -1.0], dtype=F64), turns)
    out = compute_objective("turn_ppo", inputs)
    w0, w1 = math.exp(0.2), math.exp(-0.3)
    torch.testing.assert_close(out.intermediates["turn_ratio"][0, [0, 1, 3, 4]],
                               torch.tensor([w0, w0, w1, w1], dtype=F64))
    torch.testing.assert_close(out.intermediates["turn_ratio"][1, :4], torch.ones(4, dtype=F64))
    torch.testing.assert_close(out.loss[0, [0, 1, 3, 4]], torch.tensor([-1.2, -1.2, -w1, -w1], dtype=F64))
    torch.testing.assert_close(out.loss[1, :4], torch.ones(4, dtype=F64))
    assert out.intermediates["clip_high"].tolist() == [[True, True, False, False, False], [False] * 5]
    assert not out.intermediates["clip_low"].any()  # A > 0 on the fallen turn: the PPO clip never fires there
    (out.loss * mask).sum().backward()
    expected = torch.tensor([[0.0, 0.0, 0.0, -w1, -w1], [1.0, 1.0, 1.0, 1.0, 0.0]], dtype=F64)
    torch.testing.assert_close(logp.grad, expected)


def test_runs_of_model_tokens_are_the_turns_without_turn_ids():
    # Same row 0 as above: without turn ids the tool token (mask 0) splits the row into the same two turns.
    log_r = torch.tensor([[0.1, 0.3, 5.0, -0.2, -0.4]], dtype=F64)
    mask = torch.tensor([[1, 1, 0, 1, 1]], dtype=F64)
    adv = torch.tensor([1.0], dtype=F64)
    with_ids = compute_objective("turn_ppo", _inputs(log_r, mask, adv, torch.tensor([[0, 0, 0, 1, 1]]))[1])
    without = compute_objective("turn_ppo", _inputs(log_r, mask, adv)[1])
    torch.testing.assert_close(without.intermediates["turn_ratio"], with_ids.intermediates["turn_ratio"])
    torch.testing.assert_close(without.loss * mask, with_ids.loss * mask)


def _random_case(seed):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 9
    log_r = 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    mask = (torch.rand(B, T, generator=g) > 0.2).to(F64)
    turns = torch.sort(torch.randint(0, 3, (B, T), generator=g), dim=-1).values  # 0-based, non-decreasing
    adv = torch.randn(B, generator=g, dtype=F64)
    return log_r, mask, turns, adv


def test_token_form_gradient_equals_turn_level_surrogate():
    # The turn-level surrogate of the paper, differentiated for real through w_k = exp(mean log r):
    #   J = Σ_i Σ_k n_ik · (−min(w_ik·A_i, clip(w_ik)·A_i)),   n_ik = model tokens of turn k in row i
    # equals Σ_t ℓ_t of the token form, value and gradient (dJ/dlogp_t = −A·w_k·1[unclipped] for each t in k).
    log_r, mask, turns, adv = _random_case(0)
    logp, inputs = _inputs(log_r, mask, adv, turns)
    out = compute_objective("turn_ppo", inputs)
    ours = (out.loss * mask).sum()
    (ours_grad,) = torch.autograd.grad(ours, logp)
    logp2 = (log_r - 1.0).clone().requires_grad_()
    lr = logp2 + 1.0
    terms = []
    for i in range(lr.shape[0]):
        for k in turns[i].unique():
            sel = (turns[i] == k) & (mask[i] > 0)
            if sel.any():
                w = torch.exp(lr[i][sel].mean())
                a = adv[i]
                terms.append(sel.sum() * torch.maximum(-a * w, -a * w.clamp(0.8, 1.2)))
    ref = torch.stack(terms).sum()
    (ref_grad,) = torch.autograd.grad(ref, logp2)
    torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(ours_grad, ref_grad)
    assert out.intermediates["clip_region"].any()  # the case covers both branches
    assert not out.intermediates["clip_region"][mask > 0].all()


def test_one_turn_per_response_is_gspo():
    # With every model token in turn 0, w_k is GSPO's s_i: same loss and gradient as gspo at ε = 0.2.
    log_r, mask, _, adv = _random_case(1)
    one_turn = torch.zeros_like(mask, dtype=torch.long)
    logp, inputs = _inputs(log_r, mask, adv, one_turn)
    ours = aggregate(compute_objective("turn_ppo", inputs).loss, mask, "seq_mean_token_mean")
    (g_ours,) = torch.autograd.grad(ours, logp)
    logp2, inputs2 = _inputs(log_r, mask, adv)
    theirs = aggregate(compute_objective("gspo", inputs2, GspoParams(0.2, 0.2)).loss, mask, "seq_mean_token_mean")
    (g_theirs,) = torch.autograd.grad(theirs, logp2)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(g_ours, g_theirs)


@pytest.mark.parametrize("bad", [{"eps_low": 1.0}, {"eps_low": -0.1}, {"eps_high": -0.1}])
def test_params_validation(bad):
    with pytest.raises(ValueError, match="eps"):
        TurnPpoParams(**bad)


def test_probe_turn_level_flags_are_the_objectives():
    # conftest.hand_batch with ε 0.2 / 0.28. seq 0, A = +1: ratios [2, 1 | 0.05], turns [0, 0 | 1]:
    #   turn 0: w = exp((ln 2 + 0)/2) = √2 = 1.414 > 1.28 → clip_high on tokens 0, 1; turn 1: w = 0.05 (A > 0: no flag).
    # seq 1, A = −1: ratios [0.5, 1.5], one turn: w = exp((ln 0.5 + ln 1.5)/2) = √0.75 = 0.866 ≥ 0.8 → no clip_low.
    # seq 2, A = 0: no flag. The probe (ClipSpec level 'turn') and the objective share policy_math.turn_log_ratio.
    from collapsewatch.probe import ClipSpec, token_metrics
    from tests.conftest import hand_batch

    b = hand_batch()
    tok = token_metrics(b, ClipSpec(0.2, 0.28, level="turn"))
    expected_high = [[True, True, False, False], [False] * 4, [False] * 4]
    assert tok["clip_high"].tolist() == expected_high
    assert not tok["clip_low"].any()
    torch.testing.assert_close(tok["clip_ratio"][0, :3], torch.tensor([2 ** 0.5, 2 ** 0.5, 0.05], dtype=F64))
    out = compute_objective("turn_ppo", b, TurnPpoParams(0.2, 0.28))
    assert out.intermediates["clip_high"].tolist() == expected_high
