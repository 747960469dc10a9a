"""`lab bench`: every labelled corpus scored in one table, per source and overall, pooled and held out by source.

Definitions (fixed before any figure was looked at; the constants below are the only knobs):

* **Source.** Every run belongs to one source: a public run to its repository (``lab/public/sources.csv``: the
  ``source`` column where the file has one, else ``repo``); the shipped sample runs to ``sample_runs``; a store
  given as ``--store NAME=PATH`` to NAME. Sources are the unit of holding out.
* **Label** (:mod:`.labels`, one rule): drill kind and onset from the run's config, the reward collapse by
  :func:`.labels.reward_collapse`; a labels CSV row overrides both.
* **Collapse step E**: the label's collapse step; else, for a run whose labels-CSV row names a kind and an onset but
  no collapse, that onset (``lab/public/labels.csv`` dates a collapse the logs show — a length or grad blow-up — by
  its onset). A drill onset from a run's config is *not* a collapse: the drill injects, the run may hold.
* **Untrusted labels** are listed with their reason and scored nowhere:
  U1 a drilled run (kind from its config) whose derived collapse is before its drill onset — the fall is not the
  drill's; U2 a derived collapse (not given in a labels CSV) whose reward best was set at one of the run's first
  ``NOISY_POINTS`` = 2 × ``labels.SMOOTH`` = 20 logged reward points. The rule's level is the median of the last
  ``SMOOTH`` (10) points (of all of them from the 5th while fewer: :mod:`collapsewatch.reward`); a level set before
  point 20 still has start-up points in its window, so the "best" it falls from is the
  run's noisy starting level, not a level the run learned (issue 31: drilled runs "collapsing" at step 14 from a
  10-point level at their start, 18 steps before their drill) — not asked of a collapse the starting evaluation
  witnesses (``RunLabel.witness``: its best is an evaluation of the starting policy, not a reward level); U3 a
  derived "no collapse" that the run's last ``SUSTAIN`` points decide (:func:`collapsewatch.reward.undecided`: a
  fall first seen there, or the only recovery from one) — fewer points than a collapse must last, so the log
  cannot tell.
* **Classes** of the trusted runs: *collapsed* (E set), *healthy* (no drill, no E: every alarm on it is false),
  *other* (a drilled run that did not collapse: counted, not scored).
* **Alarm**: an offline detector episode (``detect_frame``, today's rules or ``--detectors``) whose worst severity
  is ≥ warning. **Dated** by the step it first stood at the severity counted (:func:`.score.dated`: an episode that
  opened at info and turned warning later rang as a warning then, not at its start). **Flag class** (detector, phase, s): the episodes of that phase whose
  worst severity is ≥ s (s = info, warning, critical; score.py's convention).
* **Share of healthy runs a class fires on**, over a set H of healthy runs: runs of H with an episode of the class /
  |H|. A class is **specific** on H when |H| > 0 and that share is ≤ ``SPECIFIC_MAX`` (10 %). An alarm of
  (detector, phase) with worst severity w is a **specific flag** when class (detector, phase, w) is specific (≥
  critical is a subset of ≥ warning, so a critical can count where its phase's warnings do not); it rang when it
  first stood at the least severity s ≤ w whose class is specific.
* **Pooled (in-sample)**: H = the healthy runs of every source. **Held out** (leave one source out): for the runs
  of source S, H = the healthy runs of every *other* source — which flags count is decided without S. The overall
  held-out row adds up each source's held-out figures.
* **Alike in its own source**: on a *collapsed* run of source S, a flag counts only if its class also fires on at
  most ``SPECIFIC_MAX`` of S's own healthy runs (S without a healthy run cannot tell). A flag that fires on a
  source's healthy and collapsed runs alike — one setup's quirk, which no other source's healthy runs show — is not
  evidence of the collapse, pooled or held out. (This judges; it chooses nothing: the flags that count on S are
  still decided without S's collapses.) Healthy runs' alarms are counted without it: every one is false.
* **Collapsed runs**: *flagged* — a specific flag rings at or before E; *early* — one rings ≥ ``EARLY`` (20)
  steps before E; *lead* — E − the step the first specific flag rang, median over flagged runs; *each source once*
  — the mean, over the sources with a collapse, of the share of their collapses flagged (``flagged_source_mean_*``
  over ``collapse_sources``), so one source with many runs of one setup cannot carry the figure alone.
* **Standing at the collapse**: a flagged collapse whose counting flag (specific, not alike) was still standing
  when the run collapsed — an episode dated at or before E whose last held step (``step_end``) is at most
  ``WITHIN_POINTS`` logged points before E, or later. A flag that rang and ended long before the collapse (a
  start-up warning 1,000 steps earlier) counts as flagged by the definition above, but a user who looked at the
  run at E would have seen no alarm: ``flagged_standing_*`` says how many of the flagged had one up.
* **Early collapses**: E is among the run's first ``FIRST_POINTS`` (10) logged points (fewer than 10 step rows
  before it); *caught* — a specific flag rings at most ``WITHIN_POINTS`` (2) logged points after E (or before it).
* **Blind logs**: a run whose log holds none of the columns that let a detector see a collapse coming before its
  reward falls (:func:`collapsewatch.verdict.signal_columns`: entropy, gradient norm, group statistics, log-probs,
  policy ratios) — a reward-only log, whose verdict says so. Collapsed blind runs are counted in every figure, and
  ``flagged ≤ collapse`` is also given over the collapsed runs whose log has a signal (``flagged_signal_*`` of
  ``collapsed_signal``), so a miss no rule could have caught is told apart from one a rule should have; and healthy
  runs with an alarm over the healthy runs whose log has one (``healthy_alarmed_signal`` of ``healthy_signal``): a
  reward-only healthy log is quiet by construction, and would lower the warned share without testing any rule.
* **Why not flagged** (since session 53): each collapsed run not flagged says why — alike, not specific, blind,
  late or silent (:mod:`.bench_misses`); per row, ``missed_<reason>_pooled|held``.
* **Criticals on collapsed runs** (no specificity filter): runs whose first critical rang at or before E, runs whose
  first came after E, and the median of (its step − E) over the latter — in ``--json`` (``critical_by_collapse``,
  ``critical_after_collapse``, ``critical_lag_median``; per run ``first_critical``), the cost of criticals that need
  harm, beside the early flags.
* **Healthy runs** (no specificity filter: the alarms as a user sees them): runs with an alarm, runs with a
  critical, alarms per 1,000 healthy steps (a run's steps = last − first + 1); and runs with a specific alarm,
  pooled and held out.

For a fixed rule a count summed over held-out folds equals the pooled count; what is held out is the choice the
bench makes from data — which flags are specific. A detector rule tuned on some sources is judged held out by
reading the rows of the other sources.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..detectors.events import SEVERITY_RANK
from ..reward import rule_best
from .bench_intervals import class_interval
from .bench_misses import miss, miss_counts
from .labels import SMOOTH, RunLabel
from .natural import EARLY
from .score import SEVERITIES, dated

SPECIFIC_MAX = 0.10
"""A flag class firing on more than this share of healthy runs is not evidence of a collapse (issue 31)."""
FIRST_POINTS = 10
"""A collapse at one of a run's first this many logged points is an early collapse."""
WITHIN_POINTS = 2
"""An early collapse is caught by a specific flag at most this many logged points after it."""
NOISY_POINTS = 2 * SMOOTH
"""A derived collapse whose best was set within a run's first this many reward points is untrusted (U2)."""
ALARM = "warning"

