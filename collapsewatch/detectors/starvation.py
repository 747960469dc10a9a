"""Signal starvation, phase ``starvation``: groups whose rewards are all equal have zero GRPO advantage.

level(zero_std_group_frac) ≥ warn_frac holds. Whether that is a *starved* policy (all-wrong groups: no signal, the
policy lost) or a *solved* task (all-correct groups: nothing collapses; the remedy is harder prompts or dynamic
sampling) is told from what the run has, first that tells:

1. ``correct_frac``: its level ≥ 0.5 → all-correct, else all-wrong;
2. the reward's level against its range. Per-response rewards lie in [lo, hi]; a share z of the groups is
   all-equal (each at lo or hi), the rest average anywhere in [lo, hi]. With p = (reward level − lo) / (hi − lo),
   the share a of the all-equal groups that sit at hi obeys

       (p − (1 − z)) / z  ≤  a  ≤  p / z

   so a ≥ 0.5 for sure once p ≥ 1 − z / 2 (at z = 0.8: p ≥ 0.6 — "near the top of its range", derived, no
   threshold of its own) → all-correct; a < 0.5 for sure once p < z / 2 → all-wrong. lo = min(0, lowest reward
   level): rewards that never go negative are floored at 0 (accuracy, format, their sums). hi = the largest of the
   reward levels and, where ``reward_std`` s is logged beside a reward mean r > lo, r + s² / (r − lo): a variable
   in [lo, hi] has variance ≤ (hi − r)(r − lo) (Bhatia–Davis), exact for a 0/1 reward — so a run logging only
   reward 0.9 and reward_std 0.3 reads hi = 1, and one stuck at 0.3 with std 0.46 reads hi = 1 too, not 0.3 (the
   sample std, n − 1, makes the bound a little wider still). Both are lower bounds of the per-response maximum
   (the Bhatia–Davis one exact for a 0/1 reward): a range estimated too narrow puts a level nearer its top than it
   is, towards "solved". So a range narrower than the reward-drop margin (:func:`.signals.drop_needed` of hi: at
   least 0.05 reward units) is no range: the reward never rose materially above its floor, its all-equal groups
   sit at the floor — all-wrong, nothing earned (a base model at reward 0.004 would otherwise read as the top of
   [0, 0.004], i.e. solved).
3. otherwise (no correctness, no reward, or p between the two bounds): cannot tell.

Read from ``correct_frac`` where the run logs no zero-std share: a step where every response was wrong
(``correct_frac`` 0) or every one right (1) has only all-equal groups — its share is 1 — and any other step's share is
not known, so it is read as 0. That is a lower bound of the share at every step, so its level is too: the rule fires
on it only where the true share's level would fire, and reads its groups from ``correct_frac`` as above (the message
says "at least"). A run of one prompt a step logs its share as 0 or 1 directly; this is for logs of the share correct
alone (a Countdown run whose ``correct_frac`` fell to 0 at its 9th step had no zero-std column and no episode;
docs/lab/bench.md, session 27).

One group a step: a share logged only as 0 and 1 — both seen, nothing else — is a run of one prompt a step, each
point one group. Its 5-point median is 1 whenever 3 of 5 single groups
answered alike, which a healthy run whose groups are all-equal 40 % of the time does about once in three windows
(binomial: P(≥ 3 of 5 | 0.4) = 0.32). Its level is the share of all-equal groups over its last ``single_points``
points (the mean; ≥ warn_frac 0.8 of 20 is ≥ 16 of 20 groups, P ≈ 0.0003 at 0.4), read from half as many. A share
derived from ``correct_frac`` (0 or 1 by construction) and a run whose share has been 1 at every point so far keep
the 5-point median.

Two or three groups a step (:func:`.signals.groups_a_step`: every logged share a multiple of 1/g, one strictly
between 0 and 1): each point is g groups, and its 5-point median is as loose — at two groups, three points of both
groups alike fill it, which a healthy run whose groups are all-equal 40 % of the time does in 3 % of windows
(P(≥ 3 of 5 | 0.16)), several times over a long run. So its level is the mean share over ⌈single_points / g⌉ points
(10 at two groups, 7 at three: the same 20 groups), read from half as many (session 44: a healthy TRL run of two
prompts a step warned at its 25th step). From four groups a step, ⌈20 / 4⌉ = 5 points is the 5-point level already.
The solved-or-starved split then reads the reward (or ``correct_frac``) as the mean over those same points: the
bound on the all-correct share holds for a position and a share of the same groups, and a 5-point reward median
beside a 20-group share flipped a solved one-prompt run to "all-wrong" on a few format-only steps (session 46).

Timing: the rule reads a level, the median of the last ``smooth_steps`` points — it holds once most of them are
≥ warn_frac — so that median is its confirmation (``confirm_steps`` = 1) and it is not read before the run has
⌈smooth_steps / 2⌉ points (at 5: 3; a level of one or two points confirms nothing).

Cold start: all-wrong groups before the run has earned anything — the best reward level since its first point
(else correct_frac's) is above the floor by less than the reward-drop margin (:func:`.signals.drop_needed`) — are a
base model that cannot solve the prompts yet, a configuration finding like ``length/budget``: ``info``, the message
says so. Read while the history still holds the run's first point (``history_steps``): a run that earned nothing in
that long is stuck, and its starvation is a warning again.

Severity: all-wrong → warning, critical when in addition the mean over the last critical_window points is
≥ critical_frac (sustained: a few all-equal steps in a row are ordinary for small batches of groups); all-correct
→ ``info`` (solved); cannot tell → ``info`` (the message says so). Why: runs at reward 0.8–1.0 from their first
step that log no correctness column are solving their prompts, and a warning there fires on healthy and collapsed
runs alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, StarvationConfig
from .events import Finding, Verdict
from .history import History, Series
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector
from .signals import drop_needed, groups_a_step, reward_range

SOLVED, STARVED, UNKNOWN = "all-correct", "all-wrong", "cannot tell"


def cold_start(h: History, cfg: DetectorConfig) -> bool:
    """Whether the run has earned nothing since it started (module doc, *cold start*): its reward (else its
    correct_frac) window still holds its first point, and the best level in it is above the floor by less than
    :func:`.signals.drop_needed` of that best."""
    for key in ("reward_mean", "correct_frac"):
        r = h.series(key, cfg.history_steps)
        if len(r):
            break
    else:
        return False
    first = h.first(key, 1)
    if not len(first) or r.steps[0] != first.steps[0]:
        return False  # the window has moved past the run's start: older than a cold start
    levels = r.levels(min(cfg.smooth_steps, len(r)))
    best, lo = float(levels.max()), min(0.0, float(levels.min()))
    return best - lo < drop_needed(best, cfg)


def zero_std(h: History, n: int) -> tuple[Series, str]:
    """The last ``n`` points of the zero-std group share and where they come from: as logged (``"logged"``), or —
    where the run never logged one — its lower bound from ``correct_frac`` (module doc; ``"correct_frac"``)."""
    zs = h.series("zero_std_group_frac", n)
    if len(zs) or len(h.first("zero_std_group_frac", 1)):
        return zs, "logged"
    c = h.series("correct_frac", n)
    return Series(c.steps, ((c.values == 0.0) | (c.values == 1.0)).astype(float)), "correct_frac"


def groups(h: History, z: float, cfg: DetectorConfig, points: int | None = None) -> tuple[str, dict]:
    """all-correct / all-wrong / cannot tell for a zero-std share ``z`` (module doc), with what told it. ``points``:
    ``z`` is the mean share of the last this-many points (few groups a step), and the levels read here are means over
    those same points — the bound holds for a reward position and a share of the same groups; None: ``smooth_steps``
    -point medians, as the share's level."""
    k = cfg.smooth_steps

    def level(key: str) -> float:
        x = h.series(key, points or k)
        return float(x.values.mean()) if points else x.level(k)

    if len(h.series("correct_frac", k)):
        correct = level("correct_frac")
        return (SOLVED if correct >= 0.5 else STARVED), {"told_by": "correct_frac", "correct_frac_level": correct}
    rng = reward_range(h, cfg.history_steps, k)
    if rng is None:
        return UNKNOWN, {"told_by": None}
    lo, hi = rng
    r = level("reward_mean")
    ev = {"told_by": "reward range", "reward_level": r, "reward_lo": lo, "reward_hi": hi}
    if hi - lo < drop_needed(hi, cfg):  # no material range: nothing earned (module doc)
        return STARVED, ev
    p = (r - lo) / (hi - lo)
    low, high = (p - (1 - z)) / z, p / z
    ev.update(reward_position=p, solved_share_low=low, solved_share_high=high)
    return (SOLVED if low >= 0.5 else STARVED if high < 0.5 else UNKNOWN), ev


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level = _num(ev.get("zero_std_group_frac_level"))
    if level is None:
        return None
    what = reading(ev.get("groups", UNKNOWN), bool(ev.get("cold_start")), short=True)
    return (f"{level:.0%} of groups got equal rewards for every response (no GRPO signal; {what}), "
            f"reward level {_f(ev.get('reward_level'))}")


