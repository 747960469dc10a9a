"""Collapse detectors: ISDD, the LLD death spiral, and the simpler failure signals of GRPO-style runs.

    suite = DetectorSuite(DetectorConfig())
    events = suite.update(row)        # online: one step row → episodes entered or extended at this step
    events = detect_frame(df)         # offline: the same rules over a frame of step rows
    replay(df).applicability()        # offline, with "not applicable" (e.g. ISDD on an on-policy run)

Rows carry ``step`` plus catalogue step columns (``collapsewatch.catalogue``); an :class:`Event` is one
phase episode and maps onto the store's ``events`` table (see :mod:`.events` for the episode rules,
:mod:`.suite` for restarts and ranks, docs/detectors.md for every rule and constant).

Names are imported lazily (the store's SQL worker reads ``events.EPISODE_KEY`` and needs none of scipy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    **dict.fromkeys(("DETECTORS", "DetectorConfig", "EntropyConfig", "EvaluationConfig", "GradConfig",
                     "GrpoGuardConfig", "IsddConfig", "LengthConfig", "LldConfig", "MismatchConfig", "NonfiniteConfig",
                     "SeverityConfig", "SignalConfig", "StarvationConfig", "ToolsConfig"), ".config"),
    **dict.fromkeys(("Event", "Finding", "Severity"), ".events"),
    **dict.fromkeys(("PHASES", "Applicability", "DetectorSuite", "detect_each", "detect_frame", "final_branch",
                     "replay"), ".suite"),
}

if TYPE_CHECKING:
    from .config import (
        DETECTORS,
        DetectorConfig,
        EntropyConfig,
        EvaluationConfig,
        GradConfig,
        GrpoGuardConfig,
        IsddConfig,
        LengthConfig,
        LldConfig,
        MismatchConfig,
        NonfiniteConfig,
        SeverityConfig,
        SignalConfig,
        StarvationConfig,
        ToolsConfig,
    )
    from .events import Event, Finding, Severity
    from .suite import PHASES, Applicability, DetectorSuite, detect_each, detect_frame, final_branch, replay

__all__ = [
    "DETECTORS", "PHASES", "Applicability", "DetectorConfig", "DetectorSuite", "EntropyConfig", "EvaluationConfig",
    "Event", "Finding", "GradConfig", "GrpoGuardConfig", "IsddConfig", "LengthConfig", "LldConfig", "MismatchConfig",
    "NonfiniteConfig", "Severity", "SeverityConfig", "SignalConfig", "StarvationConfig", "ToolsConfig", "detect_each",
    "detect_frame", "final_branch", "replay",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'collapsewatch.detectors' has no attribute {name!r}")
