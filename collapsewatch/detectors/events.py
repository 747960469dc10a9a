"""Events and phase episodes: what a detector's per-step verdict becomes.

A detector looks at the step history and says, for each of its phases, one of three things:

* a :class:`Finding` — the phase's rule holds at this step (with severity, metric and evidence);
* ``None`` — the rule was evaluated and does not hold;
* nothing (phase absent from the verdict) — the rule could not be evaluated (inputs NULL, too few points).

:func:`advance` turns verdicts into *episodes*. A phase is entered once its rule has held for
``confirm_steps`` consecutive evaluated steps (an ``immediate`` finding — absolute, needing no history — at the first
one); the episode's first :class:`Event` has
``step_start = step_end =`` that step. Every later step where the rule holds re-emits the episode with
``step_end`` extended (same detector, phase, step_start: the store keeps the latest row). The episode
ends after ``exit_patience`` consecutive evaluated steps where the rule does not hold; its ``step_end``
stays at the last step where it held. Steps without a verdict neither extend nor end an episode.
Severity is the worst seen during the episode — except that an open episode rises to a finding's severity only
once the rule has held ``confirm_steps`` steps in a row (an immediate finding at once), the bar a new episode meets.
That bites after a step where the rule did not hold (and in an episode an immediate finding opened before
``confirm_steps``): an episode kept open through its exit patience is no easier to escalate than a new one would be
to open. Message, value and evidence are those of its last step, plus
``reached``: the step at which the episode first stood at each severity up to its worst (an episode that opens at
info and turns warning later rang as a warning then, not at its start: :func:`reached_step`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, Literal

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}


SEVERITY_LEVEL: dict[str, int] = {"none": 0, **{name: rank + 1 for name, rank in SEVERITY_RANK.items()}}
"""A severity as a number for a tracker's plot: 0 none, 1 info, 2 warning, 3 critical (the detectors' order + 1) —
the ``collapsewatch/severity`` value of the TRL / verl series and ``collapsewatch/episode_severity`` of every tracker
sink."""


def severity_number(severity: str | None) -> int:
    """A severity as a number for a tracker's plot (:data:`SEVERITY_LEVEL`; None: 0, no episode)."""
    return 0 if severity is None else SEVERITY_LEVEL[str(severity)]


def clean(value: Any) -> Any:
    """Evidence values made JSON-safe and stable: floats to 6 significant digits, non-finite to None."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    return float(f"{x:.6g}") if math.isfinite(x) else None


@dataclass(frozen=True)
class Finding:
    """A phase rule that holds at one step: the fields an Event takes from its latest step."""

    severity: Severity
    metric: str
    value: float | None
    threshold: float | None
    window_steps: int | None
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    immediate: bool = False
    """An absolute finding — degenerate output, an abrupt collapse — needs no confirmation: it opens its episode at
    the first point that shows it, whatever the detector's ``confirm_steps`` (a run can end a few points later)."""


Verdict = dict[str, "Finding | None"]


@dataclass(frozen=True)
class Event:
    """One phase episode; fields match the store's ``events`` table except run / rank / source."""

    detector: str
    phase: str
    step_start: int
    step_end: int
    severity: Severity
    metric: str | None
    value: float | None
    threshold: float | None
    window_steps: int | None
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def key(self) -> tuple[str, str, int]:
        """The store's identity of an episode (``EPISODE_KEY``): later rows with the same key supersede earlier
        ones."""
        return (self.detector, self.phase, self.step_start)

    def as_row(self) -> dict[str, Any]:
        """The event as an ``events`` row without run / rank / source; evidence serialised as JSON."""
        return {
            "detector": self.detector, "phase": self.phase, "step_start": self.step_start,
            "step_end": self.step_end, "severity": self.severity, "metric": self.metric,
            "value": self.value, "threshold": self.threshold, "window_steps": self.window_steps,
            "message": self.message, "evidence": json.dumps(self.evidence, sort_keys=True, allow_nan=False),
        }


