"""`lab natural`: detectors scored on runs nobody injected — natural reward collapses, by the lab's one rule.

The drill scores (:mod:`.score`) date a detection from a known onset; a natural collapse has none, so each
detector is scored by how early it warns *before the reward collapses* (``labels.reward_collapse``). A *flag*
is an episode of the detector (any phase) whose worst severity is ≥ warning, dated by its ``step_start``. Over
the corpus's undrilled runs:

* ``flagged_early_share`` = collapsed runs with a flag starting ≥ ``EARLY`` steps before the collapse / collapsed runs;
* ``lead_median`` = median over collapsed runs flagged before the collapse of (collapse − first flag start);
* ``false_per_1k`` = flags on runs that never collapse, per 1,000 of their steps;
* ``critical_never_collapsed`` = critical flags on runs that never collapse (the target is 0).

Row ``any`` takes every detector's flags together (the issue's target: ≥ 80 % flagged that early by some
detector). :func:`run_table` says what fired where, one row per run.
"""

from __future__ import annotations

import statistics

import pandas as pd

from ..detectors.events import SEVERITY_RANK
from .labels import RunLabel

EARLY = 20
"""Steps before the reward collapse a flag must start by to count as early (issue 24 §3)."""
NATURAL_COLUMNS = ["detector", "collapsed_runs", "flagged_early_share", "lead_median", "never_collapsed_runs",
                   "false_per_1k", "critical_never_collapsed"]


def _flags(flags: pd.DataFrame, severity: str = "warning") -> pd.DataFrame:
    return flags[flags["severity"].map(SEVERITY_RANK) >= SEVERITY_RANK[severity]]


def score_natural(flags: pd.DataFrame, labels: list[RunLabel]) -> pd.DataFrame:
    """One row per detector (and ``any``) over the undrilled runs of ``labels`` (module docstring)."""
    natural = [lab for lab in labels if not lab.kind]
    collapsed = [lab for lab in natural if lab.collapse is not None]
    never = [lab for lab in natural if lab.collapse is None]
    warn = _flags(flags)
    rows = []
    for det in [*sorted(set(flags["detector"])), "any"]:
        mine = warn if det == "any" else warn[warn["detector"] == det]
        starts = {run: sorted(g["step_start"].astype(int)) for run, g in mine.groupby("run")}
        early, leads = 0, []
        for lab in collapsed:
            before = [s for s in starts.get(lab.run, []) if s <= lab.collapse]  # type: ignore[operator]
            if before:
                leads.append(lab.collapse - before[0])  # type: ignore[operator]
                early += before[0] <= lab.collapse - EARLY  # type: ignore[operator]
        crit = mine[mine["severity"] == "critical"]
        never_runs = {lab.run for lab in never}
        steps = sum(lab.n_steps for lab in never)
        rows.append({
            "detector": det, "collapsed_runs": len(collapsed),
            "flagged_early_share": early / len(collapsed) if collapsed else None,
            "lead_median": float(statistics.median(leads)) if leads else None,
            "never_collapsed_runs": len(never),
            "false_per_1k": 1000.0 * sum(len(starts.get(r, [])) for r in never_runs) / steps if steps else None,
            "critical_never_collapsed": int(crit["run"].isin(never_runs).sum()),
        })
    return pd.DataFrame(rows, columns=NATURAL_COLUMNS)


def run_table(flags: pd.DataFrame, labels: list[RunLabel]) -> pd.DataFrame:
    """One row per undrilled run: steps, collapse step, and per detector its first flag ≥ warning as
    ``phase@step(severity)`` (worst severity of that episode), '' when none."""
    warn = _flags(flags).sort_values("step_start")
    detectors = sorted(set(flags["detector"]))
    rows = []
    for lab in sorted((lab for lab in labels if not lab.kind), key=lambda lab: lab.run):
        row: dict[str, object] = {"run": lab.run, "steps": lab.n_steps, "collapse": lab.collapse}
        for det in detectors:
            first = warn[(warn["run"] == lab.run) & (warn["detector"] == det)].head(1)
            row[det] = "" if first.empty else \
                f"{first['phase'].iat[0]}@{int(first['step_start'].iat[0])}({first['severity'].iat[0]})"
        rows.append(row)
    return pd.DataFrame(rows)
