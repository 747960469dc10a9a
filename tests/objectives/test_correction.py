"""Rollout correction (TIS / MIS) on a hand-built batch; verl parity: tests/integrations/test_verl_rollout_corr.py.

log ρ = logp_old − logp_rollout, with logp_rollout = 0 so that log ρ = logp_old exactly:
    row 0: ρ = [3, 1, 0.5], mask [1, 1, 1]
    row 1: ρ = [1.5, 4, 1],  mask [1, 0, 1]      (the ρ = 4 token is off the mask: it must never count)
"""

from __future__ import annotations

import math

import pytest
import torch

from collapsewatch.objectives.correction import (
    CorrectionParams,
    correction_params,
    is_weights,
    rejection_keep,
    rollout_correction,
)

LN = math.log
RHO = torch.tensor([[3.0, 1.0, 0.5], [1.5, 4.0, 1.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]], dtype=torch.float64)


def flat(t: torch.Tensor) -> list[float]:
    return t.flatten().tolist()


def corr(**kw):
    return rollout_correction(RHO.log(), torch.zeros_like(RHO), MASK, CorrectionParams(**kw))


def test_token_tis_truncates_at_c():
    c = corr(is_level="token", is_threshold=2.0)
    # min(ρ, 2) on the mask, 0 off it
    assert flat(c.weights) == pytest.approx([2.0, 1.0, 0.5, 1.5, 0.0, 1.0])
    assert c.keep.eq(1).all()
    # mean over 5 mask tokens: (2 + 1 + 0.5 + 1.5 + 1) / 5 = 1.2; one of 5 tokens has ρ > 2
    assert c.metrics == pytest.approx({"is_weight_mean": 1.2, "is_truncated_frac": 0.2})


def test_sequence_tis_uses_the_product_of_the_rows_ratios():
    # row 0: 3 · 1 · 0.5 = 1.5; row 1: 1.5 · 1 = 1.5 (the off-mask 4 is left out)
    c = corr(is_level="sequence", is_threshold=2.0)
    assert flat(c.weights) == pytest.approx([1.5, 1.5, 1.5, 1.5, 0.0, 1.5])
    assert c.metrics == pytest.approx({"is_weight_mean": 1.5, "is_truncated_frac": 0.0})
    c = corr(is_level="sequence", is_threshold=1.2)  # both rows above C = 1.2: truncated to it
    assert flat(c.weights) == pytest.approx([1.2, 1.2, 1.2, 1.2, 0.0, 1.2])
    assert c.metrics == pytest.approx({"is_weight_mean": 1.2, "is_truncated_frac": 1.0})


def test_icepop_zeroes_weights_outside_the_band():
    # band [0.5, 2]: ρ = 3 → 0, the boundary 0.5 is kept; mean (0 + 1 + 0.5 + 1.5 + 1) / 5 = 0.8
    w, raw = is_weights(RHO.log(), MASK, "token", "0.5_2")
    assert flat(w) == pytest.approx([0.0, 1.0, 0.5, 1.5, 0.0, 1.0])
    assert raw[0, 0] == pytest.approx(3.0)


@pytest.mark.parametrize(("option", "threshold", "keep", "masked"), [  # keep: on the mask (off it, mask × keep = 0)
    # k1 = −log ρ within [ln(1/2), ln 2]  ⇔  ρ ∈ [0.5, 2]: only ρ = 3 fails → 1 of 5 masked
    ("token_k1", 2.0, [[0, 1, 1], [1, 1, 1]], 0.2),
    # k3 = ρ − 1 − ln ρ ≤ 0.5: ρ = 3 → 2 − 1.0986 = 0.90 fails; 0.5 → 0.19, 1.5 → 0.095, 1 → 0 pass
    ("token_k3", 0.5, [[0, 1, 1], [1, 1, 1]], 0.2),
    # Σ k1 per row = −ln 1.5 = −0.405 for both rows: inside [−ln 2, ln 2], outside [−ln 1.2, ln 1.2] = ±0.182
    ("seq_sum_k1", 2.0, [[1, 1, 1], [1, 1, 1]], 0.0),
    ("seq_sum_k1", 1.2, [[0, 0, 0], [0, 0, 0]], 1.0),
    # mean k1: row 0 −0.405/3 = −0.135 (kept), row 1 −0.405/2 = −0.203 (< −0.182: rejected, its 2 mask tokens)
    ("seq_mean_k1", 1.2, [[1, 1, 1], [0, 0, 0]], 0.4),
    # max of k2 = ½ ln²ρ: row 0 ½ ln²3 = 0.603 > 0.5 (rejected, 3 tokens); row 1 ½ ln²1.5 = 0.082 (the off-mask
    # ρ = 4, ½ ln²4 = 0.96, is ignored)
    ("seq_max_k2", 0.5, [[0, 0, 0], [1, 1, 1]], 0.6),
    # explicit k1 bounds "l_u" on −log ρ: [ln 0.6, ln 2.5] ⇔ ρ ∈ [0.4, 1/0.6 = 1.67]: ρ = 3 fails
    ("token_k1", "0.6_2.5", [[0, 1, 1], [1, 1, 1]], 0.2),
])
def test_rejection_options(option, threshold, keep, masked):
    c = corr(rs=option, rs_threshold=threshold)
    assert (c.keep * MASK).tolist() == (torch.tensor(keep, dtype=torch.float64) * MASK).tolist()
    assert c.weights.eq(1).all()
    assert c.metrics == pytest.approx({"rs_masked_frac": masked})


def test_sequence_mis_combines_weight_and_rejection():
    # verl's seq-MIS preset: sequence IS + seq_sum_k1; C = 2 for both → weights 1.5, nothing rejected
    c = corr(is_level="sequence", is_threshold=2.0, rs="seq_sum_k1", rs_threshold=2.0)
    assert c.keep.eq(1).all() and c.metrics["rs_masked_frac"] == 0.0
    assert c.metrics["is_weight_mean"] == pytest.approx(1.5)


def test_extreme_ratios_are_clamped_before_exp():
    # log ρ = 50 is clamped to 20 before exp: the raw weight is e²⁰, then truncated to C
    w, raw = is_weights(torch.tensor([[50.0]], dtype=torch.float64), torch.ones(1, 1), "token", 2.0)
    assert raw.item() == pytest.approx(math.exp(20.0)) and w.item() == 2.0
    keep = rejection_keep(torch.tensor([[50.0]]), torch.ones(1, 1), "token_k3", 1e9)  # e²⁰ − 21 < 1e9
    assert keep.item() == 1.0


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match="correction.is_level"):
        CorrectionParams(is_level="turn")
    with pytest.raises(ValueError, match="correction.rs: 'token_k4'"):
        CorrectionParams(rs="token_k4")
    with pytest.raises(ValueError, match="correction.rs_threshold"):
        CorrectionParams(rs="token_k3", rs_threshold="0.5_2")  # k3 has an upper bound only
    with pytest.raises(ValueError, match="correction.is_threshold"):
        CorrectionParams(is_level="token", is_threshold="2_1")  # lower > upper
    with pytest.raises(ValueError, match="unknown key"):
        correction_params({"rollout_is": "token"})
    assert not CorrectionParams().active and CorrectionParams(rs="token_k1").active
