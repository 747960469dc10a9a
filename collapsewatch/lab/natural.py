"""`lab natural`: detectors scored on runs nobody injected — natural reward collapses, by the lab's one rule.

The drill scores (:mod:`.score`) date a detection from a known onset; a natural collapse has none, so each
detector is scored by how early it warns *before the reward collapses* (``labels.reward_collapse``). A *flag*
is an episode of the detector (any phase) whose worst severity is ≥ warning, dated by the step it first stood at warning (:func:`.score.dated`). Over
the corpus's undrilled runs:

* ``flagged_early_share`` = collapsed runs with a flag starting ≥ ``EARLY`` steps before the collapse / collapsed runs;
* ``lead_median`` = median over collapsed runs flagged before the collapse of (collapse − first flag start);
* ``false_per_1k`` = flags on runs that never collapse, per 1,000 of their steps;
* ``critical_never_collapsed`` = critical flags on runs that never collapse (the target is 0);
* ``undecided_runs`` = runs whose label the run's end decides (:func:`collapsewatch.reward.undecided`: a fall first
  seen in its last ``SUSTAIN`` points, or the only recovery from one) — neither collapsed nor never-collapsed, so
  scored in no column; ``--runs`` says why for each.

Row ``any`` takes every detector's flags together (the issue's target: ≥ 80 % flagged that early by some
detector). :func:`run_table` says what fired where, one row per run.
"""

from __future__ import annotations

import statistics

import pandas as pd

from ..detectors.events import SEVERITY_RANK
from .labels import RunLabel
from .score import dated

EARLY = 20
"""Steps before the reward collapse a flag must start by to count as early."""
NATURAL_COLUMNS = ["detector", "collapsed_runs", "flagged_early_share", "lead_median", "never_collapsed_runs",
                   "false_per_1k", "critical_never_collapsed", "undecided_runs"]


def _flags(flags: pd.DataFrame, severity: str = "warning") -> pd.DataFrame:
    """The flags at ``severity`` or above, each dated by the step it first stood there (:func:`.score.dated`)."""
    hot = flags[flags["severity"].map(SEVERITY_RANK) >= SEVERITY_RANK[severity]]
    return hot.assign(step_start=dated(hot, severity))


def score_natural(flags: pd.DataFrame, labels: list[RunLabel]) -> pd.DataFrame:
    """One row per detector (and ``any``) over the undrilled runs of ``labels`` (module docstring)."""
    natural = [lab for lab in labels if not lab.kind]
    collapsed = [lab for lab in natural if lab.collapse is not None]
    never = [lab for lab in natural if lab.healthy]
    undecided = sum(1 for lab in natural if lab.collapse is None and lab.undecided)
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
            "undecided_runs": undecided,
        })
    return pd.DataFrame(rows, columns=NATURAL_COLUMNS)


def run_table(flags: pd.DataFrame, labels: list[RunLabel]) -> pd.DataFrame:
    """One row per undrilled run: steps, collapse step ("cannot tell" where the run's end decides its label, with why
    in ``undecided``), and per detector its first flag ≥ warning as ``phase@step(severity)`` (worst severity of that
    episode), '' when none; ``criticals``: every critical episode of the run as ``detector/phase@step`` (dated when it
    first stood at critical), '' when none — a detector's cell shows its first flag only, so a critical episode after
    a warning one would not show there (session 47 read "no critical" off those cells on a run that had two);
    ``witness``: "evaluation" where the starting evaluation dated the collapse (:attr:`.labels.RunLabel.witness`),
    else ''."""
    warn = _flags(flags).sort_values("step_start")
    crit = _flags(flags, "critical").sort_values("step_start")
    detectors = sorted(set(flags["detector"]))
    rows = []
    for lab in sorted((lab for lab in labels if not lab.kind), key=lambda lab: lab.run):
        row: dict[str, object] = {"run": lab.run, "steps": lab.n_steps,
                                  "collapse": "cannot tell" if lab.collapse is None and lab.undecided else lab.collapse}
        for det in detectors:
            first = warn[(warn["run"] == lab.run) & (warn["detector"] == det)].head(1)
            row[det] = "" if first.empty else \
                f"{first['phase'].iat[0]}@{int(first['step_start'].iat[0])}({first['severity'].iat[0]})"
        mine = crit[crit["run"] == lab.run]
        row["criticals"] = ", ".join(f"{d}/{p}@{int(t)}" for d, p, t in
                                     zip(mine["detector"], mine["phase"], mine["step_start"], strict=True))
        row["undecided"] = lab.undecided if lab.collapse is None else ""
        row["witness"] = lab.witness
        rows.append(row)
    return pd.DataFrame(rows)


