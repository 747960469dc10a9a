"""Step-level metrics: computed once over every part (micro-batch) observed for a step.

Runs on the recorder thread, so the one host copy at the end never stalls the training thread.
Definitions: :data:`collapsewatch.catalogue.STEP_METRICS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .batch import group_zero_std
from .catalogue import STEP_METRICS
from .probe import NONFINITE_ORDER, QUANTILES, ClipSpec, masked_quantiles


@dataclass
class ObservedPart:
    """What the probe derived from one TokenBatch: token tensors (B, T), sequence tensors (B,)."""

    tok: dict[str, Tensor]
    seq: dict[str, Tensor]
    gate: Tensor | None  # (2,) gated turns, A ≥ 0 turns
    nonfinite: dict[str, Tensor]  # tensor name -> count (0-dim)
    clip: ClipSpec
    group_ids: Tensor | None = None  # (B,)
    seq_ids: Tensor = field(default_factory=lambda: torch.zeros(0))  # (B,)
    group_zero_std: Tensor | None = None  # (B,) bool, whole-group flag from the trainer


def _cat_tok(parts: list[ObservedPart], key: str) -> Tensor | None:
    if any(key not in p.tok for p in parts):
        return None
    return torch.cat([p.tok[key].flatten() for p in parts])


def _cat_seq(parts: list[ObservedPart], key: str) -> Tensor | None:
    if any(key not in p.seq for p in parts):
        return None
    return torch.cat([p.seq[key].flatten() for p in parts])


def _mean(x: Tensor, m: Tensor) -> Tensor:
    return torch.where(m, x, torch.zeros_like(x)).sum() / m.sum()


def _ratio_stats(ratio: Tensor, adv: Tensor, m: Tensor, out: dict[str, Tensor]) -> None:
    qs = torch.tensor(list(QUANTILES.values()), dtype=ratio.dtype, device=ratio.device)
    for sign, pop in (("pos", m & (adv > 0)), ("neg", m & (adv < 0))):
        for name, v in zip(QUANTILES, masked_quantiles(ratio, pop, qs), strict=True):
            out[f"ratio_{name}_{sign}"] = v
        nan = torch.tensor(float("nan"), dtype=ratio.dtype, device=ratio.device)
        has = pop.any()
        out[f"ratio_min_{sign}"] = torch.where(has, torch.where(pop, ratio, ratio.new_tensor(math.inf)).min(), nan)
        out[f"ratio_max_{sign}"] = torch.where(has, torch.where(pop, ratio, ratio.new_tensor(-math.inf)).max(), nan)
        out[f"ratio_mean_{sign}"] = _mean(ratio, pop)
    pos = m & (adv > 0)
    out["ratio_lt_0_5_frac_pos"] = _mean((ratio < 0.5).to(ratio.dtype), pos)
    out["ratio_lt_0_1_frac_pos"] = _mean((ratio < 0.1).to(ratio.dtype), pos)


def _clip_stats(parts: list[ObservedPart], m: Tensor, ratio: Tensor, adv: Tensor, out: dict) -> None:
    low, high = _cat_tok(parts, "clip_low"), _cat_tok(parts, "clip_high")
    if low is None or high is None:
        return
    f = ratio.dtype
    out["clip_low_frac"] = _mean(low.to(f), m)
    out["clip_high_frac"] = _mean(high.to(f), m)
    out["clip_region_frac"] = _mean((low | high).to(f), m)
    eps_low = parts[0].clip.eps_low
    out["clip_low_frac_pos"] = _mean((ratio < 1 - eps_low).to(f), m & (adv > 0))
    dual = _cat_tok(parts, "dual_clip")
    if dual is not None:
        out["dual_clip_frac"] = _mean(dual.to(f), m)


def _policy_stats(parts: list[ObservedPart], m: Tensor, out: dict[str, Tensor]) -> None:
    log_ratio = _cat_tok(parts, "log_ratio")
    if log_ratio is None:
        out["on_policy"] = torch.tensor(True)
        return
    on_policy = (torch.where(m, log_ratio, torch.zeros_like(log_ratio)) == 0).all()
    out["on_policy"] = on_policy
    out["log_ratio_clamped"] = _cat_tok(parts, "clamped").sum()
    ratio_metrics: dict[str, Tensor] = {"ppo_kl": _mean(-log_ratio, m)}
    adv = _cat_tok(parts, "advantage")
    if adv is not None:
        ratio = _cat_tok(parts, "ratio")
        _ratio_stats(ratio, adv, m, ratio_metrics)
        _clip_stats(parts, m, ratio, adv, ratio_metrics)
    gates = [p.gate for p in parts]
    if all(g is not None for g in gates):
        g = torch.stack(gates).sum(0)
        ratio_metrics["llds_gate_rate"] = g[0] / g[1]
    for k, v in ratio_metrics.items():  # none of these exist while the policy has not moved
        out[k] = torch.where(on_policy, torch.full_like(v, float("nan"), dtype=torch.float64), v.double())


def _token_stats(parts: list[ObservedPart], m: Tensor, out: dict[str, Tensor]) -> None:
    ent = _cat_tok(parts, "entropy")
    if ent is not None:
        em = m & torch.isfinite(ent)
        out["entropy_mean"] = _mean(ent, em)
        qs = torch.tensor([0.05, 0.5, 0.95], dtype=ent.dtype, device=ent.device)
        out["entropy_p05"], out["entropy_p50"], out["entropy_p95"] = masked_quantiles(ent, em, qs)
    isr = _cat_tok(parts, "is_log_ratio")
    if isr is not None:
        im = m & torch.isfinite(isr)
        w = isr.clamp(-20, 20).exp()
        out["is_log_ratio_abs_mean"] = _mean(isr.abs(), im)
        w_norm = w / _mean(w, im)
        out["is_ess"] = 1.0 / _mean(w_norm**2, im)
        out["is_chi2"] = _mean(w**2, im) - 1
    kl = _cat_tok(parts, "kl_ref_k3")
    if kl is not None:
        out["kl_ref_mean"] = _mean(kl, m & torch.isfinite(kl))


def _group_zero_std_frac(groups: Tensor, flags: Tensor) -> Tensor:
    """Share of the distinct groups in ``groups`` whose flag is set (a group's members all carry the same flag)."""
    _, inv = torch.unique(groups, return_inverse=True)
    n = int(inv.max()) + 1
    per_group = torch.zeros(n, dtype=torch.float64).scatter_reduce(0, inv, flags.double(), "amax")
    return per_group.mean()


def _sequence_stats(parts: list[ObservedPart], out: dict[str, Tensor]) -> None:
    n_model = _cat_seq(parts, "n_model_tokens").double()
    out["response_length_mean"] = n_model.mean()
    reward = _cat_seq(parts, "reward")
    if reward is not None:
        fin = torch.isfinite(reward)
        out["reward_mean"] = _mean(reward, fin)
        # sample std (n − 1), as TRL's reward_std and the advantages' std_G; NaN (NULL) for a single reward
        out["reward_std"] = (torch.where(fin, reward - out["reward_mean"], 0.0) ** 2).sum().div(fin.sum() - 1).sqrt()
        correct = _cat_seq(parts, "correct")
        out["correct_frac"] = _mean(correct.double(), fin)
        groups = [p.group_ids for p in parts]
        if all(g is not None for g in groups):
            g = torch.cat(groups).cpu()
            flags = [p.group_zero_std for p in parts]
            if all(f is not None for f in flags):  # whole-group flags from the trainer: exact under shuffling
                out["zero_std_group_frac"] = _group_zero_std_frac(g, torch.cat(flags).cpu())
            elif fin.all():  # fallback: the members seen this step (exact when the step holds whole groups)
                out["zero_std_group_frac"] = _group_zero_std_frac(g, group_zero_std(g, reward.cpu()))
        for key in ("logp_old_mean", "displacement_mean"):
            v = _cat_seq(parts, key)
            if v is not None:
                ok = torch.isfinite(v)
                out[f"{key}_correct"] = _mean(v, ok & correct)
                out[f"{key}_incorrect"] = _mean(v, ok & ~correct)
    trunc = _cat_seq(parts, "truncated")
    if trunc is not None:
        out["truncated_frac"] = trunc.double().mean()
    rep = _cat_seq(parts, "repeat_frac_max")
    if rep is not None and torch.isfinite(rep).any():
        out["repeat_frac_max"] = rep[torch.isfinite(rep)].max()


def compute_step_metrics(parts: list[ObservedPart]) -> dict[str, float | int | bool | str | None]:
    """All step metrics over the parts of one step; values are host Python scalars, None = NULL."""
    m = torch.cat([p.tok["mask"].flatten() for p in parts])
    out: dict[str, Tensor] = {
        "n_seqs": torch.tensor(sum(p.tok["mask"].shape[0] for p in parts)),
        "n_model_tokens": m.sum(),
    }
    _policy_stats(parts, m, out)
    _token_stats(parts, m, out)
    _sequence_stats(parts, out)
    counts = {name: sum(int(p.nonfinite.get(name, 0)) for p in parts) for name in NONFINITE_ORDER}
    result: dict[str, float | int | bool | str | None] = {}
    for k, v in out.items():
        x = v.item()
        result[k] = None if isinstance(x, float) and not math.isfinite(x) else x
    for name, c in counts.items():
        present = any(name in p.nonfinite for p in parts)
        result[f"nonfinite_{name}"] = c if present else None
    result["first_nonfinite"] = next((n for n in NONFINITE_ORDER if counts[n] > 0), None)
    return {m.name: result.get(m.name) for m in STEP_METRICS}  # every catalogue metric; absent = NULL