Key = tuple[str, str, str]
"""A flag class: (detector, phase, severity ≥)."""


@dataclass(frozen=True)
class BenchRun:
    """One run of the bench: its source, class (healthy / collapsed / other / untrusted) and logged steps."""

    source: str
    run: str
    status: str
    collapse: int | None
    n_steps: int
    steps: tuple[int, ...] = field(repr=False)
    reason: str = ""
    blind: bool = False
    """The log holds none of ``verdict.signal_columns`` (module doc: blind logs)."""
    inputs: frozenset[str] | None = None
    """The detectors' primary columns that hold a value somewhere in the run; None: not known (every detector then
    counts as applicable to it)."""

    def logs_inputs_of(self, primary: tuple[str, ...]) -> bool:
        """Whether the run logs any of a detector's ``primary`` columns (unknown inputs: yes)."""
        return self.inputs is None or not self.inputs.isdisjoint(primary)


def best_point(steps: np.ndarray, reward: np.ndarray, at_step: int) -> int | None:
    """Index among the logged reward points where ``reward.rule_best`` as at ``at_step`` was first reached, or None."""
    reward = np.asarray(reward, dtype="float64")
    floor, best = rule_best(steps, reward)
    rows = np.flatnonzero(np.asarray(steps) <= at_step)
    if not len(rows) or not np.isfinite(best[rows[-1]]):
        return None
    first = int(np.flatnonzero(floor[: rows[-1] + 1] == best[rows[-1]])[0])
    return int((~np.isnan(reward[:first])).sum())


