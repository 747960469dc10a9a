"""Objective registry: ``@register_objective("name")`` on a pure function ``(LossInputs, Params) -> ObjectiveOutput``.

The params type is read from the function's ``params`` annotation, so a trainer can build default or
config-driven hyper-parameters by name (``make_params("llds", lam=0.1)``) without importing the module.
verl's ``@register_policy_loss`` is the model; unlike it, a function receives only its own hyper-parameters.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from collapsewatch.objectives.types import LossInputs, ObjectiveOutput

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


_REGISTRY: dict[str, Objective] = {}


def register_objective(name: str) -> Callable[[F], F]:
    """Register ``fn(inputs: LossInputs, params: <Params>) -> ObjectiveOutput`` under ``name``."""
    if name in _AMBIGUOUS:
        raise ValueError(_AMBIGUOUS[name])

    def decorator(fn: F) -> F:
        if name in _REGISTRY:
            raise ValueError(f"objective {name!r} is already registered ({_REGISTRY[name].fn.__module__})")
        hints = typing.get_type_hints(fn)
        if "params" not in hints:
            raise TypeError(f"objective {name!r}: annotate the hyper-parameter argument as `params: <Params>`")
        _REGISTRY[name] = Objective(name=name, fn=fn, params_type=hints["params"])
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
    return objective.fn(inputs, params)
