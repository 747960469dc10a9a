"""Entropy collapse and blow-up on ``entropy_mean`` (nats), phases ``collapse`` and ``blowup``.

* collapse (warning): level < collapse_abs, or level < collapse_frac × the *normal peak*: the highest level
  over the history that was not itself a blow-up (below blowup_factor × the history median). Without that
  exclusion a blow-up to 5 nats would set the bar at 0.5 and the run's ordinary level (≈ 0.3 on the tiny
  model, where it started) would read as a collapse once the blow-up passed;
* blow-up (critical): level ≥ blowup_factor × the median of entropy_mean over the history.

Both need min_points points in the history. The history is bounded (history_steps), so a blow-up that
lasts longer than about half of it becomes the new median and its episode ends: by then the run is gone.
"""

from __future__ import annotations

import numpy as np

from .config import DetectorConfig
from .events import Finding, Verdict
from .history import History


class Entropy:
    name = "entropy"
    phases = ("collapse", "blowup")
    inputs = ("entropy_mean",)

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.entropy, self.cfg.smooth_steps
        if h.row.num("entropy_mean") is None:
            return {}
        e = h.series("entropy_mean", self.cfg.history_steps)
        if len(e) < max(c.min_points, k):
            return {}
        level = e.level(k)
        levels, median = e.levels(k), float(np.median(e.values))
        normal = levels[levels < c.blowup_factor * median] if median > 0 else levels
        peak = float(normal.max() if len(normal) else levels.max())
        ev = {"entropy_level": level, "entropy_peak": peak, "entropy_median": median, "points": len(e)}
        verdict: Verdict = {"collapse": None, "blowup": None}
        collapse_at = max(c.collapse_abs, c.collapse_frac * peak)
        if level < collapse_at:
            verdict["collapse"] = Finding(
                "warning", "entropy_mean", level, collapse_at, self.cfg.history_steps,
                f"entropy collapse: level {level:.3g} nats < {collapse_at:.3g} (peak {peak:.3g})", ev)
        blowup_at = c.blowup_factor * median
        if median > 0 and level >= blowup_at:
            verdict["blowup"] = Finding(
                "critical", "entropy_mean", level, blowup_at, self.cfg.history_steps,
                f"entropy blow-up: level {level:.3g} nats ≥ {c.blowup_factor:g} × median {median:.3g}", ev)
        return verdict