def classify(source: str, label: RunLabel, steps: np.ndarray, reward: np.ndarray, csv_label: bool,
             blind: bool = False, inputs: frozenset[str] | None = None) -> BenchRun:
    """The run's bench class by the module docstring (E, U1, U2, U3); ``blind``: its log holds no signal column;
    ``inputs``: the detectors' primary columns it logs (:attr:`BenchRun.inputs`)."""
    collapse = label.collapse
    if collapse is None and csv_label and label.kind and label.onset is not None:
        collapse = label.onset
    status, reason = ("collapsed" if collapse is not None else "other" if label.kind else "healthy"), ""
    if not csv_label and label.collapse is not None:
        if label.kind and label.onset is not None and label.collapse < label.onset:
            status, reason = "untrusted", f"U1: collapse at {label.collapse} before the drill onset {label.onset}"
        elif not label.witness:  # a best the starting evaluation set is not the reward's (U2 reads the reward)
            k = best_point(steps, reward, label.collapse)
            if k is not None and k < NOISY_POINTS:
                status, reason = "untrusted", (f"U2: collapse at {label.collapse} from a best set at reward point "
                                               f"{k} (< {NOISY_POINTS})")
    if not csv_label and label.undecided:
        status, reason = "untrusted", f"U3: {label.undecided}"
    return BenchRun(source, label.run, status, collapse, label.n_steps, tuple(int(s) for s in np.sort(steps)),
                    reason, blind, inputs)


def fired(flags: pd.DataFrame, runs: set[str]) -> dict[Key, set[str]]:
    """Per flag class, the runs of ``runs`` with an episode of it."""
    out: dict[Key, set[str]] = {}
    for r in flags[flags["run"].isin(runs)].itertuples(index=False):
        for s in SEVERITIES:
            if SEVERITY_RANK[r.severity] >= SEVERITY_RANK[s]:
                out.setdefault((r.detector, r.phase, s), set()).add(r.run)
    return out


@dataclass(frozen=True)
class Specificity:
    """Which flag classes are specific on a set of healthy runs."""

    fired: dict[Key, set[str]]
    n_healthy: int

    def share(self, key: Key) -> float | None:
        return len(self.fired.get(key, ())) / self.n_healthy if self.n_healthy else None

    def specific(self, key: Key) -> bool:
        share = self.share(key)
        return share is not None and share <= SPECIFIC_MAX


def specificity(flags: pd.DataFrame, runs: list[BenchRun], exclude: str | None = None,
                only: str | None = None) -> Specificity:
    """Specificity on the healthy runs of every source but ``exclude`` (None: pooled), or of source ``only``."""
    healthy = {r.run for r in runs if r.status == "healthy" and r.source != exclude and only in (None, r.source)}
    return Specificity(fired(flags, healthy), len(healthy))


def folds(flags: pd.DataFrame, runs: list[BenchRun]) -> dict[str, Specificity]:
    """Held-out specificity per source (its own healthy runs left out)."""
    return {s: specificity(flags, runs, exclude=s) for s in sorted({r.source for r in runs})}


def own_sources(flags: pd.DataFrame, runs: list[BenchRun]) -> dict[str, Specificity]:
    """Per source, the flag classes its own healthy runs fire on (module doc: alike)."""
    return {s: specificity(flags, runs, only=s) for s in sorted({r.source for r in runs})}


def _point(steps: tuple[int, ...], step: int) -> int:
    """Index of ``step`` among the run's logged steps (the number of logged steps before it)."""
    return int(np.searchsorted(np.asarray(steps), step, side="left"))


