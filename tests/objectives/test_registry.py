"""Registry lookup, name hygiene, params plumbing, input validation, and the output contract of every objective."""

import pytest
import torch

from collapsewatch.objectives import (
    BapoParams,
    GrpoParams,
    GspoParams,
    LldsParams,
    LossInputs,
    ObjectiveOutput,
    SampoParams,
    SapoSearchParams,
    SapoSoftParams,
    TurnPpoParams,
    compute_objective,
    get_objective,
    make_params,
    objective_names,
    register_objective,
)

BUILT_IN = ("bapo", "grpo", "gspo", "llds", "sampo", "sapo_search", "sapo_soft", "turn_ppo")


def test_builtin_names_and_params_types():
    assert objective_names() == BUILT_IN
    expected = [BapoParams, GrpoParams, GspoParams, LldsParams, SampoParams, SapoSearchParams, SapoSoftParams,
                TurnPpoParams]
    assert [get_objective(n).params_type for n in BUILT_IN] == expected


def test_unknown_name_lists_known_ones():
    with pytest.raises(ValueError) as err:
        get_objective("ppo")
    for name in BUILT_IN:
        assert name in str(err.value)


def test_bare_sapo_is_refused():
    with pytest.raises(ValueError, match="sapo_search.*sapo_soft"):
        get_objective("sapo")
    with pytest.raises(ValueError, match="ambiguous"):
        register_objective("sapo")


def test_duplicate_and_unannotated_registration():
    with pytest.raises(ValueError, match="already registered"):
        register_objective("grpo")(lambda inputs, params: None)

    def no_params(inputs, params):  # no annotation: the registry cannot know its hyper-parameters
        return None

    with pytest.raises(TypeError, match="params"):
        register_objective("test_unannotated")(no_params)
    assert "test_unannotated" not in objective_names()


def test_make_params_and_type_check():
    assert make_params("llds", lam=0.1) == LldsParams(lam=0.1)
    with pytest.raises(ValueError):
        make_params("llds", lam=-0.1)
    with pytest.raises(TypeError, match="LldsParams"):
        compute_objective("llds", _inputs(), GrpoParams())


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (GrpoParams, {"eps_low": 1.0}),
        (GrpoParams, {"eps_high": -0.1}),
        (GrpoParams, {"dual_clip_c": 1.0}),
        (GrpoParams, {"kl_beta": -1.0}),
        (GspoParams, {"eps_low": -1e-4}),
    ],
)
def test_params_validation(cls, kwargs):
    with pytest.raises(ValueError):
        cls(**kwargs)


def test_loss_inputs_shape_validation():
    logp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="advantages"):
        LossInputs(logp=logp, logp_old=logp, advantages=torch.zeros(3), mask=logp)
    with pytest.raises(ValueError, match="mask"):
        LossInputs(logp=logp, logp_old=logp, advantages=torch.zeros(2), mask=torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        LossInputs(logp=torch.zeros(6), logp_old=logp, advantages=torch.zeros(2), mask=logp)
    # (B,) and (B, T) advantages broadcast to the same tokens
    a = LossInputs(logp=logp, logp_old=logp, advantages=torch.tensor([1.0, -1.0]), mask=logp)
    torch.testing.assert_close(a.token_advantages(), torch.tensor([[1.0] * 3, [-1.0] * 3]))


def _inputs():
    g = torch.Generator().manual_seed(9)
    logp = (-torch.rand(3, 5, generator=g)).requires_grad_()
    mask = torch.ones(3, 5)
    mask[1, 3:] = 0
    return LossInputs(logp=logp, logp_old=logp.detach() + 0.5 * torch.randn(3, 5, generator=g),
                      advantages=torch.tensor([1.0, -1.0, 0.5]), mask=mask.bool(), turn_ids=torch.zeros(3, 5),
                      logp_ref=logp.detach() - 0.1)  # sampo's default β = 0.01 needs a reference


@pytest.mark.parametrize("name", BUILT_IN)
def test_output_contract(name):
    # (B, T) loss with a graph; intermediates (B, T), detached; boolean flags False wherever mask = 0.
    inputs = _inputs()
    out = compute_objective(name, inputs)
    assert isinstance(out, ObjectiveOutput)
    assert out.loss.shape == (3, 5) and out.loss.requires_grad
    assert {"log_ratio", "ratio", "log_ratio_clamped"} <= set(out.intermediates)
    for key, value in out.intermediates.items():
        assert value.shape == (3, 5), key
        assert not value.requires_grad, key
        if value.dtype == torch.bool:
            assert not value[~inputs.mask].any(), key
