"""The severity gate shared by every detector: ``critical`` means harm.

docs/architecture.md, *Detectors*: ``info`` = worth a look, ``warning`` = a mechanism is under way, ``critical`` = act now. A mechanism
seen while the run still learns is a warning at most: a detector's critical finding stays critical only
at a step where the reward shows harm — a **sustained fall from its best**: each of the last ``sustain_levels``
reward levels (median of ``smooth_steps`` points of reward_mean) is below the running best level (over
``signals.reward_peak_window`` points) by the reward-drop margin, max(``signals.reward_drop_min``,
``signals.reward_drop_frac`` · |best|), and the run of such levels has lasted ``sustain_steps`` steps
(:func:`.signals.reward_fall`): a fall that recovers within them was a dip. Otherwise — the reward near its best, a
one-level dip, no reward column, too few reward points to have a best — it is lowered to ``warning`` and the evidence
records ``severity_gate`` (the levels, ``lowered_from``).

Findings that are harm by themselves are never lowered: the entries of ``exempt``, a detector (``"nonfinite"``: a
NaN ends the run whatever the reward says) or one phase (``"length/degenerate"``, ``"entropy/degenerate"``:
degenerate output is the failure, not a sign of one).

Degenerate output present since the run's first logged point — no point so far out of it (:meth:`.History.highest`)
— is a run that never started, not harm training did: those phases say so at ``warning`` (:data:`NEVER_STARTED`),
like ``length/budget`` (a budget set too low from the start) and ``starvation.cold_start``; critical where the run
was out of it before.

The older, weaker promise — never critical while the reward is within ``near_best_frac`` of its best — is implied
(a sustained drop of ≥ 25 % is not near the best) and kept as :func:`near_best_points`, which the lab scores.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .config import DetectorConfig
from .events import Finding
from .history import History
from .signals import reward_fall

NEVER_STARTED = ("a run that never started (check the chat template, the stop tokens and the generation settings), "
                 "not harm done by training: a warning; critical where the run was out of it before")
"""The one wording of degenerate output since the run's first point (module doc)."""


def near_best(levels: np.ndarray, cfg: DetectorConfig) -> tuple[bool, dict[str, float]]:
    """The gate's rule on the reward levels of one window (the last is "now"): best − now < margin."""
    g = cfg.severity
    best, now = float(levels.max()), float(levels[-1])
    margin = max(g.near_best_min, g.near_best_frac * abs(best))
    return best - now < margin, {"reward_best": best, "reward_now": now, "margin": margin}


def reward_near_best(h: History, cfg: DetectorConfig) -> tuple[bool, dict[str, float]] | None:
    """Whether the reward level is within the gate's margin of its running best; None when it cannot tell."""
    k = cfg.smooth_steps
    r = h.series("reward_mean", cfg.signals.reward_peak_window)
    if len(r) < 2 * k:
        return None
    return near_best(r.levels(k), cfg)


def near_best_points(reward: np.ndarray, cfg: DetectorConfig | None = None) -> np.ndarray:
    """(n,) bool per point of a whole reward series (NaN points dropped by the caller): whether the gate
    would call the reward near its best there — exactly :func:`reward_near_best` at each point (the lab
    scores "critical near best" with this, so the promise it checks is the one the gate keeps). Points
    where the gate cannot tell (< 2 · smooth_steps so far) are False."""
    cfg = cfg or DetectorConfig()
    k, window = cfg.smooth_steps, cfg.signals.reward_peak_window
    values = np.asarray(reward, dtype="float64")
    out = np.zeros(len(values), dtype=bool)
    if len(values) < k:
        return out
    levels = np.median(np.lib.stride_tricks.sliding_window_view(values, k), axis=1)  # levels[j] ends at j+k−1
    for i in range(2 * k - 1, len(values)):
        lo = max(0, i - window + 1)  # the gate's window: the last `window` points, levels of full k inside
        out[i] = near_best(levels[lo:i - k + 2], cfg)[0]
    return out


def exempt(detector: str, phase: str, cfg: DetectorConfig) -> bool:
    """Whether a (detector, phase)'s critical is harm by itself (``severity.exempt``: detector or detector/phase)."""
    return detector in cfg.severity.exempt or f"{detector}/{phase}" in cfg.severity.exempt


def gate(finding: Finding | None, detector: str, h: History, cfg: DetectorConfig, phase: str = "") -> Finding | None:
    """``finding`` with critical lowered to warning unless the reward fell and stayed down (see module doc)."""
    if finding is None or finding.severity != "critical" or not cfg.severity.enabled:
        return finding
    if exempt(detector, phase, cfg):
        return finding
    fell, ev = reward_fall(h, cfg, cfg.severity.sustain_levels, cfg.severity.sustain_steps)
    if fell:
        return finding
    if fell is None:
        why = "no reward fall to show harm (too few reward points)"
    elif "fallen_steps" in ev:  # below the best long enough in levels, not yet in steps
        why = (f"reward {ev['reward_now']:.3g} has been below its best {ev['reward_best']:.3g} by {ev['drop_needed']:.3g} "
               f"for {ev['fallen_steps']} steps, fewer than {ev['sustain_steps']}")
    else:
        why = f"reward {ev['reward_now']:.3g} has not stayed below its best {ev['reward_best']:.3g} by {ev['drop_needed']:.3g}"
    evidence = {**finding.evidence, "severity_gate": {**ev, "lowered_from": "critical"}}
    return replace(finding, severity="warning", evidence=evidence,
                   message=f"{finding.message} (warning, not critical: {why})")
