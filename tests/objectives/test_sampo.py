"""sampo: gspo at ARL-Arena's ε plus the k3 KL by hand (value and gradient), and the preset's trainer fields."""

import math

import pytest
import torch

from collapsewatch.objectives import GspoParams, LossInputs, SampoParams, compute_objective
from collapsewatch.objectives.sampo import RECIPE
from collapsewatch.trainer.config import load_config

F64 = torch.float64


def test_without_kl_it_is_gspo_at_arl_arena_eps():
    # β = 0: the loss and gradient are gspo's with ε = 3e-3 / 4e-3, on a case where some sequences clip.
    g = torch.Generator().manual_seed(3)
    logp = (-torch.rand(4, 6, generator=g, dtype=F64)).requires_grad_()
    logp_old = logp.detach() + 0.004 * torch.randn(4, 6, generator=g, dtype=F64)
    mask = torch.ones(4, 6, dtype=F64)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=F64)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=mask)
    ours = compute_objective("sampo", inputs, SampoParams(kl_beta=0.0))
    ref = compute_objective("gspo", inputs, GspoParams(3e-3, 4e-3))
    torch.testing.assert_close(ours.loss, ref.loss)
    (g_ours,) = torch.autograd.grad(ours.loss.sum(), logp)
    (g_ref,) = torch.autograd.grad(ref.loss.sum(), logp)
    torch.testing.assert_close(g_ours, g_ref)
    assert 0 < ours.intermediates["clip_region"].any(dim=-1).sum() < 4


def test_k3_term_by_hand():
    # One token, on-policy (s = 1, inside the band), A = +1: GSPO part ℓ = −1, dℓ/dlogp = −A·s = −1.
    # logp_ref − logp = d = ln 2: k3 = e^d − d − 1 = 2 − ln 2 − 1 = 0.306853, β·k3 = 0.00306853;
    # d(β·k3)/dlogp = β·(1 − e^d) = 0.01·(1 − 2) = −0.01.  Total ℓ = −0.99693147, gradient −1.01.
    logp = torch.tensor([[-1.0]], dtype=F64, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.tensor([[-1.0]], dtype=F64), advantages=torch.tensor([1.0], dtype=F64),
                        mask=torch.ones(1, 1), logp_ref=torch.tensor([[-1.0 + math.log(2.0)]], dtype=F64))
    out = compute_objective("sampo", inputs)
    torch.testing.assert_close(out.loss, torch.tensor([[-1.0 + 0.01 * (1.0 - math.log(2.0))]], dtype=F64))
    torch.testing.assert_close(out.intermediates["kl_ref_k3"], torch.tensor([[1.0 - math.log(2.0)]], dtype=F64))
    out.loss.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.01]], dtype=F64))


def test_kl_without_reference_is_a_clear_error():
    logp = torch.zeros(1, 2, requires_grad=True)
    inputs = LossInputs(logp=logp, logp_old=torch.zeros(1, 2), advantages=torch.ones(1), mask=torch.ones(1, 2))
    with pytest.raises(ValueError, match="logp_ref"):
        compute_objective("sampo", inputs)


def test_preset_is_a_valid_trainer_config():
    cfg = load_config(**RECIPE)
    assert (cfg.objective, cfg.aggregation) == ("sampo", "seq_mean_token_mean")
    # ARL-Arena's SAMPO: GiGPO advantages (its script's γ 0.95, ω 1, mean/std: GigpoParams' defaults) and dynamic
    # sampling with at most 3 generation batches
    assert (cfg.advantages, cfg.advantage_params, cfg.dynamic_sampling) == ("gigpo", {}, 3)
    with pytest.raises(ValueError, match="eps_low"):
        SampoParams(eps_low=1.5)
