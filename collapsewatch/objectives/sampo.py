"""``sampo``: the objective of SAMPO, the stable agentic recipe of ARLArena (arXiv 2602.21534) — GSPO's sequence
ratio with ε = 3e-3 / 4e-3 plus a k3 KL to the reference model. The rest of the recipe lives on the other axes:
``RECIPE`` lists the trainer settings that complete it, and what the built-in trainer does not offer.
"""

from __future__ import annotations

from dataclasses import dataclass

from collapsewatch.objectives.gspo import GspoParams, gspo
from collapsewatch.objectives.registry import register_objective
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import k3_kl

RECIPE: dict[str, object] = {"objective": "sampo", "aggregation": "seq_mean_token_mean", "advantages": "gigpo",
                             "dynamic_sampling": 3}
"""TrainConfig fields of the SAMPO preset: ``load_config(**RECIPE)``, or ``--objective sampo --set
aggregation=seq_mean_token_mean --set advantages=gigpo --set dynamic_sampling=3`` on the command line.
ARL-Arena maps ``adv_estimator=sampo`` to GiGPO's advantage with verl's ``gspo`` loss
(``recipe/shop_agent/ppo/ray_trainer.py``); ``objectives.GigpoParams``' defaults are its SAMPO script's
(γ 0.95, ω 1.0, mean/std norm). Dynamic sampling is its ``algorithm.filter_groups`` (``max_num_gen_batches=3``;
``rollout/dynamic.py``), without the cold start (no dynamic sampling in the first 15 / 5 steps)."""


@dataclass(frozen=True)
class SampoParams:
    """Defaults from ARL-Arena's SAMPO scripts (WillDreamer/ARL-Arena ``examples/*/train_sampo.sh``, commit
    a25a2a229c85): ``clip_ratio_low=3e-3``, ``clip_ratio_high=4e-3``, ``kl_loss_coef=0.01``."""

    eps_low: float = 3e-3
    """The sequence ratio s is clipped below at 1 − ε_l. ARL-Arena's 3e-3 is ten times GSPO's paper value (3e-4)."""
    eps_high: float = 4e-3
    """s is clipped above at 1 + ε_h (GSPO's paper: 4e-4)."""
    kl_beta: float = 0.01
    """β of the k3 KL to the reference (``use_kl_loss=True, kl_loss_type=low_var_kl``). 0 turns it off; > 0
    needs ``logp_ref`` (the built-in trainer loads a reference model when the params' ``kl_beta`` > 0)."""

    def __post_init__(self) -> None:
        GspoParams(self.eps_low, self.eps_high)  # the same range check as gspo
        if self.kl_beta < 0.0:
            raise ValueError(f"kl_beta must be >= 0, got {self.kl_beta}")


@register_objective("sampo", aggregation="seq_mean_token_mean", clip_level="sequence")
def sampo(inputs: LossInputs, params: SampoParams) -> ObjectiveOutput:
    """ℓ_t = ℓ_t^GSPO(ε_l = 3e-3, ε_h = 4e-3) + β·k3_t,   k3_t = exp(logp_ref − logp) − (logp_ref − logp) − 1

    SAMPO, ARLArena (arXiv 2602.21534; equation number not verified), as run by WillDreamer/ARL-Arena: its trainer
    maps ``adv_estimator=sampo`` to ``policy_loss.loss_mode="gspo"`` (``recipe/shop_agent/ppo/ray_trainer.py``) with
    ``loss_agg_mode=seq-mean-token-mean`` — registered with that default aggregation and sequence-level clip flags.
    Deviations: the sequence log-ratio is clamped to ±20 (``gspo``; the code clamps log s at 10 from above only);
    verl's ``low_var_kl`` also clamps k3 to [−10, 10], here k3 is unclamped beyond its ±20 log-ratio clamp.
    """
    base = gspo(inputs, GspoParams(params.eps_low, params.eps_high))
    if params.kl_beta == 0.0:
        return base
    inputs.require("logp_ref", who="sampo with kl_beta > 0 (or set kl_beta=0)")
    kl = k3_kl(inputs.logp, inputs.logp_ref)  # (B, T)
    out = dict(base.intermediates)
    out["kl_ref_k3"] = kl.detach()
    terms = {**base.terms, "loss_kl": (params.kl_beta * kl).detach()}
    return ObjectiveOutput(loss=base.loss + params.kl_beta * kl, intermediates=out, terms=terms)
