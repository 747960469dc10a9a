"""Typed input and output of every objective: ``LossInputs`` in, ``ObjectiveOutput`` out.

Glossary (B, T, logp, logp_old, logp_ref, mask, A, r, turn) as in the package docstring / DESIGN.md §3.
Objectives read only these fields plus their own hyper-parameters, so a trainer, a TRL adapter or a test can
build one from plain tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

_TOKEN_FIELDS = ("logp_old", "mask", "turn_ids", "logp_ref", "entropy")


@dataclass(frozen=True, eq=False)
class LossInputs:
    """One micro-batch as the objective sees it. Tensors stay on the caller's device; nothing is copied."""

    logp: Tensor                      # (B, T) log π_θ(y_t) of the sampled tokens, with grad
    logp_old: Tensor                  # (B, T) log π_old(y_t), rollout policy recomputed by the trainer, no grad
    advantages: Tensor                # (B,) per sequence, or (B, T) per token
    mask: Tensor                      # (B, T) loss mask: 1 on trained model tokens, 0 on prompt/pad/tool tokens
    turn_ids: Tensor | None = None    # (B, T) model-turn index per token (LLDS A-gate); None: runs of mask = 1
    logp_ref: Tensor | None = None    # (B, T) frozen reference model (k3 KL)
    entropy: Tensor | None = None     # (B, T) policy entropy in nats, with grad (entropy bonus)

    def __post_init__(self) -> None:
        if self.logp.dim() != 2:
            raise ValueError(f"LossInputs.logp must be (B, T); got shape {tuple(self.logp.shape)}")
        shape = tuple(self.logp.shape)
        wrong = [
            f"{name} {tuple(getattr(self, name).shape)}"
            for name in _TOKEN_FIELDS
            if getattr(self, name) is not None and tuple(getattr(self, name).shape) != shape
        ]
        if tuple(self.advantages.shape) not in (shape[:1], shape):
            wrong.append(f"advantages {tuple(self.advantages.shape)} (expected ({shape[0]},) or {shape})")
        if wrong:
            raise ValueError(f"LossInputs shapes disagree with logp {shape}: " + ", ".join(wrong))

    def token_advantages(self) -> Tensor:
        """Advantages broadcast to tokens, (B, T), in logp's dtype."""
        adv = self.advantages.to(self.logp.dtype)
        return adv if adv.dim() == 2 else adv.unsqueeze(-1).expand_as(self.logp)  # (B, T)

    def float_mask(self) -> Tensor:
        """The loss mask as 0/1 floats in logp's dtype, (B, T)."""
        return self.mask.to(self.logp.dtype)  # (B, T)


@dataclass(frozen=True, eq=False)
class ObjectiveOutput:
    """Per-token loss and the per-token intermediates the objective created.

    ``loss`` is (B, T) and keeps the autograd graph; reduce it with ``aggregation.aggregate``. Values at
    mask = 0 positions are not meaningful (aggregation multiplies by the mask). ``intermediates`` are
    detached (B, T) tensors named as in the metric catalogue (``ratio``, ``clip_low``, ...); boolean flags
    are already AND-ed with the mask, float values are left raw.
    """

    loss: Tensor                                              # (B, T)
    intermediates: dict[str, Tensor] = field(default_factory=dict)
