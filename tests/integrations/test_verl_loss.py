"""The ``collapsewatch`` policy loss against verl's own (PyPI verl 0.9.1, driven for real through its registry):
exactly the wrapped loss, metrics and gradients; and the TokenBatch it records. Runs in .venv-verl (``make test``)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.workers.config import FSDPActorConfig, PolicyLossConfig  # noqa: E402

from collapsewatch.integrations import verl as cw_verl  # noqa: E402

MODES = ("vanilla", "gspo", "sapo", "cispo", "clip_cov", "kl_cov", "geo_mean", "dppo_tv", "gpg")
AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def actor_config(loss_mode: str, **kw) -> FSDPActorConfig:
    return FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, rollout_n=1,
                           policy_loss=PolicyLossConfig(loss_mode=loss_mode), **kw)


def _run(mode_name: str, wrapped: str, agg: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    B, T = 4, 7
    old = -torch.rand(B, T, generator=g) * 3  # (B, T)
    logp = (old + 0.4 * torch.randn(B, T, generator=g)).requires_grad_(True)  # (B, T) ratios ~ e^{±0.4}
    adv = torch.randn(B, 1, generator=g).expand(B, T).clone()  # (B, T) per sequence, broadcast
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 5:] = False
    mask[3, 2:] = False
    cfg = actor_config(mode_name, clip_ratio_low=0.2, clip_ratio_high=0.28)
    loss, metrics = get_policy_loss_fn(mode_name)(old_log_prob=old, log_prob=logp, advantages=adv,
                                                 response_mask=mask, loss_agg_mode=agg, config=cfg,
                                                 rollout_is_weights=None)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), metrics, grad


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("agg", AGGS)
def test_wrapper_returns_exactly_the_wrapped_loss_metrics_and_gradient(mode, agg, monkeypatch):
    monkeypatch.delenv(cw_verl.ENV_STORE, raising=False)  # pass-through: parity of the returned values only
    ref = _run(mode, mode, agg, seed=7)
    got = _run(f"collapsewatch.{mode}", mode, agg, seed=7)
    # bit-for-bit: the wrapper calls verl's function on the very same tensors (max abs diff 0.0)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[2], ref[2])
    assert got[1] == ref[1]
    assert (got[2] != 0).any()  # a gradient that exists (the comparison above is not between two zeros)


def test_vanilla_through_the_wrapper_by_hand(monkeypatch):
    # B=1, T=3, logp_old = 0, logp = [ln 1.5, ln 0.5, 0] → r = [1.5, 0.5, 1]; A = [1, 1, −1]; ε = 0.2; token-mean.
    # token 1: A>0, r=1.5 → clipped at 1.2 → loss −1.2, no gradient (the clipped branch is constant)
    # token 2: A>0, r=0.5 → max(−0.5, −0.8) = −0.5, d/dlogp (−A·r) = −0.5
    # token 3: A<0, r=1   → max(1, 1) = 1 (dual clip c=3 not reached), d/dlogp (−A·r) = +1
    # loss = (−1.2 − 0.5 + 1)/3 = −0.2333…; grad = [0, −0.5, 1]/3; pg_clipfrac = 1/3 (token 1), ppo_kl = mean(−log r)
    monkeypatch.delenv(cw_verl.ENV_STORE, raising=False)
    logp = torch.tensor([[math.log(1.5), math.log(0.5), 0.0]], requires_grad=True)
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    cfg = actor_config("collapsewatch", clip_ratio=0.2)
    loss, metrics = get_policy_loss_fn("collapsewatch")(old, logp, adv, mask, "token-mean", cfg)
    (grad,) = torch.autograd.grad(loss, logp)
    assert loss.item() == pytest.approx(-0.7 / 3, abs=1e-6)
    assert grad.tolist()[0] == pytest.approx([0.0, -0.5 / 3, 1.0 / 3], abs=1e-6)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(1 / 3)
    assert metrics["actor/ppo_kl"] == pytest.approx(-(math.log(1.5) + math.log(0.5)) / 3)


def test_wrapped_mode_comes_from_the_loss_mode_or_the_environment(monkeypatch):
    monkeypatch.delenv(cw_verl.ENV_WRAPPED, raising=False)
    assert cw_verl.wrapped_mode("collapsewatch") == "vanilla"
    assert cw_verl.wrapped_mode("collapsewatch.gspo") == "gspo"
    monkeypatch.setenv(cw_verl.ENV_WRAPPED, "cispo")
    assert cw_verl.wrapped_mode("collapsewatch") == "cispo"
    monkeypatch.setenv(cw_verl.ENV_WRAPPED, "collapsewatch")
    with pytest.raises(ValueError, match="cannot wrap itself"):
        cw_verl.wrapped_mode("collapsewatch")


def test_clip_spec_follows_verls_clip_settings():
    cfg = actor_config("collapsewatch", clip_ratio=0.2, clip_ratio_high=0.28)
    spec = cw_verl.clip_spec(cfg, "vanilla")
    assert (spec.eps_low, spec.eps_high, spec.dual_clip) == (0.2, 0.28, 3.0)
    assert cw_verl.clip_spec(cfg, "gspo").eps_low is None  # gspo clips the sequence ratio: token flags NULL


def test_import_verl_alone_loads_the_plugin(tmp_path):
    # a fresh interpreter, as in a Ray worker: `import verl` loads collapsewatch's verl.plugins entry point, which
    # registers the loss modes; with COLLAPSEWATCH_STORE set, importing verl's trainer gets the driver hook
    # (without it, verl_plugin installs nothing: one line, read there)
    code = ("import verl\n"
            "from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY as R\n"
            "from verl.trainer.ppo.ray_trainer import RayPPOTrainer\n"
            "print('collapsewatch' in R, 'collapsewatch.gspo' in R,"
            " getattr(RayPPOTrainer._update_actor, '_collapsewatch', False))\n")
    env = {**os.environ, cw_verl.ENV_STORE: str(tmp_path / "store")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "True True True"


def test_verls_clip_metrics_are_the_catalogues_clip_flags(monkeypatch):
    # The ingest mapping (collapsewatch.ingest.KEY_MAP) says actor/pg_clipfrac = clip_region_frac, actor/pg_clipfrac_lower
    # = dual_clip_frac, actor/ppo_kl = ppo_kl. By hand: verl's clipped branch −A·clip(r) beats −A·r exactly when
    # A > 0 ∧ r > 1+ε_h or A < 0 ∧ r < 1−ε_l (TRL's clip_high / clip_low); its dual-clip count, −A·max(r, 1−ε_l) > −A·c
    # with A < 0, is r > c. Checked on 64 × 16 tokens with r = e^{±2} so every case occurs.
    from collapsewatch.policy_math import clamped_log_ratio, clip_flags

    monkeypatch.delenv(cw_verl.ENV_STORE, raising=False)
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(64, 16, generator=g) * 3
    logp = old + 2 * (2 * torch.rand(64, 16, generator=g) - 1)  # log r uniform in [−2, 2]
    adv = torch.randn(64, 16, generator=g).round()  # −2 … 2, zeros included
    mask = torch.rand(64, 16, generator=g) > 0.2
    cfg = actor_config("vanilla", clip_ratio=0.2, clip_ratio_high=0.28)
    _, verl_m = get_policy_loss_fn("vanilla")(old, logp, adv, mask, "token-mean", cfg)
    log_r, _ = clamped_log_ratio(logp, old)
    flags = clip_flags(torch.exp(log_r), adv, mask, 0.2, 0.28, dual_clip=3.0)
    n = mask.sum()
    assert flags["clip_region"].sum() > 0 and flags["dual_clip"].sum() > 0  # the cases exist
    assert verl_m["actor/pg_clipfrac"] == pytest.approx((flags["clip_region"].sum() / n).item(), abs=1e-6)
    assert verl_m["actor/pg_clipfrac_lower"] == pytest.approx((flags["dual_clip"].sum() / n).item(), abs=1e-6)
    assert verl_m["actor/ppo_kl"] == pytest.approx((-(log_r * mask).sum() / n).item(), abs=1e-6)
