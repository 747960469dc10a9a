"""Gradient explosion on the pre-clip global ``grad_norm``, phase ``explosion``.

grad_norm ≥ bar × the median over the previous ``window`` steps (current step excluded), where
bar = max(spike_factor, exp(spike_z · σ)) and σ is the robust spread (1.4826 · MAD) of log grad_norm in
that window: a run whose grad norm is naturally jumpy needs a bigger jump. An isolated step over the bar is
an ``info`` spike (gradient clipping usually absorbs it); warning once sustain_steps consecutive rows are
over it; critical at ≥ critical_factor × the median. confirm_steps = 1: the first step opens the episode,
which keeps the worst severity it reaches.
A non-finite grad_norm is the non-finite detector's business (NaN cannot be told from NULL).
"""

from __future__ import annotations

import numpy as np

from .config import DetectorConfig
from .events import Finding, Verdict
from .history import History


class Grad:
    name = "grad"
    phases = ("explosion",)
    inputs = ("grad_norm",)

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c = self.cfg.grad
        g = h.row.num("grad_norm")
        if g is None:
            return {}
        points = h.series("grad_norm", c.window + 1)  # its last point is this step's
        ref = points.head(1)
        if len(ref) < c.min_points:
            return {}
        median = float(np.median(ref.values))
        if median <= 0 or g < c.spike_factor * median:
            return {"explosion": None}
        logs = np.log(np.maximum(ref.values, 1e-12))
        spread = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
        bar = max(c.spike_factor, float(np.exp(c.spike_z * spread)))
        if g < bar * median:
            return {"explosion": None}
        run = 0  # consecutive logged points over the bar, this one included (NULL rows are not points)
        for prev in points.values[::-1]:
            if prev < bar * median or run >= c.sustain_steps:
                break
            run += 1
        severity = ("critical" if g >= max(c.critical_factor, bar) * median
                    else "warning" if run >= c.sustain_steps else "info")
        ev = {"grad_norm": g, "reference_median": median, "ratio": g / median, "bar": bar,
              "log_spread": spread, "reference_points": len(ref), "consecutive_over_bar": run}
        return {"explosion": Finding(
            severity, "grad_norm", g, bar * median, c.window,
            f"gradient explosion: grad_norm {g:.3g} = {g / median:.1f} × its median {median:.3g} "
            f"over {c.window} steps", ev)}
