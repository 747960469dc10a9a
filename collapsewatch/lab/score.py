"""`lab score`: how well each detector sees the drills, from labels and detector episodes (pure arithmetic).

A *flag* of (detector, phase) at severity s is an episode of that phase whose worst severity is ≥ s; it is
dated by the step it first stood at the class's severity (:func:`dated`). Phase ``*`` is any phase of the detector. For a drill kind k and a run of kind k:

* flagged — some flag starts at or after the onset; the first such start is the *detection step*;
* ``flagged_share`` = flagged runs / runs of kind k;
* ``delay_median`` = median over flagged runs of (detection − onset), steps;
* ``lead_median`` = median over flagged runs with a reward collapse at or after the onset of
  (collapse − detection) (negative: flagged only after the collapse; a collapse before the onset is not the
  drill's);
* ``false_pre_onset_per_1k`` = flags starting before the onset, over every drilled run (any kind),
  per 1,000 pre-onset steps (onset − first step of each run);
* ``false_healthy_per_1k`` = flags on healthy runs (undrilled, no reward collapse) per 1,000 of their steps;
* ``critical_near_best`` = flags (any run) starting where the reward level is at or near its running best
  (:func:`labels.near_best_steps`); at severity critical it must be 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

import pandas as pd

from ..detectors.events import SEVERITY_RANK
from ..detectors.registry import specs
from .labels import RunLabel

SEVERITIES = ("info", "warning", "critical")
ANY_PHASE = "*"
# The detectors each drill is meant to trip (its "own" detectors): the lab's targets are stated on these. A
# learning-rate blow-up has two textbook signatures: a grad-norm explosion and an entropy blow-up (Adam's
# step is bounded by lr whatever the gradient, so on the built-in model the pre-clip grad norm does not spike
# while the sampling distribution flattens — docs/detectors.md); both are scored.
# Each detector declares the drills it answers (``drills`` of ``@register_detector``).


def _own_detectors() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for spec in specs().values():
        for kind in spec.drills:
            out[kind] = (*out.get(kind, ()), spec.name)
    return out


OWN_DETECTORS: dict[str, tuple[str, ...]] = _own_detectors()
FLAG_COLUMNS = ["run", "detector", "phase", "severity", "step_start", "warning_at", "critical_at", "step_end"]
"""An episode as the lab scores it: its worst severity, its start, the steps it first stood at warning / critical
(empty above its worst; :func:`collapsewatch.detectors.events.reached_step`), and the last step it held
(``step_end``; empty where not known)."""


def dated(flags: pd.DataFrame, severity: str) -> pd.Series:
    """Per flag, the step it first stood at ``severity`` or above — a flag of the class (detector, phase, ≥
    ``severity``) is dated by when it rang at that severity, not by its episode's start (an info episode that
    turned warning later rang then). ``step_start`` for info, or where the column is missing or empty."""
    start = flags["step_start"]
    column = f"{severity}_at"
    if severity == "info" or column not in flags.columns:
        return start
    return flags[column].where(flags[column].notna(), start).astype("int64")
SCORE_COLUMNS = ["detector", "phase", "severity", "drill", "drilled_runs", "flagged_share", "delay_median",
                 "lead_median", "false_pre_onset_per_1k", "false_healthy_per_1k", "critical_near_best"]


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _per_1k(count: int, steps: int) -> float | None:
    return 1000.0 * count / steps if steps > 0 else None


def _flags_by_run(flags: pd.DataFrame) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for run, start in zip(flags["run"], flags["step_start"], strict=True):
        out.setdefault(run, []).append(int(start))
    return {k: sorted(v) for k, v in out.items()}


def score_flags(flags: pd.DataFrame, labels: Iterable[RunLabel], kind: str,
                near_best: Mapping[str, set[int]] | None = None) -> dict[str, float | int | None]:
    """The score columns of one flag set (already filtered to a detector/phase/severity) against drill ``kind``."""
    labels = list(labels)
    starts = _flags_by_run(flags)
    drilled = [lab for lab in labels if kind and lab.kind == kind]
    delays, leads = [], []
    for lab in drilled:
        hit = next((s for s in starts.get(lab.run, []) if s >= lab.onset), None)  # type: ignore[operator]
        if hit is None:
            continue
        delays.append(hit - lab.onset)  # type: ignore[operator]
        if lab.collapse is not None and lab.collapse >= lab.onset:  # type: ignore[operator]
            leads.append(lab.collapse - hit)
    pre = [lab for lab in labels if lab.kind and lab.onset is not None]
    pre_flags = sum(sum(1 for s in starts.get(lab.run, []) if s < lab.onset) for lab in pre)  # type: ignore[operator]
    pre_steps = sum(max(0, lab.onset - lab.first_step) for lab in pre)  # type: ignore[operator]
    healthy = [lab for lab in labels if lab.healthy]
    near = near_best or {}
    return {
        "drilled_runs": len(drilled),
        "flagged_share": len(delays) / len(drilled) if drilled else None,
        "delay_median": _median(delays),
        "lead_median": _median(leads),
        "false_pre_onset_per_1k": _per_1k(pre_flags, pre_steps),
        "false_healthy_per_1k": _per_1k(sum(len(starts.get(lab.run, [])) for lab in healthy),
                                        sum(lab.n_steps for lab in healthy)),
        "critical_near_best": sum(1 for run, s in zip(flags["run"], flags["step_start"], strict=True)
                                  if s in near.get(run, ())),
    }


def score(flags: pd.DataFrame, labels: Iterable[RunLabel], near_best: Mapping[str, set[int]] | None = None,
          all_kinds: bool = False) -> pd.DataFrame:
    """One row per (detector, phase incl. ``*``, severity ≥, drill kind): the detector's own drill kind, or
    with ``all_kinds`` every drill kind present (kind "" rows: detectors no drill targets)."""
    labels = list(labels)
    flags = flags.reindex(columns=FLAG_COLUMNS) if len(flags) else pd.DataFrame(columns=FLAG_COLUMNS)
    rank = flags["severity"].map(SEVERITY_RANK)
    kinds = sorted({lab.kind for lab in labels if lab.kind})
    detectors = sorted(set(flags["detector"]) | {d for k, ds in OWN_DETECTORS.items() if k in kinds for d in ds})
    rows = []
    for det in detectors:
        of_det = flags[flags["detector"] == det]
        phases = [ANY_PHASE, *sorted(set(of_det["phase"]))]
        targets = kinds if all_kinds else [k for k in kinds if det in OWN_DETECTORS.get(k, ())] or [""]
        for phase in phases:
            for sev in SEVERITIES:
                sel = flags[(flags["detector"] == det) & (rank >= SEVERITY_RANK[sev])
                             & ((flags["phase"] == phase) | (phase == ANY_PHASE))]
                sel = sel.assign(step_start=dated(sel, sev))
                for kind in targets:
                    rows.append({"detector": det, "phase": phase, "severity": sev, "drill": kind,
                                 **score_flags(sel, labels, kind, near_best)})
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)