def counts(key: Key, spec: Specificity, own: Specificity | None = None) -> bool:
    """Whether a flag of class ``key`` counts: specific on ``spec``'s healthy runs and, with ``own`` (the healthy runs
    of the flagged run's own source), not firing on more than ``SPECIFIC_MAX`` of them (module doc: alike)."""
    share = own.share(key) if own is not None else None
    return spec.specific(key) and (share is None or share <= SPECIFIC_MAX)


def _counting(alarms: pd.DataFrame, spec: Specificity, own: Specificity | None = None) -> Iterator[tuple[int, float]]:
    """(the step it rang, its last held step or NaN) of each alarm at each severity from warning up to its worst whose
    class (detector, phase, ≥ s) counts (:func:`counts`), dated by when it first stood at s (:func:`.score.dated`)."""
    ends = alarms["step_end"] if "step_end" in alarms.columns else pd.Series(np.nan, index=alarms.index)
    for sev in ("warning", "critical"):
        hot = alarms["severity"].map(SEVERITY_RANK) >= SEVERITY_RANK[sev]
        for d, p, s, end in zip(alarms["detector"][hot], alarms["phase"][hot], dated(alarms[hot], sev), ends[hot],
                                strict=True):
            if counts((d, p, sev), spec, own):
                yield int(s), end


def _first_specific(alarms: pd.DataFrame, spec: Specificity, own: Specificity | None = None) -> int | None:
    """The first step a specific flag rang: per alarm, the least severity s from warning up to its worst whose class
    counts, dated by when the alarm first stood at s."""
    return min((s for s, _ in _counting(alarms, spec, own)), default=None)


def _standing(alarms: pd.DataFrame, spec: Specificity, own: Specificity | None, r: BenchRun) -> bool:
    """Whether a counting flag was standing at the run's collapse E (module doc): an alarm dated at or before E whose
    ``step_end`` is at most ``WITHIN_POINTS`` logged points before E, or later (an unknown end: standing)."""
    if r.collapse is None or not len(alarms):
        return False
    last = _point(r.steps, r.collapse) - WITHIN_POINTS
    return any(s <= r.collapse and (pd.isna(end) or _point(r.steps, int(end)) >= last)
               for s, end in _counting(alarms, spec, own))


def run_record(r: BenchRun, alarms: pd.DataFrame, pooled: Specificity, held: Specificity,
               own: Specificity | None = None) -> dict:
    """Per run: what the bench counts for it (``alarms``: its episodes ≥ warning; ``own``: the healthy runs of its
    source, read for a collapsed run only — module doc, alike)."""
    own = own if r.status == "collapsed" else None
    first = {"pooled": _first_specific(alarms, pooled, own), "held": _first_specific(alarms, held, own)}
    rec: dict = {"source": r.source, "run": r.run, "status": r.status, "collapse": r.collapse, "steps": r.n_steps,
                 "alarms": len(alarms), "critical": bool((alarms["severity"] == "critical").any()),
                 "first_alarm": int(dated(alarms, ALARM).min()) if len(alarms) else None,
                 "first_critical": int(dated(crit, "critical").min()) if len(crit := alarms[alarms["severity"]
                                                                                         == "critical"]) else None,
                 "first_specific_pooled": first["pooled"], "first_specific_held": first["held"],
                 "first_points": r.collapse is not None and _point(r.steps, r.collapse) < FIRST_POINTS,
                 "reason": r.reason, "blind": r.blind}
    rec.update({f"standing_{how}": _standing(alarms, spec, own, r) for how, spec in (("pooled", pooled),
                                                                                     ("held", held))})
    for how, f in first.items():
        rec[f"caught_{how}"] = (f is not None and r.collapse is not None
                                and _point(r.steps, f) <= _point(r.steps, r.collapse) + WITHIN_POINTS)
        spec = pooled if how == "pooled" else held  # why not flagged (bench_misses): the own-source test left out
        rec[f"miss_{how}"] = (miss(r.collapse, f, _first_specific(alarms, spec), rec["first_alarm"], r.blind)
                              if r.status == "collapsed" else None)
    return rec


