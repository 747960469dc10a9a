"""First non-finite value, phase ``nonfinite`` (critical; info for a skipped update).

Holds on a step whose ``first_nonfinite`` names a tensor, whose ``nonfinite_*`` counts are > 0, or whose
logged ``grad_norm`` / ``loss`` is ±Inf. A frame cannot tell NaN from NULL, so a stored run's NaN loss or grad norm
reaches the rule as ``first_nonfinite`` naming it (the store's query keeps the two apart: ``offline.run_steps``;
the loss first where both are NaN). The message names the tensor of the episode's first step, found by walking back
over the consecutive non-finite rows in the history (no extra state).

**A skipped update is info.** A point where the logged ``grad_norm`` is the only non-finite value and the point
before it was clean is what mixed-precision training logs when its loss scaler skips an update whose gradient
overflowed (fp16: the step is not applied, the scale is lowered, training goes on; verl's FSDP engine likewise skips an
update whose norm is not finite, "if grad_norm is not finite, skip the update") — harmless by itself. It turns
critical when the next logged point is non-finite too: an optimizer that applied a NaN gradient leaves NaN weights,
so the norm (and the loss) stay non-finite. A non-finite loss, or any tensor the probe counts (log-probs,
advantages, ratios …), is critical at once (issue 31, "critical means harm": a TRL/Unsloth fp16 run its authors call
healthy logged NaN grad norms at 4 isolated points of 60 and was marked critical; docs/lab/bench.md, session 30).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..catalogue import STEP_METRICS
from .config import DetectorConfig, NonfiniteConfig
from .events import Finding, Verdict
from .history import History, Row
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector

# The tensors checked for non-finite values: the catalogue's nonfinite_<tensor> step columns, in its order.
TENSORS = tuple(m.name.removeprefix("nonfinite_") for m in STEP_METRICS if m.name.startswith("nonfinite_"))
SCALARS = ("loss", "grad_norm")
"""Logged scalars read for ±Inf (and, stored, NaN), the loss first: a NaN loss is harm, a NaN norm alone may be a
skipped update (module doc)."""
STORED_FIRST_NONFINITE = ("coalesce(first_nonfinite, CASE "
                          + " ".join(f"WHEN isnan({c}) THEN '{c}'" for c in SCALARS) + " END)")
"""SQL for a stored run's ``first_nonfinite``: as recorded, else the first of SCALARS that is NaN at that step — a
frame cannot tell NaN from NULL, the store can (``offline.run_steps`` reads it; part of these rules' digest)."""
INPUTS = ("first_nonfinite", *(f"nonfinite_{t}" for t in TENSORS), *SCALARS)


def with_first_nonfinite(row: dict[str, Any]) -> dict[str, Any]:
    """A live step row with ``first_nonfinite`` named as :data:`STORED_FIRST_NONFINITE` names it for a stored run: as
    recorded, else the first of SCALARS whose logged value is NaN — live and offline read one step alike (a row
    normalised for the rules reads a NaN as missing)."""
    if row.get("first_nonfinite"):
        return row
    nan = next((s for s in SCALARS if isinstance(row.get(s), float) and math.isnan(row[s])), None)
    return row if nan is None else {**row, "first_nonfinite": nan}


def _tensors(row: Row) -> list[str] | None:
    """Tensors with non-finite values in ``row`` (first_nonfinite first); None when nothing was recorded — no name,
    no count, and no finite loss or grad norm (a logged finite one is a clean point: an ingested log's episode closes
    on it)."""
    first = row.text("first_nonfinite")
    counts = {t: row.num(f"nonfinite_{t}") for t in TENSORS}
    if first is None and all(v is None for v in counts.values()) and not row.nonfinite and \
            all(row.num(s) is None for s in SCALARS):
        return None
    found = [first] if first else []
    found += [t for t, v in counts.items() if v and t not in found]
    found += [s for s in SCALARS if s in row.nonfinite]
    return found


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    if not ev.get("first_tensor"):
        return None
    counts = ev.get("counts") or {}
    now = [f"{t} ({_f(counts[t], '.0f')} values)" if _num(counts.get(t)) else str(t)
           for t in ev.get("tensors_now") or []]
    if ev.get("skipped_update"):
        return (f"the gradient norm was non-finite at step {ev.get('first_step')} alone: an update skipped by "
                "mixed-precision loss scaling, critical if it repeats on the next point")
    return (f"the first non-finite value appeared at step {ev.get('first_step')} in {ev['first_tensor']}"
            + (f"; this step: {', '.join(now)}" if now else ""))


@register_detector(primary=INPUTS, config=NonfiniteConfig, sentence=_sentence, colour="#ff1744",
                   phase_names={"nonfinite": "non-finite values"}, drills=("nonfinite",))
class Nonfinite:
    name = "nonfinite"
    phases = ("nonfinite",)
    inputs = INPUTS

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        found = _tensors(h.row)
        if found is None:
            return {}
        if not found:
            return {"nonfinite": None}
        first_step, first = h.step, found
        for row in h.recent(self.cfg.history_steps):
            earlier = _tensors(row)
            if earlier is None:  # nothing recorded at that step (sparse logging): not a clean step either
                continue
            if not earlier:
                break
            first_step, first = row.step, earlier
        tensor = first[0]
        count = h.row.num(f"nonfinite_{found[0]}")
        skipped = set(found) == {"grad_norm"} and first_step == h.step
        ev = {"first_tensor": tensor, "first_step": first_step, "tensors_now": found,
              "counts": {t: h.row.num(f"nonfinite_{t}") for t in TENSORS}, "skipped_update": skipped}
        what = (f"a non-finite gradient norm at step {h.step} alone (the point before it clean, the loss finite): a "
                "mixed-precision loss scaler skips such an update; critical if the next point is non-finite too"
                if skipped else
                f"non-finite values since step {first_step}, first in {tensor}; now in {', '.join(found)}")
        return {"nonfinite": Finding(
            "info" if skipped else "critical", f"nonfinite_{found[0]}" if found[0] in TENSORS else found[0], count,
            0.0, 1, what, ev)}
