"""Objective registry: ``@register_objective("name")`` on a pure function ``(LossInputs, Params) -> ObjectiveOutput``.

The params type is read from the function's ``params`` annotation, so a trainer can build default or
config-driven hyper-parameters by name (``make_params("llds", lam=0.1)``) without importing the module.
Each objective also names its paper's loss aggregation (``default_aggregation``), which a trainer uses unless the
user picks another (aggregation stays a separate axis).
verl's ``@register_policy_loss`` is the model; unlike it, a function receives only its own hyper-parameters.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from collapsewatch.objectives.aggregation import AGGREGATIONS
from collapsewatch.objectives.types import LossInputs, ObjectiveOutput
from collapsewatch.policy_math import CLIP_LEVELS

ObjectiveFn = Callable[[LossInputs, Any], ObjectiveOutput]
F = TypeVar("F", bound=ObjectiveFn)

# Two unrelated papers are both called "SAPO"; the bare name would silently pick one.
_AMBIGUOUS = {"sapo": "'sapo' is ambiguous: use 'sapo_search' (arXiv 2603.10069) or 'sapo_soft' (arXiv 2511.20347)"}


@dataclass(frozen=True)
class Objective:
    """A registered objective: its name, the pure function and the frozen params dataclass it takes."""

    name: str
    fn: ObjectiveFn
    params_type: type
    aggregation: str = "token_mean"
    """The aggregation of the objective's paper (the trainer's default for it)."""
    clip_level: str = "token"
    """What its clip acts on: 'token' ratios, or 'sequence' ratios (GSPO); the probe flags the same quantity."""


_REGISTRY: dict[str, Objective] = {}


def register_objective(name: str, aggregation: str = "token_mean", clip_level: str = "token") -> Callable[[F], F]:
    """Register ``fn(inputs: LossInputs, params: <Params>) -> ObjectiveOutput`` under ``name``, with the loss
    aggregation its paper uses (one of ``AGGREGATIONS``) and what its clip acts on (``CLIP_LEVELS``)."""
    if name in _AMBIGUOUS:
        raise ValueError(_AMBIGUOUS[name])
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"objective {name!r}: unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")
    if clip_level not in CLIP_LEVELS:
        raise ValueError(f"objective {name!r}: clip_level must be one of {CLIP_LEVELS}, got {clip_level!r}")

    def decorator(fn: F) -> F:
        if name in _REGISTRY:
            raise ValueError(f"objective {name!r} is already registered ({_REGISTRY[name].fn.__module__})")
        hints = typing.get_type_hints(fn)
        if "params" not in hints:
            raise TypeError(f"objective {name!r}: annotate the hyper-parameter argument as `params: <Params>`")
        _REGISTRY[name] = Objective(name=name, fn=fn, params_type=hints["params"], aggregation=aggregation,
                                    clip_level=clip_level)
        return fn

    return decorator


def objective_names() -> tuple[str, ...]:
    """Registered objective names, sorted."""
    return tuple(sorted(_REGISTRY))


def get_objective(name: str) -> Objective:
    """The registered objective called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    hint = f"{_AMBIGUOUS[name]}. " if name in _AMBIGUOUS else ""
    raise ValueError(f"{hint}Unknown objective {name!r}; known objectives: {', '.join(objective_names())}")


def default_aggregation(name: str) -> str:
    """The loss aggregation of objective ``name``'s paper (e.g. ``seq_mean_token_mean`` for gspo)."""
    return get_objective(name).aggregation


def make_params(name: str, **overrides: Any) -> Any:
    """The objective's params dataclass with defaults, overridden by keyword (validated by its __post_init__)."""
    return get_objective(name).params_type(**overrides)


def compute_objective(name: str, inputs: LossInputs, params: Any = None) -> ObjectiveOutput:
    """Run objective ``name`` on ``inputs``; ``params=None`` means the objective's documented defaults."""
    objective = get_objective(name)
    if params is None:
        params = objective.params_type()
    elif not isinstance(params, objective.params_type):
        raise TypeError(f"objective {name!r} takes {objective.params_type.__name__}, got {type(params).__name__}")
    if not isinstance(inputs, LossInputs):
        raise TypeError(f"objective {name!r} takes a TokenBatch (LossInputs), got {type(inputs).__name__}")
    inputs.require("logp_old", "advantages", who=f"objective {name!r}")
    return objective.fn(inputs, params)