def run_records(runs: list[BenchRun], flags: pd.DataFrame) -> pd.DataFrame:
    """One record per run (:func:`run_record`), each judged with the pooled and its source's held-out specificity."""
    pooled, held, own = specificity(flags, runs), folds(flags, runs), own_sources(flags, runs)
    alarms = flags[flags["severity"].map(SEVERITY_RANK) >= SEVERITY_RANK[ALARM]]
    by_run = {k: g for k, g in alarms.groupby("run")}
    empty = alarms.iloc[0:0]
    return pd.DataFrame([run_record(r, by_run.get(r.run, empty), pooled, held[r.source], own[r.source])
                         for r in runs])


def _with_signal(recs: pd.DataFrame) -> pd.Series:
    """Per record, whether its log holds a signal column (not blind; records without the field: all do)."""
    return ~recs["blind"].astype(bool) if "blind" in recs else pd.Series(True, index=recs.index)


def summarise(recs: pd.DataFrame, name: str) -> dict:
    """The bench figures of one group of run records (a source, or all of them), as counts."""
    col = recs[recs["status"] == "collapsed"]
    healthy = recs[recs["status"] == "healthy"]
    row: dict = {"source": name, "runs": len(recs), "healthy": len(healthy), "collapsed": len(col),
                 "other": int((recs["status"] == "other").sum()),
                 "untrusted": int((recs["status"] == "untrusted").sum())}
    early_col = col[col["first_points"].astype(bool)]
    seen = _with_signal(col)
    row["collapsed_signal"] = int(seen.sum())
    row["collapse_sources"] = int(col["source"].nunique())
    for how in ("pooled", "held"):
        first = col[f"first_specific_{how}"]
        hit = [pd.notna(f) and f <= e for e, f in zip(col["collapse"], first, strict=True)]
        before = [(int(e), int(f)) for (e, f), h in zip(zip(col["collapse"], first, strict=True), hit, strict=True) if h]
        row[f"flagged_{how}"] = len(before)
        # each source with a collapse counts once: the mean over those sources of the share of their collapses
        # flagged — a source with many runs of one kind cannot carry the figure alone
        per_source = pd.Series(hit, index=col.index, dtype=float).groupby(col["source"]).mean()
        row[f"flagged_source_mean_{how}"] = float(per_source.mean()) if len(per_source) else None
        row[f"flagged_signal_{how}"] = int(sum(h for h, s in zip(hit, seen, strict=True) if s))
        standing = col[f"standing_{how}"] if f"standing_{how}" in col else pd.Series(False, index=col.index)
        row[f"flagged_standing_{how}"] = int(sum(h and bool(s) for h, s in zip(hit, standing, strict=True)))
        row[f"early_{how}"] = sum(e - f >= EARLY for e, f in before)
        row[f"lead_median_{how}"] = float(statistics.median(e - f for e, f in before)) if before else None
        row[f"first10_caught_{how}"] = int(early_col[f"caught_{how}"].sum())
        row[f"healthy_specific_{how}"] = int(healthy[f"first_specific_{how}"].notna().sum())
    # when a critical came on a collapsed run (no specificity filter: criticals as shipped) — the price of "critical
    # means harm", reported beside the early flags
    crit = [(int(e), int(c)) for e, c in zip(col["collapse"], col["first_critical"], strict=True) if pd.notna(c)]
    after = [c - e for e, c in crit if c > e]
    row.update(miss_counts(col))
    row.update({"critical_by_collapse": sum(c <= e for e, c in crit), "critical_after_collapse": len(after),
                "critical_lag_median": float(statistics.median(after)) if after else None})
    steps = int(healthy["steps"].sum())
    lit = _with_signal(healthy)
    row.update({"healthy_signal": int(lit.sum()), "healthy_alarmed_signal": int((healthy["alarms"][lit] > 0).sum())})
    row.update({"first10_collapses": len(early_col), "healthy_alarmed": int((healthy["alarms"] > 0).sum()),
                "healthy_critical": int(healthy["critical"].sum()),
                "healthy_alarms_per_1k": 1000.0 * int(healthy["alarms"].sum()) / steps if steps else None})
    return row


