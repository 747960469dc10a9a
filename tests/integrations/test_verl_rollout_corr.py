"""TIS / MIS (``collapsewatch.objectives.correction``) against verl 0.9.1's own ``rollout_corr_helper`` and
``compute_policy_loss_vanilla``, driven for real: weights, rejection masks, metrics, the corrected loss and its
gradient. Runs in .venv-verl (``make test``).

The batch: B = 6 rows of T = 9 tokens, rows 2 and 5 right-padded; log ρ = logp_old − logp_rollout ~ 0.6·N(0, 1), so
some ratios pass every threshold below and some do not (each case asserts both kinds exist).
"""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla  # noqa: E402
from verl.trainer.ppo.rollout_corr_helper import (  # noqa: E402
    compute_rollout_correction_weights,
    compute_rollout_rejection_mask,
)
from verl.workers.config import FSDPActorConfig, PolicyLossConfig  # noqa: E402

from collapsewatch import TokenBatch  # noqa: E402
from collapsewatch.objectives import GrpoParams, aggregate, compute_objective  # noqa: E402
from collapsewatch.objectives.correction import (  # noqa: E402
    RS_OPTIONS,
    CorrectionParams,
    apply_correction,
    rollout_correction,
)


def batch(seed: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logp_old, logp_rollout, mask), (6, 9) float32 each."""
    g = torch.Generator().manual_seed(seed)
    rollout = -torch.rand(6, 9, generator=g) * 3
    old = rollout + 0.6 * torch.randn(6, 9, generator=g)
    mask = torch.ones(6, 9)
    mask[2, 6:] = 0
    mask[5, 3:] = 0
    return old, rollout, mask


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("threshold", [2.0, 1.3, "0.5_2.0"])
def test_is_weights_and_metrics_equal_verls(level, threshold):
    old, rollout, mask = batch()
    ours = rollout_correction(old, rollout, mask, CorrectionParams(is_level=level, is_threshold=threshold))
    ref_w, ref_m = compute_rollout_correction_weights(old - rollout, mask, rollout_is=level,
                                                      rollout_is_threshold=threshold)
    torch.testing.assert_close(ours.weights, ref_w, rtol=1e-6, atol=1e-6)
    assert ours.metrics["is_weight_mean"] == pytest.approx(ref_m["rollout_is_mean"], rel=1e-6)
    assert ours.metrics["is_truncated_frac"] == pytest.approx(ref_m["rollout_is_ratio_fraction_high"], rel=1e-6)  # verl: fp32
    assert ours.keep.eq(1).all()


CASES = [  # thresholds picked from this batch's statistics so that each keeps some rows / tokens and rejects some
    ("token_k1", 1.5), ("token_k1", "0.7_1.8"), ("token_k2", 0.1), ("token_k3", 0.1),
    ("seq_sum_k1", 2.0), ("seq_sum_k1", "0.2_3.0"), ("seq_sum_k2", 1.0), ("seq_sum_k3", 1.0),
    ("seq_mean_k1", 1.2), ("seq_mean_k1", "0.7_1.3"), ("seq_mean_k2", 0.2), ("seq_mean_k3", 0.2),
    ("seq_max_k2", 0.5), ("seq_max_k3", 0.5),
]


def _cases():
    assert {o for o, _ in CASES} == set(RS_OPTIONS)  # every option verl offers
    return CASES


@pytest.mark.parametrize(("option", "threshold"), list(_cases()))
def test_rejection_masks_equal_verls(option, threshold):
    old, rollout, mask = batch()
    ours = rollout_correction(old, rollout, mask, CorrectionParams(rs=option, rs_threshold=threshold))
    ref_mask, ref_m = compute_rollout_rejection_mask(old - rollout, mask, rollout_rs=option,
                                                     rollout_rs_threshold=threshold)
    assert torch.equal(mask * ours.keep, ref_mask.float())
    assert ours.metrics["rs_masked_frac"] == pytest.approx(ref_m["rollout_rs_masked_fraction"], abs=1e-7)
    assert ours.weights.eq(1).all()


def test_every_rejection_case_keeps_some_and_rejects_some():
    old, rollout, mask = batch()
    for option, threshold in _cases():
        kept = (mask * rollout_correction(old, rollout, mask, CorrectionParams(rs=option, rs_threshold=threshold)
                                          ).keep).sum()
        assert 0 < kept < mask.sum(), (option, threshold)


@pytest.mark.parametrize(("is_level", "rs"), [("token", None), ("sequence", "seq_sum_k1"), (None, "token_k1"),
                                              ("token", "seq_mean_k3")])
def test_corrected_grpo_loss_and_gradient_equal_verls_vanilla(is_level, rs):
    """grpo (dual clip c = 3, as verl's vanilla always applies) with the correction, token-mean, against
    ``compute_policy_loss_vanilla(rollout_is_weights=w, response_mask=verl's rejected mask)``."""
    old, rollout, mask = batch()
    g = torch.Generator().manual_seed(11)
    logp = (old + 0.3 * torch.randn(6, 9, generator=g)).requires_grad_(True)
    adv = torch.randn(6, 1, generator=g).expand(6, 9).clone()
    params = CorrectionParams(is_level=is_level, is_threshold=1.5, rs=rs,
                              rs_threshold=0.2 if rs == "seq_mean_k3" else 1.5)
    corr = rollout_correction(old, rollout, mask, params)
    out = compute_objective("grpo", TokenBatch(logp=logp, mask=mask, logp_old=old, advantages=adv),
                            GrpoParams(eps_low=0.2, eps_high=0.28, dual_clip_c=3.0))
    out, train_mask = apply_correction(out, mask, corr.weights, corr.keep)
    ours = aggregate(out.loss, train_mask, "token_mean")
    (our_grad,) = torch.autograd.grad(ours, logp)

    ref_mask = mask
    if rs is not None:
        ref_mask, _ = compute_rollout_rejection_mask(old - rollout, mask, rollout_rs=rs,
                                                     rollout_rs_threshold=params.rs_threshold)
    ref_w = None
    if is_level is not None:
        ref_w, _ = compute_rollout_correction_weights(old - rollout, mask, rollout_is=is_level,
                                                      rollout_is_threshold=1.5)
    cfg = FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, rollout_n=1,
                          clip_ratio_low=0.2, clip_ratio_high=0.28, policy_loss=PolicyLossConfig(loss_mode="vanilla"))
    ref, _ = compute_policy_loss_vanilla(old_log_prob=old, log_prob=logp, advantages=adv,
                                         response_mask=ref_mask.bool(), loss_agg_mode="token-mean", config=cfg,
                                         rollout_is_weights=ref_w)
    (ref_grad,) = torch.autograd.grad(ref, logp)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(our_grad, ref_grad, rtol=1e-5, atol=1e-8)
    assert (our_grad != 0).any() and train_mask.sum() < mask.sum() if rs else True