CLAIM_WINDOW = 40
"""Steps of the first and last windows the claim table compares (a run's start and its end)."""
CLAIM_COLUMNS = ["setting", "objective", "runs", "collapsed", "reward_best", "reward_last", "sentinel_L_first",
                 "sentinel_L_last", "sentinel_I_first", "sentinel_I_last", "p05_pos_first", "p05_pos_last"]


def _window_mean(df: pd.DataFrame, column: str, last: bool, stat: str = "mean") -> float | None:
    if column not in df:
        return None
    lo, hi = int(df["step"].min()), int(df["step"].max())
    sel = df[df["step"] > hi - CLAIM_WINDOW] if last else df[df["step"] < lo + CLAIM_WINDOW]
    v = pd.to_numeric(sel[column], errors="coerce").dropna()
    return (float(v.median()) if stat == "median" else float(v.mean())) if len(v) else None


def setting_of(run: str) -> str:
    """The setting part of a corpus run name ``healthy-<objective>-<setting>-s<seed>`` (lab/natural_long.toml)."""
    parts = run.split("-")
    return "-".join(parts[2:-1]) if len(parts) > 3 and parts[-1].startswith("s") else run


def claim_table(frames: dict[str, pd.DataFrame], labels: list[RunLabel], objectives: dict[str, str]) -> pd.DataFrame:
    """The papers' claim on natural runs, per (setting, objective): how many runs collapsed, and medians over runs of
    the best and last reward level, the sentinel L and I over the first and the last ``CLAIM_WINDOW`` steps (means),
    and the A>0 ratio p05 over those windows' off-policy steps (medians). Does the regulariser hold them where GRPO
    falls?"""
    from .labels import reward_level

    rows = []
    for lab in labels:
        if lab.kind:
            continue
        df = frames[lab.run].sort_values("step")
        off = df[df["on_policy"].fillna(False) == False] if "on_policy" in df else df  # noqa: E712
        level, best = reward_level(df["step"].to_numpy(), df["reward_mean"].to_numpy(dtype="float64"))
        rows.append({"setting": setting_of(lab.run), "objective": objectives.get(lab.run, "?"),
                     "collapsed": lab.collapse is not None, "reward_best": float(best[-1]),
                     "reward_last": _window_mean(df, "reward_mean", True),
                     "sentinel_L_first": _window_mean(df, "sentinel_logp_correct_mean", False),
                     "sentinel_L_last": _window_mean(df, "sentinel_logp_correct_mean", True),
                     "sentinel_I_first": _window_mean(df, "sentinel_logp_incorrect_mean", False),
                     "sentinel_I_last": _window_mean(df, "sentinel_logp_incorrect_mean", True),
                     "p05_pos_first": _window_mean(off, "ratio_p05_pos", False, "median"),
                     "p05_pos_last": _window_mean(off, "ratio_p05_pos", True, "median")})
    runs = pd.DataFrame(rows)
    out = []
    for (setting, objective), g in runs.groupby(["setting", "objective"], sort=True) if len(runs) else []:
        out.append({"setting": setting, "objective": objective, "runs": len(g),
                    "collapsed": f"{int(g['collapsed'].sum())}/{len(g)}",
                    **{c: (float(g[c].dropna().median()) if g[c].notna().any() else None) for c in CLAIM_COLUMNS[4:]}})
    return pd.DataFrame(out, columns=CLAIM_COLUMNS)


def restrict_source(frames: dict[str, pd.DataFrame], source: str) -> dict[str, pd.DataFrame]:
    """The frames with the columns of every L source ranked above ``source`` (``detectors.likelihood.SOURCES``)
    set to NULL, so the detectors read L as a run without them would: an ablation (``lab natural --l-source``)."""
    from ..detectors.likelihood import COLUMNS, SOURCES

    if source not in SOURCES:
        raise ValueError(f"--l-source must be one of {', '.join(SOURCES)}, got {source!r}")
    drop = [c for s in SOURCES[: SOURCES.index(source)] for c in COLUMNS[s] if c is not None]
    return {run: df.assign(**{c: None for c in drop if c in df}) for run, df in frames.items()}
