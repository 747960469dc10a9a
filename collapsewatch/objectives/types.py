"""Typed input and output of every objective: ``LossInputs`` in, ``ObjectiveOutput`` out.

``LossInputs`` is :class:`collapsewatch.batch.TokenBatch` — one batch type and one validator for the objective and
the probe. An objective reads ``logp`` (with grad), ``logp_old``, ``advantages``, ``mask`` and, when
it needs them, ``turn_ids``, ``logp_ref`` and ``entropy`` (with grad: the entropy bonus), plus its own
hyper-parameters; ``compute_objective`` checks that ``logp_old`` and ``advantages`` are set. Glossary (B, T, logp,
logp_old, logp_ref, mask, A, r, turn) as in docs/architecture.md, *Glossary*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from collapsewatch.batch import TokenBatch

LossInputs = TokenBatch
"""The batch an objective trains on: the same class the probe observes."""


@dataclass(frozen=True, eq=False)
class ObjectiveOutput:
    """Per-token loss and the per-token intermediates the objective created.

    ``loss`` is (B, T) and keeps the autograd graph; reduce it with ``aggregation.aggregate``. Values at
    mask = 0 positions are not meaningful (aggregation multiplies by the mask). ``intermediates`` are
    detached (B, T) tensors named as in the metric catalogue (``ratio``, ``clip_low``, ...); boolean flags
    are already AND-ed with the mask, float values are left raw. ``terms`` are the scalar loss terms under the
    catalogue's ``loss_*`` names, each a (B, T) per-token tensor aggregated like the loss (``loss_policy``,
    ``loss_penalty``, ``loss_kl``, ``loss_entropy``), detached. ``scalars`` are the objective's own per-step values
    under catalogue names (BAPO's chosen bounds ``bapo_clip_low`` / ``bapo_clip_high``), 0-dim and detached: a
    trainer logs them as step scalars (the step's last micro-batch's value) without knowing the objective.
    """

    loss: Tensor                                              # (B, T)
    intermediates: dict[str, Tensor] = field(default_factory=dict)
    terms: dict[str, Tensor] = field(default_factory=dict)    # name -> (B, T) detached per-token term
    scalars: dict[str, Tensor] = field(default_factory=dict)  # name -> () detached per-step value
