"""The one declaration of each detector: ``@register_detector`` on its class, in its own module.

    @register_detector(primary=("grad_norm",), colour="#ec407a", sentence=_sentence,
                       phase_names={"explosion": "gradient explosion"})
    class Grad:
        name = "grad"; phases = ("explosion",); inputs = ("grad_norm",)

Everything else reads :func:`specs`: the suite (which classes run, the columns that make a detector applicable, the
reason it is not), the verdict (how a phase is named in a sentence), the alerts (the sentence built from an episode's
evidence), the dashboard (the detector's colour) and the lab (which drill a detector answers). The detector's
settings are its field of :class:`~.config.DetectorConfig` (named after it, listed in ``DETECTORS``); the module
that declares it is named after it too, so :func:`specs` imports ``DETECTORS``' modules and needs no list of its own.
tests/detectors/test_registry.py fails when a detector lacks any part.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .config import DETECTORS

Sentence = Callable[[str, Mapping[str, Any], "int | None"], "str | None"]
"""(phase, evidence, the step the evidence was taken at) → one sentence, or None (the stored message then)."""
T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class DetectorSpec:
    """What the rest of the package knows about one detector."""

    name: str
    cls: type
    """The detector: ``cls(config)`` has ``phases``, ``inputs`` and ``evaluate(history, open_phases)``."""
    phases: tuple[str, ...]
    primary: tuple[str, ...]
    """Columns whose presence on a step makes the detector applicable (see ``not_applicable``)."""
    config: type
    """Its settings' class: the type of ``DetectorConfig.<name>``."""
    sentence: Sentence
    colour: str
    """Its colour on the dashboard (phase bands, the events table)."""
    phase_names: Mapping[str, str] = field(default_factory=dict)
    """How a phase is named in a verdict sentence; a phase not listed reads ``detector phase``."""
    not_applicable: str = ""
    """Why it says nothing on a stream without its primary columns ("" → those columns are NULL on every step)."""
    drills: tuple[str, ...] = ()
    """The drill kinds (``trainer.drills``) whose failure this detector is meant to catch (the lab scores it on them)."""

    def why_not_applicable(self) -> str:
        return self.not_applicable or f"{', '.join(self.primary)} NULL on every step"


_SPECS: dict[str, DetectorSpec] = {}


def register_detector(*, primary: tuple[str, ...], config: type, sentence: Sentence, colour: str,
                      phase_names: Mapping[str, str] | None = None, not_applicable: str = "",
                      drills: tuple[str, ...] = ()) -> Callable[[T], T]:
    """Declare the decorated detector class (its ``name`` and ``phases`` are class attributes)."""

    def decorator(cls: T) -> T:
        name = cls.name  # type: ignore[attr-defined]
        if name not in DETECTORS:
            raise ValueError(f"detector {name!r} is not listed in DETECTORS ({', '.join(DETECTORS)})")
        if name in _SPECS and _SPECS[name].cls is not cls:
            raise ValueError(f"detector {name!r} is already registered ({_SPECS[name].cls.__module__})")
        phases = tuple(cls.phases)  # type: ignore[attr-defined]
        unknown = set(phase_names or {}) - set(phases)
        if unknown:  # refused before anything is registered
            raise ValueError(f"detector {name!r}: phase_names for unknown phases {sorted(unknown)}")
        _SPECS[name] = DetectorSpec(name, cls, phases, tuple(primary), config, sentence, colour,
                                    dict(phase_names or {}), not_applicable, tuple(drills))
        return cls

    return decorator


def specs() -> dict[str, DetectorSpec]:
    """Every detector's declaration, in ``DETECTORS`` order (its module, ``detectors/<name>.py``, imported here)."""
    for name in DETECTORS:
        if name not in _SPECS:
            importlib.import_module(f"{__package__}.{name}")
        if name not in _SPECS:
            raise RuntimeError(f"detectors/{name}.py declares no detector {name!r} (@register_detector)")
    return {name: _SPECS[name] for name in DETECTORS}


# -- helpers of the sentence builders: evidence values are JSON (numbers, None, strings) ----------------------------

def num(x: Any) -> float | None:
    """A finite float, or None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt(x: Any, spec: str = ".2f") -> str:
    """``x`` formatted, or NULL."""
    v = num(x)
    return "NULL" if v is None else format(v, spec)
