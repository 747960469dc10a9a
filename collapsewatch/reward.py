"""The reward level of a run and its collapse rule, and the drill a run's config records — one home, read by the
verdict, the judge, the dashboard and the lab.

* **Reward level**: the median of ``reward_mean`` over the last ``SMOOTH`` logged (non-NULL) points, or over all of
  them while there are fewer, from the ``WARM``-th point on (undefined before it: a median of five is high only when
  three of its points are, so one lucky early rollout does not set the best); the best as shown (the verdict's
  sentence, the runs page) = running max of the level. The short levels of the warm-up give a run that falls inside
  its first ``SMOOTH`` points a best to fall from (chosen on the public sources a rule was tuned on, then held out:
  docs/lab/bench.md, 2026-11-30, "the verdict's warm-up").
* **The rule's best** (noise-aware): a level is a best only as far as it stands above its own noise — floor = level −
  ``NOISE_Z`` × the level's noise, the rule's best = running max of the floor. The level's noise is 1.2533 × (point
  noise) / √(points in its window) (a median's standard error, normal-consistent: ``median_noise``, which the severity
  gate reads too); the point noise is the detectors' estimator (``diff_noise``: the normal-consistent MAD of first
  differences, / √2; both in :mod:`collapsewatch.detectors.history`) over the last ``NOISE_POINTS``
  differences (differences, so a trend is not read as noise). The plain running max of the level picks the luckiest of
  a noisy run's windows: on shuffled rewards (no trend by construction) it read "collapsed" in up to 8 of 10 orders
  (``bench/reward_rule_noise.py``), and on the public corpus it read 14 of 211 healthy runs collapsed. ``NOISE_Z`` 1.5
  was chosen on the public sources a rule was tuned on (the smallest at which none of their healthy runs reads
  collapsed and every authors'-collapsed run the rule read collapsed still does), then held out: docs/lab/bench.md,
  2026-12-01 (session 41), "the reward rule's best net of noise".
* **Reward collapse**: the first step where the level's running max (the best as shown) ≥ ``MIN_BEST``, the rule's
  best b > 0, level ≤ ``COLLAPSE_FRAC`` × b, and the level then stays ≤ ``RECOVER_FRAC`` × b *for the rest of the run
  and for at least* ``SUSTAIN`` *more logged points* (sustained: a dip the run recovers from is not a collapse, and
  neither is a dip in the run's last ``SUSTAIN`` points, which has had no time to recover — the last level then comes
  from a window disjoint from the one that first fell). ``MIN_BEST`` 0.1 keeps runs that never learned out (a best
  under one success in ten is within a rollout's noise of 0) and keeps runs whose best is ≈ 0.15 in: the built-in warm
  starts succeed at ≈ 0.2, and a run that peaks at a level of 0.15 and then scores 0 for 300 steps collapsed.
* **Undecided** (no collapse by the rule, and the run's end decided that): the run's last fall (level ≤
  ``COLLAPSE_FRAC`` × best) was first seen inside its last ``SUSTAIN`` points, or its only recovery from that fall
  (level > ``RECOVER_FRAC`` × best) lies inside them. Either way "never collapsed" rests on fewer points than a
  collapse must last: whether the fall is a collapse, or the recovery lasts, the log cannot tell. The lab lists such
  runs as labels it cannot trust (``collapsewatch.lab.bench``, U3) and scores them nowhere (issue 31: a natural run
  at reward 0 for 100 steps, whose last 3 levels rose, was a "never-collapsed" run with criticals).
* **The starting evaluation as witness**: the reward rule needs a best level to fall from, and a run that dies inside
  its warm-up never has one (reward 0.25, 0.06, 0.06, 0, 0, … has a first level of 0.06: it reads as a run that never
  learned). Where the run logs an evaluation at or before its first reward point (the policy it starts from, scored on
  a held-out set) of at least ``MIN_BEST``, and the reward's best level stays under ``MIN_BEST``, that evaluation is
  the best: the run collapsed at the first later evaluation ≤ ``COLLAPSE_FRAC`` × it, if at least ``SUSTAIN``
  evaluations follow and none of them comes back above ``RECOVER_FRAC`` × it (:func:`start_collapse`; the lab's
  label, not the verdict's). A run whose reward has a best is judged by the reward alone.
* **Drill**: ``drill.kind`` and ``drill.at_step`` from the run's config in the store (the built-in trainer
  records them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .detectors.history import diff_noise, median_noise

SMOOTH = 10
WARM = 5
MIN_BEST = 0.1
COLLAPSE_FRAC = 0.5
RECOVER_FRAC = 0.75
SUSTAIN = 10
NOISE_Z = 1.5
NOISE_POINTS = 5 * SMOOTH


def reward_level(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH) -> tuple[np.ndarray, np.ndarray]:
    """(level, running best) per row: trailing median over the last ``smooth`` non-NaN points (all of them while
    fewer), NaN until ``min(WARM, smooth)`` of them exist, and its running max (-inf before the first level)."""
    reward = np.asarray(reward, dtype="float64")
    logged = ~np.isnan(reward)
    level = np.full(len(reward), np.nan)
    level[logged] = pd.Series(reward[logged]).rolling(smooth, min_periods=min(WARM, smooth)).median().to_numpy()
    best = np.fmax.accumulate(np.where(np.isnan(level), -np.inf, level))
    return level, best


def point_noise(values: np.ndarray, window: int = NOISE_POINTS) -> np.ndarray:
    """Per point, the noise of the points up to it: the detectors' estimator (:func:`collapsewatch.detectors.history.
    diff_noise`, as :meth:`~collapsewatch.detectors.history.Series.noise` reads it; 0 below 3 points) over its last
    ``window`` differences — differences, so a trend is not read as noise."""
    d = np.diff(np.asarray(values, dtype="float64"))
    out = np.zeros(len(d) + 1)
    for i in range(2, min(window, len(d)) + 1):  # the first windows, the growing prefixes
        out[i] = diff_noise(d[:i])
    if len(d) > window:
        ends = np.lib.stride_tricks.sliding_window_view(d, window)[1:]  # the windows ending at d[window], …
        out[window + 1:] = diff_noise(ends)
    return out


def rule_best(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH) -> tuple[np.ndarray, np.ndarray]:
    """(floor, the rule's best) per row (module docstring, "the rule's best"): floor = level − ``NOISE_Z`` × the
    level's noise (NaN where the level is), best = its running max (-inf before the first)."""
    reward = np.asarray(reward, dtype="float64")
    level, _ = reward_level(steps, reward, smooth)
    logged = np.flatnonzero(~np.isnan(reward))
    noise = point_noise(reward[logged])
    floor = np.full(len(reward), np.nan)
    n = np.minimum(np.arange(1, len(logged) + 1), smooth)
    floor[logged] = level[logged] - NOISE_Z * median_noise(noise, n)
    return floor, np.fmax.accumulate(np.where(np.isnan(floor), -np.inf, floor))


def _falls(steps: np.ndarray, reward: np.ndarray, smooth: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(level, the rule's best, the rows where the level fell to ``COLLAPSE_FRAC`` × that best with the run's
    shown best ≥ ``MIN_BEST``), rows among those with a level, in order."""
    level, shown = reward_level(steps, reward, smooth)
    _, best = rule_best(steps, reward, smooth)
    defined = np.flatnonzero(~np.isnan(level))  # rows with a level: logged points past the warm-up
    lv, b = level[defined], best[defined]
    return level, best, np.flatnonzero((shown[defined] >= MIN_BEST) & (b > 0) & (lv <= COLLAPSE_FRAC * b)).tolist()


def reward_collapse(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH,
                    sustain: int = SUSTAIN) -> int | None:
    """First step of a sustained reward collapse by the rule of the module docstring, or None."""
    level, best, falls = _falls(steps, reward, smooth)
    defined = np.flatnonzero(~np.isnan(level))
    for j in falls:
        i = defined[j]
        b = best[i]
        fell = stayed_down(level[defined[j + 1:]], b, sustain)
        if fell is None:  # too close to the run's end to tell a dip from a collapse (nor can any later row)
            return None
        if fell:
            return int(steps[i])
    return None


def stayed_down(later: np.ndarray, best: float, sustain: int = SUSTAIN) -> bool | None:
    """Whether a fall from ``best`` is a collapse by the points after it: None when fewer than ``sustain`` follow
    (the run's end decides), else True when none of them is back above ``RECOVER_FRAC`` × ``best``."""
    if len(later) < sustain:
        return None
    return not np.any(later > RECOVER_FRAC * best)


def start_collapse(steps: np.ndarray, reward: np.ndarray, score: np.ndarray, sustain: int = SUSTAIN) -> int | None:
    """The step of a collapse the starting evaluation witnesses (module docstring), or None: rows in step order,
    ``score`` the evaluation per row (NaN where none was logged)."""
    steps = np.asarray(steps)
    reward, score = np.asarray(reward, dtype="float64"), np.asarray(score, dtype="float64")
    if not len(steps) == len(reward) == len(score):
        raise ValueError(f"start_collapse: steps, reward and score need one value per row (NaN where none was "
                         f"logged); got {len(steps)}, {len(reward)} and {len(score)} rows")
    _, best = reward_level(steps, reward)
    rewarded, evals = np.flatnonzero(~np.isnan(reward)), np.flatnonzero(~np.isnan(score))
    if not len(rewarded) or not len(evals) or best[-1] >= MIN_BEST or steps[evals[0]] > steps[rewarded[0]]:
        return None  # the reward rule has a best (it alone judges), or no evaluation saw the starting policy
    start, later = score[evals[0]], evals[1:]
    if not start >= MIN_BEST:
        return None
    for j, i in enumerate(later):
        if score[i] > COLLAPSE_FRAC * start:
            continue
        fell = stayed_down(score[later[j + 1:]], start, sustain)
        if fell is None:
            return None
        if fell:
            return int(steps[i])
    return None


@dataclass(frozen=True)
class Pending:
    """A fall the run's last ``SUSTAIN`` points decide (module docstring, "Undecided"): the reward level ``level`` ≤
    ``COLLAPSE_FRAC`` × ``best`` (the rule's best, net of noise) at ``step``; ``back`` the step the level first came
    back above ``RECOVER_FRAC`` × best (None: it has not); ``left`` the logged points after the step that decides
    (``back``, else ``step``)."""

    step: int
    level: float
    best: float
    back: int | None
    left: int

    def text(self, fmt: str = ".3g") -> str:
        """"the reward level fell to … at step …[ and came back at step …], with N logged point(s) after it" — the one
        wording the lab's reason and the verdict's note share."""
        back = f" and came back at step {self.back}" if self.back is not None else ""
        return (f"the reward level fell to {self.level:{fmt}} (≤ {COLLAPSE_FRAC:g} × its best {self.best:{fmt}}, "
                f"net of noise) at step {self.step}{back}, with {self.left} logged point(s) after it")


def pending(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH, sustain: int = SUSTAIN) -> Pending | None:
    """The run's last fall where its end decides its label (None where it does not, or the run collapsed)."""
    if reward_collapse(steps, reward, smooth, sustain) is not None:
        return None
    level, best, falls = _falls(steps, reward, smooth)
    defined = np.flatnonzero(~np.isnan(level))
    for j in falls:
        i = defined[j]
        b = best[i]
        later = defined[j + 1:]
        if len(later) < sustain:
            return Pending(int(steps[i]), float(level[i]), float(b), None, len(later))
        up = np.flatnonzero(level[later] > RECOVER_FRAC * b)
        if up[0] >= len(later) - sustain:  # no collapse by the rule, so the level did come back (up is not empty)
            return Pending(int(steps[i]), float(level[i]), float(b), int(steps[later[up[0]]]), len(later) - up[0] - 1)
    return None


def undecided(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH, sustain: int = SUSTAIN) -> str:
    """Why the run's end decides its label ("" where it does not, or the run collapsed): the lab's reason."""
    p = pending(steps, reward, smooth, sustain)
    if p is None:
        return ""
    return p.text() + f": too few to tell a {'collapse' if p.back is None else 'recovery'}"


def drill_of(config: Mapping[str, Any] | str | None) -> tuple[str, int | None]:
    """(kind, onset) from a run's stored config (parsed, or its JSON); ("", None) without a drill."""
    if isinstance(config, str) or config is None:
        try:
            config = json.loads(config) if config else {}
        except json.JSONDecodeError:
            return "", None
    drill = config.get("drill") or {}
    if not drill.get("kind"):
        return "", None
    return str(drill["kind"]), int(drill["at_step"])
