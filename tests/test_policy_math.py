"""One home for the ratio, its clamp, the clip flags, displacement and the LLDS gate: the objectives and the probe
compute the same numbers on the same batch."""

from __future__ import annotations

import math

import pytest
import torch

from collapsewatch import TokenBatch
from collapsewatch.objectives import GspoParams, LldsParams, compute_objective, default_aggregation
from collapsewatch.policy_math import clamped_log_ratio, displacement, llds_gate, llds_gate_counts
from collapsewatch.probe import ClipSpec, sequence_metrics, token_metrics, turn_gate_counts
from collapsewatch.step_metrics import compute_step_metrics, observe_part

LN = math.log


def test_displacement_sign_and_clamp_count():
    # d = logp − logp_old: [ln 0.5, 0, 25]: negative = likelihood went down; 25 > 20 is clamped and counted
    logp_old = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.tensor([[LN(0.5), 0.0, 25.0]], dtype=torch.float64)
    assert displacement(logp, logp_old)[0].tolist() == pytest.approx([LN(0.5), 0.0, 25.0])
    log_ratio, clamped = clamped_log_ratio(logp, logp_old)
    assert log_ratio[0].tolist() == pytest.approx([LN(0.5), 0.0, 20.0]) and clamped.tolist() == [[False, False, True]]


def _random_batch(seed: int, turn_ids: bool) -> TokenBatch:
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 12
    logp_old = -3 * torch.rand(B, T, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T)
    mask[:, 4:6] = 0  # a tool observation between two turns
    mask[::2, 10:] = 0  # padding
    turns = torch.where(torch.arange(T) < 5, 0, 1).expand(B, T).clone()
    return TokenBatch(logp=logp_old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64), mask=mask,
                      logp_old=logp_old, advantages=torch.tensor([1.0, -0.5, 0.0, 0.7, -1.0, 0.2], dtype=torch.float64),
                      turn_ids=turns if turn_ids else None, on_policy=False)


