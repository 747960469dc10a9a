"""llds: the per-turn gate fires exactly where a turn's summed displacement is positive; R-gate; parity with the
authors' verl fork on the same tensors."""

import pytest
import torch

from collapsewatch.objectives import GrpoParams, LldsParams, LossInputs, aggregate, compute_objective

from .references import llds_policy_loss

SYM = GrpoParams(eps_low=0.2, eps_high=0.2)  # the authors' Search-R1 clip

# One multi-turn response: mask = [1, 1, 0, 1, 1, 0, 1] → turns {t0, t1}, {t3, t4}, {t6}; t2, t5 are tool tokens.
MASK = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
TURNS = [0, 0, -1, 1, 1, -1, 2]
# Δ = logp_old − logp = −d, the authors' sign (> 0: likelihood went down; collapsewatch's displacement d = logp −
# logp_old is < 0 there, policy_math). Tool tokens carry a large Δ that must be ignored.
DELTA = [0.3, -0.1, 1.0, 0.2, -0.5, 1.0, 0.4]
# Turn sums: turn 0 = 0.3 − 0.1 = 0.2 > 0 → gate on;  turn 1 = 0.2 − 0.5 = −0.3 → off;  turn 2 = 0.4 → on.
# Response sum over model tokens = 0.2 − 0.3 + 0.4 = 0.3 > 0 → R-gate on.


def _inputs(adv, turn_ids=True, rows=1):
    delta = torch.tensor([DELTA] * rows, dtype=torch.float64)
    logp = (-delta).clone().requires_grad_()  # logp_old = 0 → Δ = −logp
    return LossInputs(
        logp=logp,
        logp_old=torch.zeros_like(logp),
        advantages=torch.tensor(adv, dtype=torch.float64),
        mask=torch.tensor([MASK] * rows, dtype=torch.float64),
        turn_ids=torch.tensor([TURNS] * rows) if turn_ids else None,
    )


@pytest.mark.parametrize("turn_ids", [True, False])
def test_turn_gate_fires_where_turn_sum_is_positive(turn_ids):
    # λ = 0.2; penalty = λ·g·max(0, Δ):
    #   turn 0 on:  t0 → 0.2·0.3 = 0.06, t1 → Δ < 0 → 0 (gated but not responsible)
    #   turn 1 off: t3 has Δ = 0.2 > 0 but its turn went up overall → 0
    #   turn 2 on:  t6 → 0.2·0.4 = 0.08
    # Same result whether turns come from turn_ids or from runs of the mask.
    inputs = _inputs([1.0], turn_ids=turn_ids)
    out = compute_objective("llds", inputs, LldsParams(base=SYM, lam=0.2, gate="turn"))
    assert out.intermediates["llds_gate"].tolist() == [[True, True, False, False, False, False, True]]
    expected = torch.tensor([[0.06, 0.0, 0.0, 0.0, 0.0, 0.0, 0.08]], dtype=torch.float64)
    torch.testing.assert_close(out.intermediates["llds_penalty"], expected)
    # The penalty adds −λ to dℓ/dlogp on gated tokens with Δ > 0 (compared with GRPO alone on a fresh leaf).
    (out.loss * inputs.mask).sum().backward()
    plain = _inputs([1.0], turn_ids=turn_ids)
    (compute_objective("grpo", plain, SYM).loss * plain.mask).sum().backward()
    torch.testing.assert_close(inputs.logp.grad - plain.logp.grad,
                               torch.tensor([[-0.2, 0.0, 0.0, 0.0, 0.0, 0.0, -0.2]], dtype=torch.float64))


def test_response_gate():
    # R-gate: one gate for the whole response, on (Σ = 0.3 > 0): every model token with Δ > 0 is penalised,
    # including t3 whose turn went up. Tool tokens (t2, t5) never: λ·[0.3, 0, 0, 0.2, 0, 0, 0.4].
    out = compute_objective("llds", _inputs([1.0]), LldsParams(base=SYM, lam=0.2, gate="response"))
    assert out.intermediates["llds_gate"].tolist() == [[True, True, False, True, True, False, True]]
    expected = torch.tensor([[0.06, 0.0, 0.0, 0.04, 0.0, 0.0, 0.08]], dtype=torch.float64)
    torch.testing.assert_close(out.intermediates["llds_penalty"], expected)


def test_gate_needs_nonnegative_advantage_and_includes_zero():
    # Same displacements in three rows: A = +1 (gated as above), A = −1 (never gated), A = 0 (zero counts as ≥ 0).
    out = compute_objective("llds", _inputs([1.0, -1.0, 0.0], rows=3), LldsParams(base=SYM))
    gate = out.intermediates["llds_gate"]
    assert gate[0].tolist() == gate[2].tolist() == [True, True, False, False, False, False, True]
    assert not gate[1].any()
    assert torch.all(out.intermediates["llds_penalty"][1] == 0)


