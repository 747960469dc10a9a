"""Length blow-up (``blowup``: responses hit the length budget) and repetition (``repetition``).

* blowup: level(truncated_frac) ≥ truncated_frac → warning, ≥ truncated_critical → critical;
* repetition (warning): level(repeat_frac_max) ≥ repeat_frac. repeat_frac_max is a max over the batch's
  sequences, so the rolling median (not one step) must stay up.
"""

from __future__ import annotations

from .config import DetectorConfig
from .events import Finding, Verdict
from .history import History


class Length:
    name = "length"
    phases = ("blowup", "repetition")
    inputs = ("truncated_frac", "repeat_frac_max", "response_length_mean")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.length, self.cfg.smooth_steps
        verdict: Verdict = {}
        length = h.series("response_length_mean", k)
        ev = {"response_length_level": length.level(k) if len(length) else None}
        if h.row.num("truncated_frac") is not None:
            level = h.series("truncated_frac", k).level(k)
            verdict["blowup"] = None if level < c.truncated_frac else Finding(
                "critical" if level >= c.truncated_critical else "warning", "truncated_frac", level,
                c.truncated_frac, k, f"length blow-up: {level:.0%} of responses truncated",
                {**ev, "truncated_frac_level": level})
        if h.row.num("repeat_frac_max") is not None:
            level = h.series("repeat_frac_max", k).level(k)
            verdict["repetition"] = None if level < c.repeat_frac else Finding(
                "warning", "repeat_frac_max", level, c.repeat_frac, k,
                f"repetition: one token id makes up {level:.0%} of a response (rolling median)",
                {**ev, "repeat_frac_max_level": level})
        return verdict