def group_sources(recs: pd.DataFrame, tuned_on: list[str] | None = None) -> dict[str, list[str]]:
    """The table's group rows — with ``tuned_on``, one over those sources and one over the rest; then ``all`` —
    by name, each with the sources it sums."""
    sources = sorted(set(recs["source"]))
    rest = [s for s in sources if s not in set(tuned_on or ())]
    return ({f"tuned on ({len(set(tuned_on))} source(s))": sorted(set(sources) - set(rest)),
             f"not tuned on ({len(rest)} source(s))": rest} if tuned_on else {}) | {"all": sources}


def bench_table(recs: pd.DataFrame, tuned_on: list[str] | None = None) -> pd.DataFrame:
    """One row per source, then the group rows of :func:`group_sources` (:func:`summarise` each); ``tuned_on``: the
    sources a rule change was designed on — the row over every other source is the rule's held-out figure."""
    unknown = sorted(set(tuned_on or ()) - set(recs["source"]))
    if unknown:
        raise ValueError(f"--tuned-on: no source {', '.join(map(repr, unknown))} "
                         f"(sources: {', '.join(sorted(set(recs['source'])))})")
    rows = [summarise(g, s) for s, g in recs.groupby("source", sort=True)] if len(recs) else []
    return pd.DataFrame([*rows, *(summarise(recs[recs["source"].isin(members)], name)
                                  for name, members in group_sources(recs, tuned_on).items())])


def trust_rows(runs: list[BenchRun], flags: pd.DataFrame) -> list[dict]:
    """Per flag class with an episode anywhere in the bench: healthy runs it fired on (all sources), collapsed runs
    it preceded (an episode starting at or before E), and those it preceded where it counted held out (specific on
    the other sources, not alike in its own: :func:`counts`); in how many sources' folds it was specific; and how many
    of the healthy and collapsed runs log any of the detector's primary columns (``*_applicable``: a detector that
    reads tool calls or rollout log-probs can fire only on those), with a 95 % interval over sources for the share
    of those fired on and preceded (``healthy_fired_ci``, ``preceded_ci``). The rows ``collapsewatch.trust`` reads."""
    from ..detectors.registry import specs

    primary = {name: spec.primary for name, spec in specs().items()}
    trusted = [r for r in runs if r.status in ("healthy", "collapsed")]
    held, own = folds(flags, trusted), own_sources(flags, trusted)
    collapse = {r.run: r.collapse for r in trusted if r.status == "collapsed"}
    source = {r.run: r.source for r in trusted}
    healthy_fired = fired(flags, {r.run for r in trusted if r.status == "healthy"})
    preceded: dict[Key, set[str]] = {}
    for sev in SEVERITIES:  # class (d, p, ≥ sev) preceded E: an episode at sev or above by E, dated when it got there
        hot = flags[flags["severity"].map(SEVERITY_RANK) >= SEVERITY_RANK[sev]]
        when = dated(hot, sev)
        for run, d, p, s in zip(hot["run"], hot["detector"], hot["phase"], when, strict=True):
            if collapse.get(run) is not None and s <= collapse[run]:
                preceded.setdefault((d, p, sev), set()).add(run)
    keys = sorted(fired(flags, set(source)), key=lambda k: (k[0], k[1], SEVERITY_RANK[k[2]]))
    n_healthy = sum(r.status == "healthy" for r in trusted)
    logging = {(d, s): [r.run for r in trusted if r.status == s and r.logs_inputs_of(primary.get(d, ()))]
               for d in {k[0] for k in keys} for s in ("healthy", "collapsed")}
    return [{"detector": k[0], "phase": k[1], "severity": k[2], "healthy_fired": len(healthy_fired.get(k, ())),
             "healthy_runs": n_healthy, "healthy_applicable": len(logging[(k[0], "healthy")]),
             "healthy_fired_ci": class_interval(healthy_fired.get(k, set()), logging[(k[0], "healthy")], source),
             "preceded": len(preceded.get(k, ())), "collapsed_runs": len(collapse),
             "collapsed_applicable": len(logging[(k[0], "collapsed")]),
             "preceded_ci": class_interval(preceded.get(k, set()), logging[(k[0], "collapsed")], source),
             "preceded_held_out": sum(counts(k, held[source[r]], own[source[r]]) for r in preceded.get(k, ())),
             "specific_sources": sum(f.specific(k) for f in held.values()), "sources": len(held)}
            for k in keys]
