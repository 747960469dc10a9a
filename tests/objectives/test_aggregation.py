"""Aggregation modes: hand sums, parity with verl's agg_loss, and gradient accumulation 1×N == N×1."""

import pytest
import torch

from collapsewatch.objectives import (
    AGGREGATIONS,
    LossInputs,
    SapoSearchParams,
    aggregate,
    aggregation_normalizer,
    compute_objective,
)

from .references import verl_agg_loss

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_hand_sums():
    # token_mean:              (1 + 2 + 4) / 3 tokens                     = 7/3
    # seq_mean_token_mean:     ((1 + 2)/2 + 4/1) / 2 sequences             = (1.5 + 4) / 2 = 2.75
    # seq_mean_token_sum_norm: ((1 + 2)/L + 4/L) / 2, L = T = 3            = (1 + 4/3) / 2 = 7/6
    #                          with L = 4                                  = (0.75 + 1) / 2 = 0.875
    assert aggregate(LOSS, MASK, "token_mean").item() == pytest.approx(7 / 3)
    assert aggregate(LOSS, MASK, "seq_mean_token_mean").item() == pytest.approx(2.75)
    assert aggregate(LOSS, MASK, "seq_mean_token_sum_norm").item() == pytest.approx(7 / 6)
    assert aggregate(LOSS, MASK, "seq_mean_token_sum_norm", max_len=4).item() == pytest.approx(0.875)


def test_explicit_normalizer_replaces_the_micro_batch_denominator():
    # token_mean with N = 10 instead of 3: 7/10;  seq modes with S = 4 instead of 2: 5.5/4 and (7/3)/4.
    assert aggregate(LOSS, MASK, "token_mean", normalizer=10.0).item() == pytest.approx(0.7)
    assert aggregate(LOSS, MASK, "seq_mean_token_mean", normalizer=4).item() == pytest.approx(5.5 / 4)
    assert aggregate(LOSS, MASK, "seq_mean_token_sum_norm", normalizer=4).item() == pytest.approx(7 / 3 / 4)


def test_empty_sequence_and_empty_batch():
    # Row 1 has no loss token: it adds 0 but still counts as a sequence → (1 + 0) / 2 = 0.5 (TRL's clamp(min=1)).
    loss = torch.tensor([[1.0, 1.0], [5.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert aggregate(loss, mask, "seq_mean_token_mean").item() == pytest.approx(0.5)
    assert aggregate(loss, torch.zeros_like(mask), "token_mean").item() == 0.0


def test_unknown_mode_lists_known_ones():
    with pytest.raises(ValueError, match="seq_mean_token_mean"):
        aggregate(LOSS, MASK, "seq-mean-token-mean")
    with pytest.raises(ValueError, match="token_mean"):
        aggregation_normalizer("dapo", [MASK])


def test_parity_with_verl_agg_loss():
    g = torch.Generator().manual_seed(4)
    loss = torch.randn(5, 9, generator=g)
    mask = (torch.rand(5, 9, generator=g) > 0.3).float()
    mask[:, 0] = 1.0  # verl's seq-mean-token-mean divides 0 by 0 for an empty row
    torch.testing.assert_close(aggregate(loss, mask, "token_mean"), verl_agg_loss(loss, mask, "token-mean"))
    torch.testing.assert_close(
        aggregate(loss, mask, "seq_mean_token_mean"), verl_agg_loss(loss, mask, "seq-mean-token-mean")
    )
    # verl's seq-mean-token-sum-norm sums over the micro-batch's sequences instead of averaging (TRL's dr_grpo and
    # Dr. GRPO average): verl = B × ours.
    torch.testing.assert_close(
        5 * aggregate(loss, mask, "seq_mean_token_sum_norm"), verl_agg_loss(loss, mask, "seq-mean-token-sum-norm")
    )


# ---- gradient accumulation ---------------------------------------------------------------------------------------
N, T = 6, 7


def _rollout(seed=5):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(N, T, generator=g, dtype=torch.float64)  # the "model": logp = −softplus(θ)
    logp_old = -torch.nn.functional.softplus(theta + 0.3 * torch.randn(N, T, generator=g, dtype=torch.float64))
    lengths = torch.tensor([7, 2, 5, 3, 6, 1])  # very different token counts per sequence
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).double()
    adv = torch.tensor([1.0, -0.5, 0.3, -1.2, 0.0, 0.8], dtype=torch.float64)
    return theta, logp_old, mask, adv


def _grad(objective, params, mode, micro_rows, use_normalizer=True):
    theta, logp_old, mask, adv = _rollout()
    theta.requires_grad_()
    norm = aggregation_normalizer(mode, [mask[rows] for rows in micro_rows]) if use_normalizer else None
    for rows in micro_rows:
        logp = -torch.nn.functional.softplus(theta[rows])  # (b, T)
        inputs = LossInputs(logp=logp, logp_old=logp_old[rows], advantages=adv[rows], mask=mask[rows])
        out = compute_objective(objective, inputs, params)
        loss = aggregate(out.loss, mask[rows], mode, normalizer=norm, max_len=T)
        if not use_normalizer:
            loss = loss / len(micro_rows)  # the naive "divide by accumulation steps"
        loss.backward()
    return theta.grad


OBJECTIVES = [
    ("grpo", None),
    ("gspo", None),
    ("sapo_soft", None),
    ("llds", None),
    ("sapo_search", SapoSearchParams(tau=1.0, denominator="loss_tokens")),
]


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize(("objective", "params"), OBJECTIVES)
def test_accumulation_1xN_equals_Nx1(mode, objective, params):
    full = _grad(objective, params, mode, [torch.arange(N)])
    split = _grad(objective, params, mode, [torch.tensor([i]) for i in range(N)])
    assert full.abs().sum() > 0
    torch.testing.assert_close(split, full)


def test_accumulation_without_global_normalizer_differs():
    # The control: averaging per-micro-batch token means weights short sequences more, so N×1 ≠ 1×N.
    full = _grad("grpo", None, "token_mean", [torch.arange(N)])
    naive = _grad("grpo", None, "token_mean", [torch.tensor([i]) for i in range(N)], use_normalizer=False)
    assert not torch.allclose(naive, full)


def test_normalizer_values():
    masks = [MASK, torch.ones(3, 3)]
    assert aggregation_normalizer("token_mean", masks).item() == 3 + 9
    assert aggregation_normalizer("seq_mean_token_mean", masks).item() == 2 + 3
    assert aggregation_normalizer("seq_mean_token_sum_norm", masks).item() == 2 + 3
