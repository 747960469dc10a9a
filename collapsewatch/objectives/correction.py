"""Rollout correction: truncated IS (TIS) and masked IS / rejection (MIS) for a sampler whose log-probs differ from
the trainer's (vLLM bf16 vs fp32, other kernels) — an option of every objective, applied by the trainer.

    log ρ_t   = logp_old,t − logp_rollout,t            π_old recomputed by the trainer / π the sampler reported
    TIS, token     w_t = min(exp(clamp(log ρ_t, ±20)), C)
    TIS, sequence  w_t = min(exp(clamp(Σ_mask log ρ, ±20)), C)                     same for every token of the row
    IcePop         threshold "l_u": w = exp(…) kept when l ≤ w ≤ u, else 0       (instead of truncation at C)
    MIS (reject)   per token k1 = −log ρ,  k2 = ½ (log ρ)²,  k3 = ρ − 1 − log ρ   (log ρ clamped to ±20)
                   token_kN keeps a token, seq_{sum,mean,max}_kN keeps a whole row, when the statistic is within
                   its bound: k1 in [log l, log u] (``rs_threshold`` "l_u", or u alone with l = 1/u), k2 / k3 ≤ u

The trainer multiplies each token's loss by w (detached: the weight changes the measure, not the objective) and
trains on ``mask × keep``: rejected tokens leave the loss *and* its token-mean denominator. Computed once per rollout
on the whole batch, like verl's driver (``compute_rollout_correction_and_add_to_batch``).

Semantics and names are verl 0.9.1's ``verl/trainer/ppo/rollout_corr_helper.py`` (``rollout_is``,
``rollout_is_threshold``, ``rollout_rs``, ``rollout_rs_threshold``; parity-tested in
``tests/integrations/test_verl_rollout_corr.py``). Presets in verl's words: token-TIS = ``is_level="token"``,
seq-TIS = ``"sequence"``, seq-MIS = ``is_level="sequence", rs="seq_sum_k1"``, geo-RS = ``rs="seq_mean_k1"``.
Deviation: verl weights the policy-gradient term only; here the objective's whole per-token loss is weighted (the
same when the objective has no KL / entropy / penalty term, e.g. grpo's defaults). verl's comma-chained ``rollout_rs``
lists and ``rollout_is_batch_normalize`` are not offered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from collapsewatch.objectives.types import ObjectiveOutput
from collapsewatch.policy_math import LOG_RATIO_CLAMP

IS_LEVELS = ("token", "sequence")
RS_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
              "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")
"""verl 0.9.1's ``SUPPORTED_ROLLOUT_RS_OPTIONS``: statistic k1 / k2 / k3, per token or a row's sum / mean / max."""


def _bounds(spec: float | str, name: str) -> tuple[float, float | None]:
    """(upper, lower or None) from a float or a ``"lower_upper"`` string; ValueError naming ``name``."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise ValueError(f"correction.{name}: expected a number or 'lower_upper', got {spec!r}")
    try:
        lower, upper = (float(x) for x in spec.split("_", 1)) if isinstance(spec, str) and "_" in spec else (
            None, float(spec))
    except ValueError as e:
        raise ValueError(f"correction.{name}: expected a number or 'lower_upper', got {spec!r}") from e
    if not upper > 0 or (lower is not None and not 0 < lower <= upper):
        raise ValueError(f"correction.{name}: need 0 < lower <= upper, got {spec!r}")
    return upper, lower


@dataclass(frozen=True)
class CorrectionParams:
    """``--set correction.is_level=token --set correction.is_threshold=2`` (TIS); ``correction.rs=token_k1`` (MIS)."""

    is_level: str | None = None
    """IS weight per ``token`` or per ``sequence`` (product of the row's ratios); None: no IS weight."""
    is_threshold: float | str = 2.0
    """C: weights truncated at C (TIS); a ``"lower_upper"`` string zeroes weights outside [l, u] (IcePop)."""
    rs: str | None = None
    """Rejection (masking) option, one of :data:`RS_OPTIONS`; None: nothing is masked."""
    rs_threshold: float | str = 2.0
    """Bound of the rejection statistic: k1 options take ``"lower_upper"`` ratio bounds (a number u means
    l = 1/u); k2 / k3 options an upper bound."""

    def __post_init__(self) -> None:
        if self.is_level is not None and self.is_level not in IS_LEVELS:
            raise ValueError(f"correction.is_level: {self.is_level!r} is not one of {IS_LEVELS} (or unset)")
        if self.rs is not None and self.rs not in RS_OPTIONS:
            raise ValueError(f"correction.rs: {self.rs!r} is not one of {', '.join(RS_OPTIONS)} (or unset)")
        _bounds(self.is_threshold, "is_threshold")
        _, lower = _bounds(self.rs_threshold, "rs_threshold")
        if self.rs is not None and lower is not None and not self.rs.endswith("k1"):
            raise ValueError(f"correction.rs_threshold: {self.rs} takes one upper bound, got {self.rs_threshold!r}")

    @property
    def active(self) -> bool:
        return self.is_level is not None or self.rs is not None


@dataclass(frozen=True)
class Correction:
    """What the trainer applies: per-token weights (B, T) (ones without IS) and keep mask (B, T) (ones without
    rejection), and the batch's correction metrics (catalogue names, None = does not apply)."""

    weights: Tensor
    keep: Tensor
    metrics: dict[str, float]


