"""Gradient explosion on the pre-clip global ``grad_norm``, phase ``explosion``.

A point is *over the bar* at grad_norm ≥ bar × the median over the previous ``window`` points (current
excluded), where bar = max(spike_factor, exp(spike_z · σ)) and σ is the robust spread (1.4826 · MAD) of log
grad_norm in that window: a run whose grad norm is naturally jumpy needs a bigger jump. It is *elevated* at
grad_norm ≥ recover_factor × that median (recover_factor < spike_factor). An explosion is a run of
consecutive elevated points that holds at least one point over the bar; with n the points from its first
over-bar point to the current one (a ramp up to the spike does not count; counted back over the reference
window, NULL rows are not points) and peak the largest grad_norm among them:

    n < sustain_steps                       → info      (an isolated spike: clipping absorbs it, and the
                                                          next points show whether the norm recovered)
    n ≥ sustain_steps, peak < critical · m  → warning   (the norm stays up: an explosion under way)
    n ≥ sustain_steps, peak ≥ critical · m  → critical

with m the reference median and critical = max(critical_factor, bar). So a spike of any size that falls
back under recover_factor × m within sustain_steps − 1 points stays info (healthy public runs have
isolated 25–217 × spikes, docs/lab/public_runs.md), while a norm that stays elevated escalates. Earlier points of
the run are judged against the current median and bar. confirm_steps = 1: the first over-bar point opens
the episode, which keeps the worst severity it reaches.
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
        if median <= 0 or g < c.recover_factor * median:
            return {"explosion": None}
        logs = np.log(np.maximum(ref.values, 1e-12))
        spread = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
        bar = max(c.spike_factor, float(np.exp(c.spike_z * spread)))
        run, peak, top = 0, 0.0, 0.0  # points since the run's first over-bar point (NULL rows are not points)
        for i, prev in enumerate(points.values[::-1]):  # back over the elevated run ending here
            if prev < c.recover_factor * median:
                break
            top = max(top, float(prev))
            if prev >= bar * median:
                run, peak = i + 1, top
        if run == 0:
            return {"explosion": None}
        severity = ("info" if run < c.sustain_steps
                    else "critical" if peak >= max(c.critical_factor, bar) * median else "warning")
        ev = {"grad_norm": g, "reference_median": median, "ratio": g / median, "bar": bar,
              "log_spread": spread, "reference_points": len(ref), "elevated_run": run, "peak_ratio": peak / median}
        return {"explosion": Finding(
            severity, "grad_norm", g, bar * median, c.window,
            f"gradient explosion: grad_norm {g:.3g} = {g / median:.1f} × its median {median:.3g} "
            f"over {c.window} steps ({run} elevated point(s), peak {peak / median:.1f} ×)", ev)}