EPISODE_KEY = ("detector", "phase", "step_start")
"""The columns that identify one run's episode (:attr:`Event.key`; the store's key adds the run)."""
EPISODE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Event))
"""An :class:`Event`'s fields, in order: the ``events`` table's columns that a detector fills."""
EVENT_COLUMNS: tuple[str, ...] = (*EPISODE_FIELDS, "source", "rules")
"""An episode as read back from the store or computed on read (:mod:`collapsewatch.judge`)."""
TIMELINE_COLUMNS: tuple[str, ...] = ("run", *(c for c in EPISODE_FIELDS if c != "window_steps"))
"""The phase timeline of ``detect`` (:func:`collapsewatch.offline.detect_runs`); its CSV adds source and rules."""


def evidence_dict(value: Any) -> dict[str, Any]:
    """An event's evidence as a dict, whether it comes as the dict itself or as the store's JSON text; ``{}`` for
    missing or unreadable evidence (a reader never fails on one bad row)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value else {}
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


def reached_step(evidence: Any, severity: str, step_start: int) -> int:
    """The step at which an episode first stood at ``severity`` or above (its evidence's ``reached``); its
    ``step_start`` for an episode recorded before ``reached`` existed, or one that never rose past it."""
    reached = evidence_dict(evidence).get("reached")
    if isinstance(reached, Mapping):
        steps = [int(s) for level, s in reached.items()
                 if level in SEVERITY_RANK and SEVERITY_RANK[level] >= SEVERITY_RANK[severity] and s is not None]
        if steps:
            return max(min(steps), int(step_start))
    return int(step_start)


def events_frame(run: str, rank: int, events: list[Event], source: str, rules: str) -> dict[str, list[Any]]:
    """Events as columns of the ``events`` table (evidence as strict JSON, written now), each carrying the
    digest of the ``rules`` that found it (:func:`collapsewatch.detectors.rules.rules_digest`)."""
    now = datetime.now(timezone.utc)
    cols: dict[str, list[Any]] = {}
    for ev in events:
        for k, v in dict(ev.as_row(), run=run, rank=rank, source=source, written_at=now, rules=rules).items():
            cols.setdefault(k, []).append(v)
    return cols


@dataclass(frozen=True)
class PhaseState:
    """Tracker state of one (detector, phase): immutable, so a snapshot per step is a dict copy."""

    streak: int = 0
    """Consecutive evaluated steps where the rule held (counts towards confirm_steps)."""
    misses: int = 0
    """Consecutive evaluated steps where the rule did not hold while an episode is open."""
    episode: Event | None = None
    """The open episode's latest version, or None."""


def advance(
    state: PhaseState, step: int, finding: Finding | None, detector: str, phase: str,
    confirm_steps: int, exit_patience: int,
) -> tuple[PhaseState, Event | None]:
    """One evaluated step of one phase: the new state and the event to emit (new or extended), if any."""
    if finding is None:
        if state.episode is None:
            return PhaseState(), None
        misses = state.misses + 1
        return (PhaseState() if misses >= exit_patience else replace(state, streak=0, misses=misses)), None
    streak = state.streak + 1
    if state.episode is None and streak < confirm_steps and not finding.immediate:
        return PhaseState(streak=streak), None
    old = state.episode
    severity = finding.severity
    if old is not None and (SEVERITY_RANK[old.severity] > SEVERITY_RANK[severity]
                            or streak < confirm_steps and not finding.immediate):
        severity = old.severity  # worst seen; no escalation before the rule holds confirm_steps in a row
    reached = dict(old.evidence.get("reached") or {}) if old is not None else {}
    for level, rank in SEVERITY_RANK.items():  # the first step at each level up to this one
        if rank <= SEVERITY_RANK[severity]:
            reached.setdefault(level, step)
    event = Event(
        detector=detector, phase=phase, step_start=old.step_start if old else step, step_end=step,
        severity=severity, metric=finding.metric, value=clean(finding.value), threshold=clean(finding.threshold),
        window_steps=finding.window_steps, message=finding.message,
        evidence=clean({**finding.evidence, "severity_now": finding.severity, "reached": reached}),
    )
    return PhaseState(streak=streak, misses=0, episode=event), event