def is_weights(log_rho: Tensor, mask: Tensor, level: str, threshold: float | str) -> tuple[Tensor, Tensor]:
    """(applied weights, raw weights), both (B, T), 0 off the mask: raw w = exp(clamp(log ρ, ±20)) per token or
    exp(clamp(Σ_mask log ρ, ±20)) per row; applied = min(raw, C), or raw inside [l, u] and 0 outside (IcePop)."""
    m = mask.to(log_rho.dtype)
    if level == "token":
        raw = log_rho.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp()  # (B, T)
    else:
        total = (log_rho * m).sum(-1, keepdim=True)  # (B, 1) Σ_mask log ρ
        raw = total.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp().expand_as(log_rho)
    raw = raw * m
    upper, lower = _bounds(threshold, "is_threshold")
    if lower is None:
        return raw.clamp(max=upper).detach(), raw.detach()
    return torch.where((raw >= lower) & (raw <= upper), raw, torch.zeros_like(raw)).detach(), raw.detach()


def rejection_keep(log_rho: Tensor, mask: Tensor, option: str, threshold: float | str) -> Tensor:
    """(B, T) float: 1 where the token (``token_*``) or its row (``seq_*``) passes ``option``'s bound, else 0."""
    lr = log_rho.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    stat = {"k1": -lr, "k2": 0.5 * lr**2, "k3": lr.exp() - 1.0 - lr}[option[-2:]]  # (B, T)
    m = mask.to(lr.dtype)
    if option.startswith("seq_sum"):
        stat = (stat * m).sum(-1, keepdim=True)  # (B, 1)
    elif option.startswith("seq_mean"):
        stat = (stat * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1.0)
    elif option.startswith("seq_max"):
        peak = stat.masked_fill(~mask.bool(), -math.inf).amax(-1, keepdim=True)
        stat = torch.where(torch.isinf(peak), torch.zeros_like(peak), peak)  # a row without tokens: 0, as verl
    upper, lower = _bounds(threshold, "rs_threshold")
    if option.endswith("k1"):
        lower = 1.0 / upper if lower is None else lower
        ok = (stat >= math.log(lower)) & (stat <= math.log(upper))
    else:
        ok = stat <= upper
    return ok.expand_as(lr).to(lr.dtype)


def rollout_correction(logp_old: Tensor, logp_rollout: Tensor, mask: Tensor, params: CorrectionParams) -> Correction:
    """The weights, keep mask and metrics of ``params`` for one rollout batch (all (B, T), aligned).

    Metrics (``catalogue.LOGGED_SCALARS``; verl's keys in brackets, same definitions):
    ``is_weight_mean`` mean over the mask of the applied weight [rollout_is_mean]; ``is_truncated_frac`` share of
    mask tokens (token level) or rows (sequence level) whose raw weight exceeds C [rollout_is_ratio_fraction_high];
    ``rs_masked_frac`` share of mask tokens rejected [rollout_rs_masked_fraction].
    """
    log_rho = (logp_old - logp_rollout).double()  # (B, T)
    m = mask.double()
    n = m.sum().clamp(min=1.0)
    weights, keep = torch.ones_like(log_rho), torch.ones_like(log_rho)
    metrics: dict[str, float] = {}
    if params.is_level is not None:
        weights, raw = is_weights(log_rho, m, params.is_level, params.is_threshold)
        upper, _ = _bounds(params.is_threshold, "is_threshold")
        metrics["is_weight_mean"] = float((weights * m).sum() / n)
        if params.is_level == "token":
            metrics["is_truncated_frac"] = float(((raw > upper).double() * m).sum() / n)
        else:  # verl: over all rows, log Σ ρ against log C
            metrics["is_truncated_frac"] = float(((log_rho * m).sum(-1) > math.log(upper)).double().mean())
    if params.rs is not None:
        keep = rejection_keep(log_rho, m, params.rs, params.rs_threshold)
        metrics["rs_masked_frac"] = float(((1.0 - keep) * m).sum() / n)
    return Correction(weights=weights.to(logp_old.dtype), keep=keep.to(logp_old.dtype), metrics=metrics)


def apply_correction(out: ObjectiveOutput, mask: Tensor, weights: Tensor, keep: Tensor
                     ) -> tuple[ObjectiveOutput, Tensor]:
    """(the objective's output with its per-token loss and loss terms × ``weights``, the mask to aggregate with:
    ``mask × keep``). All (B, T); the weights are detached, so the gradient of token t is w_t · ∂ℓ_t."""
    weighted = ObjectiveOutput(loss=out.loss * weights, intermediates=out.intermediates,
                               terms={k: v * weights for k, v in out.terms.items()}, scalars=out.scalars)
    return weighted, mask * keep


def correction_params(values: dict) -> CorrectionParams:
    """``CorrectionParams`` from the trainer config's ``correction`` table; unknown keys name the known ones."""
    known = {"is_level", "is_threshold", "rs", "rs_threshold"}
    if set(values) - known:
        raise ValueError(f"correction: unknown key(s) {sorted(set(values) - known)}; known: {sorted(known)}")
    return CorrectionParams(**values)