@pytest.mark.parametrize("turn_ids", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_probe_gate_rate_equals_the_objectives_gate(seed, turn_ids):
    b = _random_batch(seed, turn_ids)
    gate = compute_objective("llds", b, LldsParams()).intermediates["llds_gate"]  # (B, T) tokens of gated turns
    # count the (row, turn) pairs the objective switched on; without turn ids a turn is a run of the mask
    T = b.mask.shape[1]
    if turn_ids:
        turn = b.turn_ids
    else:
        on = b.mask > 0
        starts = on & ~torch.nn.functional.pad(on[:, :-1], (1, 0), value=False)
        turn = starts.long().cumsum(1)
    gated_turns = {(i, int(turn[i, t])) for i in range(b.mask.shape[0]) for t in range(T) if gate[i, t]}
    eligible = (b.mask > 0) & (b.advantages[:, None] >= 0)
    all_turns = {(i, int(turn[i, t])) for i in range(b.mask.shape[0]) for t in range(T) if eligible[i, t]}
    counts = turn_gate_counts(b, token_metrics(b, ClipSpec()))
    assert counts.tolist() == [len(gated_turns), len(all_turns)]
    assert 0 < len(gated_turns) < len(all_turns)  # the batch exercises both outcomes
    s = compute_step_metrics([observe_part(b, ClipSpec())])
    assert s["llds_gate_rate"] == pytest.approx(len(gated_turns) / len(all_turns))
    assert llds_gate_counts(displacement(b.logp, b.logp_old), eligible, b.turn_ids).tolist() == counts.tolist()


def test_gate_fires_on_negative_summed_displacement():
    # one response, turns [0, 0, 1]: d = [−0.5, 0.25, 0.25]: turn 0 Σ = −0.25 < 0 (went down) -> gated; turn 1 not
    d = torch.tensor([[-0.5, 0.25, 0.25]])
    eligible = torch.ones(1, 3, dtype=torch.bool)
    assert llds_gate(d, eligible, torch.tensor([[0, 0, 1]])).tolist() == [[True, True, False]]
    assert llds_gate(d, eligible, None, "response").tolist() == [[False, False, False]]  # Σ = 0: not < 0


def test_gspo_clip_flags_are_the_objectives_sequence_flags():
    # Two sequences of 2 tokens, A = [−1, +1]; log r = [[0.1, −0.1], [0.002, 0.0]] -> s = [e^0, e^0.001].
    # Sequence level (GSPO's ε 3e-4 / 4e-4): s_0 = 1 is not clipped; s_1 = 1.001 > 1.0004 with A > 0: clip_high on
    # both of seq 1's tokens -> clip_high_frac 2/4, clip_low_frac 0.
    # Token level (what main stored): seq 0 token 1 r = e^−0.1 < 0.9997 with A < 0 -> clip_low; seq 1 token 0
    # r = e^0.002 > 1.0004 with A > 0 -> clip_high; seq 1 token 1 r = 1 -> none: 1/4 and 1/4.
    logp_old = torch.zeros(2, 2, dtype=torch.float64)
    logp = torch.tensor([[0.1, -0.1], [0.002, 0.0]], dtype=torch.float64)
    b = TokenBatch(logp=logp, mask=torch.ones(2, 2), logp_old=logp_old, on_policy=False,
                   advantages=torch.tensor([-1.0, 1.0], dtype=torch.float64))
    params = GspoParams()
    obj = compute_objective("gspo", b, params).intermediates
    spec = ClipSpec(params.eps_low, params.eps_high, level="sequence")
    tok = token_metrics(b, spec)
    for flag in ("clip_low", "clip_high"):
        assert torch.equal(tok[flag], obj[flag]), flag
    assert tok["clip_high"].tolist() == [[False, False], [True, True]]
    s = compute_step_metrics([observe_part(b, spec)])
    assert (s["clip_high_frac"], s["clip_low_frac"], s["clip_region_frac"]) == (0.5, 0.0, 0.5)
    token_level = compute_step_metrics([observe_part(b, ClipSpec(params.eps_low, params.eps_high))])
    assert (token_level["clip_low_frac"], token_level["clip_high_frac"]) == (0.25, 0.25)


def test_each_objective_has_its_papers_aggregation():
    assert default_aggregation("gspo") == default_aggregation("sapo_soft") == "seq_mean_token_mean"
    assert {default_aggregation(n) for n in ("grpo", "sapo_search", "llds")} == {"token_mean"}


def test_nan_reward_is_unknown_in_every_reward_metric():
    # rewards [1, 0, NaN], threshold 1: seq 2 is neither correct nor incorrect.
    b = TokenBatch(logp=torch.full((3, 2), -1.0, dtype=torch.float64), mask=torch.ones(3, 2),
                   logp_old=torch.tensor([[-1.0] * 2, [-2.0] * 2, [-3.0] * 2], dtype=torch.float64),
                   rewards=torch.tensor([1.0, 0.0, float("nan")], dtype=torch.float64), on_policy=False)
    seq = sequence_metrics(b, token_metrics(b, ClipSpec()), ClipSpec())
    assert seq["correct"][:2].tolist() == [1.0, 0.0] and math.isnan(seq["correct"][2])
    s = compute_step_metrics([observe_part(b, ClipSpec())])
    assert s["correct_frac"] == 0.5  # 1 of the 2 known
    assert s["logp_old_mean_correct"] == -1.0
    assert s["logp_old_mean_incorrect"] == -2.0  # main: (−2 − 3)/2, the NaN reward counted as incorrect
    assert s["displacement_mean_incorrect"] == pytest.approx(1.0)  # d = −1 − (−2) on seq 1 only
    assert s["reward_mean"] == 0.5


def test_repeat_frac_max_is_length_aware():
    # 1 token: NULL (main scored 1.0); 8 tokens "!!!!!!!!": 1.0; 8 tokens with 6 × '5': 6/8
    ids = torch.tensor([[9] + [0] * 7, [3] * 8, [5, 5, 5, 1, 5, 5, 2, 5]])
    mask = torch.ones(3, 8)
    mask[0, 1:] = 0
    b = TokenBatch(logp=torch.zeros(3, 8), mask=mask, token_ids=ids)
    rep = sequence_metrics(b, token_metrics(b, ClipSpec()), ClipSpec())["repeat_frac_max"].tolist()
    assert math.isnan(rep[0]) and rep[1:] == [1.0, 0.75]