def _groups(g: int) -> str:
    return "one group" if g == 1 else f"{g} groups"


def reading(kind: str, cold: bool, short: bool = False) -> str:
    """What the all-equal groups are, in words — the one wording of the episode's message (``short`` = False) and of
    the detect table's sentence (``short``: without the remedy)."""
    what = {SOLVED: "mostly all-correct" + ("" if short else ": a solved task, not starvation"),
            STARVED: "mostly all-wrong", UNKNOWN: "cannot tell all-correct from all-wrong"}[kind]
    if cold:
        what += "; nothing earned yet: a cold start" + ("" if short else ", not a collapse")
    return what


@register_detector(primary=("zero_std_group_frac", "correct_frac"), config=StarvationConfig, sentence=_sentence, colour="#8d6e63",
                   phase_names={"starvation": "signal starvation"}, drills=("starvation",))
class Starvation:
    name = "starvation"
    phases = ("starvation",)
    inputs = ("zero_std_group_frac", "correct_frac", "reward_mean", "reward_std")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.starvation, self.cfg.smooth_steps
        zs, source = zero_std(h, k)
        if h.row.num("zero_std_group_frac" if source == "logged" else "correct_frac") is None:
            return {}
        g = groups_a_step(h, self.cfg) if source == "logged" else None
        single = g is not None
        if single:  # few groups a step: the share of the last single_points groups (module doc)
            window = math.ceil(c.single_points / g)
            zs = h.series("zero_std_group_frac", window)
            if len(zs) < (window + 1) // 2:  # fewer groups than a level rests on
                return {"starvation": None}
            level = float(zs.values.mean())
        else:
            if len(zs) < (k + 1) // 2:  # a level of 1–2 points is no confirmation (confirm_steps is 1: the level is)
                return {"starvation": None}
            level, window = zs.level(k), k
        if level < c.warn_frac:
            return {"starvation": None}
        kind, told = groups(h, level, self.cfg, window if single else None)
        sustained = zero_std(h, c.critical_window)[0]
        mean = float(sustained.values.mean())
        reward = h.series("reward_mean", k)
        ev = {"zero_std_group_frac_level": level, "groups": kind,
              "reward_level": reward.level(k) if len(reward) else None, **told,
              "zero_std_group_frac_mean": mean, "mean_points": len(sustained), "zero_std_from": source,
              "one_group_a_step": g == 1, "groups_a_step": g, "level_points": len(zs) if single else min(k, len(zs))}
        critical = len(sustained) >= c.critical_window and mean >= c.critical_frac
        cold = kind == STARVED and c.cold_start and cold_start(h, self.cfg)
        ev["cold_start"] = cold
        severity = "warning" if kind == STARVED and not cold else "info"
        if severity == "warning" and critical:
            severity = "critical"
        return {"starvation": Finding(
            severity, "zero_std_group_frac", level, c.warn_frac, window,
            f"signal starvation: {'' if source == 'logged' else 'at least '}{level:.0%} of groups have zero reward std"
            f"{f' ({_groups(g)} a step: {round(level * len(zs) * g)} of the last {len(zs) * g})' if single else ''}"
            f" ({reading(kind, cold)}{'' if source == 'logged' else '; read from correct_frac'})", ev)}
