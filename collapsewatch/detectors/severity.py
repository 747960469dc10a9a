"""The severity gate shared by every detector: no ``critical`` while the reward is at or near its running best.

docs/architecture.md, *Detectors*: ``info`` = worth a look, ``warning`` = a mechanism is under way, ``critical`` = act now — and
never critical while the reward is still at or near its running best (a run whose reward is still rising
to its best is not lost, whatever its entropy or ratios say). A detector's critical finding is lowered to
``warning`` at a step where

    best − now < max(near_best_min, near_best_frac · |best|)

with ``now`` the reward level (median of the last ``smooth_steps`` points of reward_mean) and ``best`` the
highest level over the last ``signals.reward_peak_window`` points — the same levels the reward-drop
confirmation reads (:func:`.signals.reward_drop`). With too few reward points (< 2 · smooth_steps) or no
reward column the gate cannot tell and leaves the severity alone. Detectors in ``exempt`` (default: the
non-finite detector — a NaN in the weights ends the run whatever the reward says) are never lowered.
The evidence of a lowered finding records ``severity_gate`` with both levels.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .config import DetectorConfig
from .events import Finding
from .history import History


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


def gate(finding: Finding | None, detector: str, h: History, cfg: DetectorConfig) -> Finding | None:
    """``finding`` with critical lowered to warning while the reward is near its best (see module doc)."""
    if finding is None or finding.severity != "critical" or not cfg.severity.enabled:
        return finding
    if detector in cfg.severity.exempt:
        return finding
    near = reward_near_best(h, cfg)
    if near is None or not near[0]:
        return finding
    evidence = {**finding.evidence, "severity_gate": {**near[1], "lowered_from": "critical"}}
    return replace(finding, severity="warning", evidence=evidence,
                   message=f"{finding.message} (warning, not critical: reward {near[1]['reward_now']:.3g} is "
                           f"near its best {near[1]['reward_best']:.3g})")
