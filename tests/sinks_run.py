"""A real Monitor whose grad detector opens one episode rising info → warning → critical, with sinks:
``python -m tests.sinks_run STORE EVENTS_JSON SINK…`` (tests/test_sinks.py runs it in its own process, so each
tracker library's process-wide state and settings are its own) or :func:`grad_run` in-process."""

from __future__ import annotations

import json
import sys
from typing import Any

from collapsewatch import Monitor
from collapsewatch.detectors import DetectorConfig, SeverityConfig

GRAD = {40: 8.0, 41: 8.0, 42: 8.0, 43: 30.0}
"""grad_norm 1.0 except these steps (median 1): the explosion episode opens at step 40 as info (a spike), is a
warning at 42 (up 3 points ≥ sustain_steps 3, still ≥ recover_factor 3 × the median), critical at 43 (30 ≥ 20 ×
the median), and ends when the norm is back to 1 (tests/test_watch.py derives the same steps). No reward is logged,
so nothing shows harm and the default severity gate would lower the critical to warning: this run lists the grad
detector in ``severity.exempt`` (:data:`RULES`) so the sinks see all three severities."""
STEPS = 46
RULES = DetectorConfig(severity=SeverityConfig(exempt=("nonfinite", "grad")))
"""The detector settings of the run: the defaults, with the grad detector's critical never lowered."""


def grad_run(store: Any, sinks: list) -> list[dict[str, Any]]:
    """Run it; the events the Monitor delivered (each version), as ``events`` rows with ``run``."""
    with Monitor(store, run="g", flush_steps=1, sinks=sinks, detectors=RULES) as mon:
        for step in range(STEPS):
            mon.log(step, {"grad_norm": GRAD.get(step, 1.0)})
    return [dict(e.as_row(), run="g") for e in mon.events]


def first(events: list[dict[str, Any]], step_end: int, severity: str) -> dict[str, Any]:
    """The delivered version of the episode that ended at ``step_end`` with ``severity``."""
    return next(e for e in events if e["step_end"] == step_end and e["severity"] == severity)


if __name__ == "__main__":
    store, out, *specs = sys.argv[1:]
    with open(out, "w") as f:
        json.dump(grad_run(store, specs), f)