def test_explicit_turn_ids_split_contiguous_model_tokens():
    # No tool token between turns, so runs of the mask see one turn: Σ = 0.3 − 0.1 + 0.2 − 0.5 = −0.1 → off.
    # turn_ids [0, 0, 1, 1] see two turns: turn 0 Σ = 0.2 → on (t0 penalised 0.2·0.3), turn 1 Σ = −0.3 → off.
    delta = torch.tensor([[0.3, -0.1, 0.2, -0.5]], dtype=torch.float64)
    kw = {"logp": -delta, "logp_old": torch.zeros_like(delta), "advantages": torch.tensor([1.0]),
          "mask": torch.ones_like(delta)}
    runs = compute_objective("llds", LossInputs(**kw), LldsParams(base=SYM))
    turns = compute_objective("llds", LossInputs(**kw, turn_ids=torch.tensor([[0, 0, 1, 1]])), LldsParams(base=SYM))
    assert not runs.intermediates["llds_gate"].any()
    assert turns.intermediates["llds_gate"].tolist() == [[True, True, False, False]]
    torch.testing.assert_close(turns.intermediates["llds_penalty"],
                               torch.tensor([[0.06, 0.0, 0.0, 0.0]], dtype=torch.float64))


@pytest.mark.parametrize("gate", ["turn", "response"])
def test_zero_summed_displacement_is_not_gated(gate):
    # Strict inequality, as the authors' ``sum_val > 0``: Δ = [0.25, −0.25] sums to exactly 0 → gate off, so the
    # token whose likelihood went down (Δ = 0.25) is not penalised.
    delta = torch.tensor([[0.25, -0.25]], dtype=torch.float64)
    inputs = LossInputs(logp=-delta, logp_old=torch.zeros_like(delta), advantages=torch.tensor([1.0]),
                        mask=torch.ones_like(delta))
    out = compute_objective("llds", inputs, LldsParams(base=SYM, gate=gate))
    assert not out.intermediates["llds_gate"].any()
    assert torch.all(out.intermediates["llds_penalty"] == 0)


def test_params_validation():
    with pytest.raises(ValueError):
        LldsParams(lam=-1.0)
    with pytest.raises(ValueError):
        LldsParams(gate="sequence")


def _authors_batch(seed):
    # Multi-turn responses: response (attention) mask covers model + tool tokens, the loss mask drops tool tokens.
    g = torch.Generator().manual_seed(seed)
    B, T = 8, 16
    logp = (-3.0 * torch.rand(B, T, generator=g, dtype=torch.float64)).requires_grad_()
    logp_old = logp.detach() + 0.5 * torch.randn(B, T, generator=g, dtype=torch.float64)
    lengths = torch.randint(6, T + 1, (B,), generator=g)
    eos_mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).double()  # (B, T)
    tool = torch.zeros(B, T, dtype=torch.float64)
    tool[:, 3:5] = 1.0  # an observation after the first turn
    tool[::2, 9:11] = 1.0  # a second observation in every other row
    loss_mask = eos_mask * (1.0 - tool)
    score = torch.tensor([1.0, -0.5, 0.0, 0.8, -1.2, 0.3, 0.0, -0.1], dtype=torch.float64)
    adv = score.unsqueeze(-1) * eos_mask  # (B, T) as verl's GRPO advantage (score × response mask)
    return logp, logp_old, adv, loss_mask


@pytest.mark.parametrize("gate", ["turn", "response"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_authors_code(gate, seed):
    # The authors' micro-batch loss: verl token-mean PPO-clip (ε = 0.2) + masked_mean(λ·g·max(0, Δ), loss mask),
    # A-gate = ``chunk_noreduce=True``, R-gate = False. Ours: llds aggregated with token_mean, turns from the mask.
    logp, logp_old, adv, loss_mask = _authors_batch(seed)
    expected = llds_policy_loss(logp_old, logp, adv, loss_mask, clip_ratio=0.2, no_reduce_lambda=0.2,
                                chunk_noreduce=gate == "turn")
    (expected_grad,) = torch.autograd.grad(expected, logp)
    inputs = LossInputs(logp=logp, logp_old=logp_old, advantages=adv, mask=loss_mask)
    out = compute_objective("llds", inputs, LldsParams(base=SYM, lam=0.2, gate=gate))
    gate_map = out.intermediates["llds_gate"]
    assert gate_map.any() and (gate_map != (loss_mask > 0) & (adv >= 0)).any()  # gates both on and off
    ours = aggregate(out.loss, loss_mask, "token_mean")
    (ours_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours_grad, expected_grad)


def test_loss_terms_are_reported_and_sum_to_the_loss():
    # The turn-gate example above: penalty λ·g·max(0, −d) = [0.06, 0, 0, 0, 0, 0, 0.08] is the loss_penalty term;
    # the GRPO clip term is loss_policy; together they are the per-token loss (what the trainer logs per step).
    out = compute_objective("llds", _inputs([1.0]), LldsParams(base=SYM, lam=0.2))
    assert set(out.terms) == {"loss_policy", "loss_penalty"}
    torch.testing.assert_close(out.terms["loss_penalty"],
                               torch.tensor([[0.06, 0.0, 0.0, 0.0, 0.0, 0.0, 0.08]], dtype=torch.float64))
    torch.testing.assert_close(out.terms["loss_policy"] + out.terms["loss_penalty"], out.loss.detach())


def test_objective_names_the_missing_fields():
    from collapsewatch import TokenBatch

    with pytest.raises(ValueError, match=r"objective 'llds' needs TokenBatch.logp_old and TokenBatch.advantages"):
        compute_objective("llds", TokenBatch(logp=torch.zeros(1, 2), mask=torch.ones(1, 2)))
