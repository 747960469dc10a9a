"""One verdict per run — healthy / warning / collapsed, when and why in one sentence.

    verdict(episodes, steps, reward, drill=("lld", 24)) -> Verdict       # pure: no store, no Dash

* **collapsed** — the reward collapsed by the one rule (:func:`collapsewatch.reward.reward_collapse`):
  ``Collapsed at step 84 (reward 0.42 → 0.07). First warning at 54: entropy blow-up, 30 steps earlier. Worst:
  critical.`` (with ``First critical at …`` too when the first critical came later or is another episode). The two rewards are the best reward level before the collapse and the last level of the run
  (level = the trailing median, :func:`collapsewatch.reward.reward_level`).
* **warning** — no collapse, but an episode of severity warning or critical: ``Warning from step 54: entropy
  blow-up. No reward collapse in 200 steps (reward best 0.45 at 120). Worst: critical.``
* **healthy** — neither: ``No warning in 200 steps; reward best 0.80 at 199.`` (info episodes are named by
  their count).

A run with a ``length / budget`` episode (truncation at the cap from its first points: a configuration finding)
gets one note in any of the three: ``Note: 95 % of responses hit the length budget from the start: raise the
completion length.`` (:func:`budget_note`). So does a run whose latest points decide whether its reward collapsed
(:func:`collapsewatch.reward.pending`): ``Note: the reward level fell to 0.31 (≤ 0.5 × its best 0.69, net of noise) at step
395, with 4 logged point(s) after it: a collapse once it has stayed down 10 points.`` — or, where the level came
back within them,
``… too early to tell whether the recovery holds.`` (:func:`pending_note`; "No reward collapse" alone would hide a
reward that just halved). So does a run whose log holds none of the signals that come before a
collapse — no entropy, gradient norm, group statistics, log-probs or policy ratios (:func:`signal_columns`), a
reward-only log: ``Note: the log has no entropy, gradient norm, group statistics or log-probs, the signals that come
before a collapse: only the reward is watched.`` (:func:`blind_note`), so that "No warning" is read for what it is.
A reward that went below 0 gets a note where the rule judged it (its fractions are of the best from 0, not from the
reward's lowest) or could not (a best under ``MIN_BEST``): :func:`signed_note`.

First warning = the episode that stood at warning or above first, dated by the step it did (an episode that
opened at info and turned warning later rang then, not at its start: ``reached`` in its evidence,
:func:`collapsewatch.detectors.events.reached_step`); its lead = collapse step − that step (negative: it came
after). First critical likewise. A drill run ends with ``Drill: lld from step 24.`` The run page, ``runs``,
``detect`` and ``watch --json`` all print this sentence (:mod:`collapsewatch.judge` feeds it the episodes of
the reader's rules). ``reader_order`` is the one order episodes are listed in for a person: grouped by detector ·
phase, the cause first (worst severity, then earliest), the noise (info) last.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from .detectors.events import SEVERITY_RANK, evidence_dict, reached_step
from .detectors.registry import specs
from .reward import MIN_BEST, SUSTAIN, Pending, pending, reward_collapse, reward_level

Status = Literal["healthy", "warning", "collapsed"]
NO_STEPS = "no steps"
"""What ``collapsewatch runs`` and the dashboard show in place of the verdict of a run with no step recorded (a live
run before its first step, a run that crashed before it): :attr:`Verdict.shown`. Its status stays ``healthy`` —
nothing fell; ``detect --json``, ``watch`` and the trackers' tags read the status — and its sentence says there is
nothing to judge."""

PHASE_NAMES: dict[tuple[str, str], str] = {(name, phase): text for name, spec in specs().items()
                                           for phase, text in spec.phase_names.items()}
"""How a (detector, phase) is named in a sentence (each detector's ``phase_names``); others read ``detector phase``
with spaces."""


def phase_name(detector: str, phase: str) -> str:
    name = PHASE_NAMES.get((detector, phase))
    if name is not None:
        return name
    return detector if phase == detector else f"{detector} {phase.replace('_', ' ')}"


def reader_order(events: pd.DataFrame) -> pd.DataFrame:
    """Episodes for a reader, grouped by detector · phase: the group with the worst severity first (ties: the
    group whose worst episodes began first), the noise (info) last; within a group, in order of start. A fresh index: position k
    is the episode's id on the run page."""
    if events.empty:
        return events.reset_index(drop=True)
    rank = -events["severity"].map(lambda s: SEVERITY_RANK.get(str(s), -1))
    by = [events["detector"], events["phase"]]
    worst = rank.groupby(by).transform("min")
    # a group is placed by its worst episodes: the first of them (a harmless early warning of a phase that later
    # turns critical does not pull the group before another phase's earlier critical)
    start = events["step_start"].where(rank == worst).groupby(by).transform("min")
    keys = pd.DataFrame({"_g_rank": worst, "_g_start": start}, index=events.index)
    order = events.join(keys).sort_values(["_g_rank", "_g_start", "detector", "phase", "step_start"],
                                          kind="stable")
    return order.drop(columns=["_g_rank", "_g_start"]).reset_index(drop=True)


def budget_note(events: pd.DataFrame) -> str:
    """`` Note: 95 % of responses hit the length budget from the start (responses 127 tokens on average): raise the
    completion length.`` for a run with a ``length / budget`` episode (a configuration finding, info: named once,
    never a collapse alarm); ``""`` without one. The share is the latest episode's truncated level."""
    if events.empty:
        return ""
    hit = events[(events["detector"] == "length") & (events["phase"] == "budget")]
    if hit.empty:
        return ""
    last = hit.sort_values("step_end", kind="stable").iloc[-1]
    tokens = evidence_dict(last.get("evidence")).get("response_length_level")
    size = f" (responses {tokens:.0f} tokens on average)" if isinstance(tokens, (int, float)) else ""
    return (f" Note: {float(last['value']):.0%} of responses hit the length budget from the start{size}: raise the "
            "completion length.")


BLIND_TO_DETECTORS_EXCEPT = ("length", "nonfinite", "evaluation")
"""The detectors whose columns do not count as an early signal for :func:`signal_columns`: response length is
named in the note on its own, a non-finite value is the failure itself, and an evaluation score is an outcome like
the reward (it falls with the collapse, not before it)."""


def signal_columns() -> tuple[str, ...]:
    """The columns whose values let a detector see a collapse coming before the reward falls: the primary columns
    (``@register_detector(primary=…)``) of every detector but :data:`BLIND_TO_DETECTORS_EXCEPT`'s."""
    return tuple(sorted({c for name, spec in specs().items() if name not in BLIND_TO_DETECTORS_EXCEPT
                         for c in spec.primary}))


def pending_note(p: Pending | None) -> str:
    """The verdict's note for a run whose latest points decide whether its reward collapsed
    (:func:`collapsewatch.reward.pending`): a fall too recent to be a collapse yet, or a recovery too recent to count;
    ``""`` without one."""
    if p is None:
        return ""
    then = (f"a collapse once it has stayed down {SUSTAIN} points" if p.back is None else
            "too early to tell whether the recovery holds")
    return f" Note: {p.text('.2f')}: {then}."


def signed_note(reward: np.ndarray, best: float | None, judged: bool) -> str:
    """The verdict's note for a reward that went below 0 (``reward``: per step, NaN where not logged; ``best``: the
    best level, None without one; ``judged``: the verdict names a collapse or a pending fall). The rule's fractions
    are of the best from 0 (:mod:`collapsewatch.reward`), which on a signed reward (a ±1 grade, a penalty) is not the
    bottom of its range; ``""`` for a reward that never went below 0, or where the rule judged nothing."""
    logged = reward[np.isfinite(reward)]
    if not len(logged) or logged.min() >= 0:
        return ""
    lowest = f"lowest {_f(float(logged.min()))}"
    if judged:
        return (f" Note: the reward goes below 0 ({lowest}), and the collapse rule measures its fall to half the best "
                "from 0, not from that lowest: on a signed reward (a ±1 grade, a penalty), confirm the fall on the "
                "reward chart.")
    if best is not None and best < MIN_BEST:
        return (f" Note: the reward's best level is {_f(best)} ({lowest}): the collapse rule needs a best of at least "
                f"{MIN_BEST:g} to fall from, so it cannot judge this signed reward — read the reward chart.")
    return ""


def blind_note(length_logged: bool, eval_logged: bool = False, reward_logged: bool = True) -> str:
    """The verdict's note for a log without any of :func:`signal_columns` (``length_logged``: it has
    ``response_length_mean``; ``eval_logged``: ``eval_score``; ``reward_logged``: a reward on some step)."""
    seen = [*(["the reward"] if reward_logged else []), *(["the response length"] if length_logged else []),
            *(["the evaluation score"] if eval_logged else [])]
    head = " Note: the log has no entropy, gradient norm, group statistics or log-probs, the signals that come before a collapse"
    if not seen:
        return (f"{head}, and no reward: nothing is watched (its keys may have names ingest does not know: "
                "docs/ingest.md lists the ones it reads; ingest --map KEY=COLUMN reads others).")
    watched = seen[0] + " is" if len(seen) == 1 else ", ".join(seen[:-1]) + " and " + seen[-1] + " are"
    return f"{head}: only {watched} watched."


@dataclass(frozen=True)
class Verdict:
    """A run's verdict; ``sentence`` is what a person reads, the fields are what a script reads."""

    status: Status
    sentence: str
    n_steps: int
    last_step: int | None
    collapse_step: int | None
    reward_before: float | None
    """Best reward level before the collapse (or over the run, without one)."""
    reward_best_step: int | None
    reward_after: float | None
    """The run's last reward level (None before the level's window is full)."""
    first_warning_step: int | None
    first_warning: str | None
    lead_steps: int | None
    worst: str | None
    n_episodes: int
    drill: str
    onset: int | None
    blind: bool = False
    """True when the log holds none of :func:`signal_columns` (the sentence then ends with :func:`blind_note`)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def shown(self) -> str:
        """The verdict as the runs table and the dashboard show it: the status, or :data:`NO_STEPS`."""
        return NO_STEPS if self.n_steps == 0 else self.status


def n_steps_text(n: int) -> str:
    """``1 step``, ``2 steps``: a count of steps as the sentences and the trainer's summary line write it."""
    return f"{n} step{'s' if n != 1 else ''}"


def _when(lead: int) -> str:
    steps = n_steps_text(abs(lead))
    return f"{steps} earlier" if lead > 0 else "at the same step" if lead == 0 else f"{steps} after it"


def _first(events: pd.DataFrame, severities: tuple[str, ...] = ("warning", "critical")) -> Mapping[str, Any] | None:
    """The episode of one of ``severities`` that rang first (ties: detector, phase), or None; ``at`` = the step it
    first stood at the least of ``severities`` (:func:`reached_step`: an info episode that turned warning later rang
    then, not at its start)."""
    if events.empty:
        return None
    hot = events[events["severity"].isin(list(severities))]
    if hot.empty:
        return None
    least = min(severities, key=SEVERITY_RANK.__getitem__)
    evidence = hot["evidence"] if "evidence" in hot.columns else pd.Series([None] * len(hot), index=hot.index)
    at = [reached_step(e, least, s) for e, s in zip(evidence, hot["step_start"], strict=True)]
    hot = hot.assign(at=at)
    return hot.sort_values(["at", "detector", "phase"], kind="stable").iloc[0].to_dict()


def _worst(events: pd.DataFrame) -> str | None:
    if events.empty:
        return None
    return max(events["severity"].astype(str), key=lambda s: SEVERITY_RANK.get(s, -1))


def _f(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.2f}"


def _best(before: float | None, step: int | None, reward: np.ndarray) -> str:
    """The verdict's reward clause: its best level and step, or why there is none."""
    if before is not None:
        return f"reward best {_f(before)} at {step}"
    return "too few reward points to judge" if np.isfinite(reward).any() else "no reward logged"


def verdict(events: pd.DataFrame, steps: Sequence[int] | np.ndarray, reward: Sequence[float] | np.ndarray,
            drill: tuple[str, int | None] = ("", None), logged: Collection[str] | None = None) -> Verdict:
    """The verdict of a run from its episodes (rows of the ``events`` view's columns), its step numbers and
    ``reward_mean`` per step (NaN where not logged), its drill (kind, onset; ``""`` = none) and the columns its
    log holds a value of (``logged``; None: not known, no note on them)."""
    steps = np.asarray(steps, dtype=np.int64)
    reward = np.asarray(reward, dtype="float64")
    n_steps = int(steps.max() - steps.min() + 1) if len(steps) else 0
    collapse = reward_collapse(steps, reward) if len(steps) else None
    level, _ = reward_level(steps, reward) if len(steps) else (np.empty(0), np.empty(0))
    upto = level[steps <= collapse] if collapse is not None else level
    has = ~np.isnan(upto)
    best_i = int(np.nanargmax(upto)) if has.any() else None
    before = float(upto[best_i]) if best_i is not None else None
    best_step = int(steps[best_i]) if best_i is not None else None
    defined = level[~np.isnan(level)]  # the last level: a run logging its reward every k-th step (TRL's
    after = float(defined[-1]) if len(defined) else None  # steps_per_generation) has none on its last step
    first = _first(events)
    first_step = int(first["at"]) if first is not None else None
    first_name = phase_name(str(first["detector"]), str(first["phase"])) if first is not None else None
    lead = collapse - first_step if collapse is not None and first_step is not None else None
    worst = _worst(events)
    kind, onset = drill
    if collapse is not None:
        status: Status = "collapsed"
        text = f"Collapsed at step {collapse} (reward {_f(before)} → {_f(after)})."
        if first is None:
            text += " No warning before it."
        else:
            text += f" First warning at {first_step}: {first_name}, {_when(lead)}."
            crit = _first(events, ("critical",))
            same = crit is not None and (crit["detector"], crit["phase"], crit["step_start"]) == \
                (first["detector"], first["phase"], first["step_start"])
            if crit is not None and not (same and int(crit["at"]) == first_step):
                cs = int(crit["at"])
                text += (f" First critical at {cs}: {phase_name(str(crit['detector']), str(crit['phase']))}, "
                         f"{_when(collapse - cs)}.")
    elif first is not None:
        status = "warning"
        text = f"Warning from step {first_step}: {first_name}. No reward collapse in {n_steps_text(n_steps)} ({_best(before, best_step, reward)})."
    elif not len(steps):
        status = "healthy"
        text = "No steps recorded: nothing to judge."
    else:
        status = "healthy"
        text = f"No warning in {n_steps_text(n_steps)}; {_best(before, best_step, reward)}."
    if worst is not None:
        text += f" Worst: {worst}." if status != "healthy" else f" {len(events)} info episode(s)."
        if status == "warning" and worst == "critical":  # the badge says warning: why, beside "Worst: critical"
            text += " The run is marked warning, not collapsed, because its reward has not collapsed."
    text += budget_note(events)
    late = pending(steps, reward) if collapse is None and len(steps) else None
    text += pending_note(late)
    text += signed_note(reward, before, collapse is not None or late is not None)
    blind = logged is not None and len(steps) > 0 and not set(logged) & set(signal_columns())
    if blind:
        text += blind_note("response_length_mean" in set(logged), "eval_score" in set(logged),
                           bool(np.isfinite(reward).any()))
    if kind:
        text += f" Drill: {kind} from step {onset}" + ("; no warning after it." if status == "healthy" else ".")
    return Verdict(status=status, sentence=text, n_steps=n_steps,
                   last_step=int(steps.max()) if len(steps) else None, collapse_step=collapse,
                   reward_before=before, reward_best_step=best_step, reward_after=after,
                   first_warning_step=first_step, first_warning=first_name, lead_steps=lead, worst=worst,
                   n_episodes=int(len(events)), drill=kind, onset=onset, blind=blind)
