"""Gradient explosion on the pre-clip global ``grad_norm``, phase ``explosion``.

Each point is judged against its own reference: the median m of the previous ``window`` points (that point
excluded; points at or under ``dead_frac`` × their 90th percentile left out — no-signal batches, whose all-but-zero
norm is no scale) and bar = max(spike_factor, exp(spike_z · σ)), σ the robust spread (1.4826 · MAD) of log grad_norm in
that window (a run whose grad norm is naturally jumpy needs a bigger jump). A point is *over the bar* at
grad_norm ≥ bar · m and *elevated* at grad_norm ≥ recover_factor · m (recover_factor < spike_factor). An
explosion is a run of consecutive elevated points that holds at least one point over the bar; with n the points
from its first over-bar point to the current one (a ramp up to the spike does not count; counted back over at
most ``window`` points; NULL rows are not points):

    n < sustain_steps                       → info      (an isolated spike: clipping absorbs it, and the
                                                          next points show whether the norm recovered)
    n ≥ sustain_steps, no point ≥ crit · m  → warning   (the norm stays up: an explosion under way)
    n ≥ sustain_steps, a point ≥ crit · m   → critical
    n < sustain_steps, the current point the recur_spikes-th over the bar within the last recur_window logged
    points                                  → warning   (spikes that keep coming back: each recovered, together
                                                          they say the update is unstable)

with crit = max(critical_factor, bar), per point, over those n points. So a spike of any size that falls back
under recover_factor · m within sustain_steps − 1 points stays info (healthy public runs have isolated
25–217 × spikes, docs/lab/public_runs.md), while a norm that stays elevated escalates. Each earlier point keeps
the reference it had when it was logged: an explosion entering the window must not raise the bar it is judged
by. confirm_steps = 1: the first over-bar point opens the episode, which keeps the worst severity it reaches.
A non-finite grad_norm is the non-finite detector's business (NaN cannot be told from NULL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .config import DetectorConfig, GradConfig
from .events import Finding, Verdict
from .history import MAD_SD, History
from .history import median as median_of
from .registry import num as _num
from .registry import register_detector


def reference(values: np.ndarray, i: int, c: GradConfig) -> tuple[float, float, float] | None:
    """(median m, bar, σ) of point ``i`` of ``values`` from the ``window`` points before it, the dead ones left out;
    None with fewer than ``min_points`` of them or m ≤ 0."""
    ref = values[max(0, i - c.window):i]
    # no-signal batches (all groups alike) are no scale: the live points are (a window whose least point is over
    # dead_frac × its highest has none under dead_frac × its 90th percentile: the percentile is not computed)
    if c.dead_frac > 0 and len(ref) and ref.min() <= c.dead_frac * ref.max():
        ref = ref[ref > c.dead_frac * float(np.quantile(ref, 0.9))]
    if len(ref) < c.min_points:
        return None
    median = median_of(ref)
    if median <= 0:
        return None
    logs = np.log(np.maximum(ref, 1e-12))
    spread = MAD_SD * median_of(np.abs(logs - median_of(logs)))
    return median, max(c.spike_factor, float(np.exp(c.spike_z * spread))), spread


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    g, med, n = _num(ev.get("grad_norm")), _num(ev.get("reference_median")), ev.get("reference_points")
    if g is None or not med:
        return None
    run, spikes = ev.get("elevated_run"), ev.get("recent_spikes")
    tail = f", still up {run} logged points after the spike" if run and run > 1 else ""
    if spikes:
        tail += f", spike {spikes} in the last {ev.get('recur_window')} logged points"
    return f"grad norm {g:.3g} is {g / med:.1f}× its median {med:.3g} over the previous {n} logged points{tail}"


@register_detector(primary=("grad_norm",), config=GradConfig, sentence=_sentence, colour="#ec407a",
                   phase_names={"explosion": "gradient explosion"}, drills=("blowup",))
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
        values = h.series("grad_norm", 2 * c.window + 1).values  # its last point is this step's
        now = len(values) - 1
        ref = reference(values, now, c)
        if ref is None:
            return {}
        median, bar, spread = ref
        if g < c.recover_factor * median:
            return {"explosion": None}
        run, peak, critical = 0, 0.0, False  # since the run's first over-bar point: length, largest ratio, any ≥ crit
        top, crit_seen = 0.0, False
        for i in range(now, max(now - c.window, 0) - 1, -1):  # back over the elevated run ending here
            r = ref if i == now else reference(values, i, c)
            if r is None or values[i] < c.recover_factor * r[0]:
                break
            top = max(top, values[i] / r[0])
            crit_seen = crit_seen or values[i] >= max(c.critical_factor, r[1]) * r[0]
            if values[i] >= r[1] * r[0]:
                run, peak, critical = now - i + 1, top, crit_seen
        if run == 0:
            return {"explosion": None}
        severity = "info" if run < c.sustain_steps else "critical" if critical else "warning"
        ev = {"grad_norm": g, "reference_median": median, "ratio": g / median, "bar": bar, "log_spread": spread,
              "reference_points": min(now, c.window), "elevated_run": run, "peak_ratio": peak}
        recurring = ""
        if severity == "info" and g >= bar * median and (spikes := recent_spikes(values, now, c)) >= c.recur_spikes > 0:
            severity, ev["recent_spikes"], ev["recur_window"] = "warning", spikes, c.recur_window
            recurring = f"; spike {spikes} in the last {c.recur_window} logged points"
        return {"explosion": Finding(
            severity, "grad_norm", g, bar * median, c.window,
            f"gradient explosion: grad_norm {g:.3g} = {g / median:.1f} × its median {median:.3g} "
            f"over {c.window} steps ({run} elevated point(s), peak {peak:.1f} ×{recurring})", ev)}


def recent_spikes(values: np.ndarray, now: int, c: GradConfig) -> int:
    """Points of ``values`` over their own bar (see :func:`reference`) among the last ``recur_window`` up to ``now``."""
    count = 0
    for i in range(now, max(now - c.recur_window, -1), -1):
        r = reference(values, i, c)
        count += r is not None and values[i] >= r[1] * r[0]
    return count
