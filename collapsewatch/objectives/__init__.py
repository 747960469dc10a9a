"""The built-in trainer's three separate algorithm axes (glossary: docs/architecture.md, *Glossary*).

1. advantages  (``advantages.py``):  rewards (B,), group_ids (B,) → A (B,)       group_norm | group_mean
               (``gigpo.py``):       + per-turn returns and anchor states → A (B, T)  gigpo
2. objective   (``registry.py``):    LossInputs → ObjectiveOutput(loss (B, T), intermediates)
                                     grpo | sapo_search | llds | sapo_soft | gspo
                                     | turn_ppo | bapo | sampo
3. aggregation (``aggregation.py``): loss (B, T), mask (B, T) → scalar            token_mean | seq_mean_token_mean
                                                                                  | seq_mean_token_sum_norm
   each objective names its paper's aggregation (``default_aggregation``: seq_mean_token_mean for gspo and
   sapo_soft, token_mean for the others); a trainer may override it.

A trainer step, with gradient accumulation over micro-batches::

    adv = compute_advantages(rewards, group_ids)                                   # once per rollout batch
    norm = aggregation_normalizer("token_mean", [mb.mask for mb in micro_batches])  # once per optimizer step
    for mb in micro_batches:
        out = compute_objective("llds", LossInputs(logp=..., logp_old=..., advantages=adv[mb.rows], mask=...))
        aggregate(out.loss, mb.mask, "token_mean", normalizer=norm).backward()
        probe.observe(...)   # out.intermediates: ratio, clip flags, gates, penalty masks (detached)
"""

from collapsewatch.objectives import bapo, gspo, llds, sampo, sapo_search, sapo_soft, turn_ppo  # noqa: F401  (registers)
from collapsewatch.objectives.advantages import ADVANTAGE_MODES, GroupStats, compute_advantages, group_stats
from collapsewatch.objectives.aggregation import AGGREGATIONS, aggregate, aggregation_normalizer
from collapsewatch.objectives.bapo import BapoParams, step_contributions
from collapsewatch.objectives.gigpo import ESTIMATORS, GigpoParams, anchor_ids, gigpo_advantages, turn_returns
from collapsewatch.objectives.grpo import GrpoParams, grpo
from collapsewatch.objectives.gspo import GspoParams
from collapsewatch.objectives.llds import LldsParams
from collapsewatch.objectives.registry import (
    Objective,
    compute_objective,
    default_aggregation,
    get_objective,
    make_params,
    objective_names,
    register_objective,
)
from collapsewatch.objectives.sampo import SampoParams
from collapsewatch.objectives.sapo_search import SapoSearchParams
from collapsewatch.objectives.sapo_soft import SapoSoftParams
from collapsewatch.objectives.turn_ppo import TurnPpoParams
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput

__all__ = [
    "ADVANTAGE_MODES",
    "AGGREGATIONS",
    "BapoParams",
    "ESTIMATORS",
    "GigpoParams",
    "GroupStats",
    "GrpoParams",
    "GspoParams",
    "LldsParams",
    "LossInputs",
    "Objective",
    "ObjectiveOutput",
    "SampoParams",
    "SapoSearchParams",
    "SapoSoftParams",
    "TurnPpoParams",
    "aggregate",
    "aggregation_normalizer",
    "anchor_ids",
    "compute_advantages",
    "compute_objective",
    "default_aggregation",
    "get_objective",
    "gigpo_advantages",
    "grpo",
    "group_stats",
    "make_params",
    "objective_names",
    "register_objective",
    "step_contributions",
    "turn_returns",
]
