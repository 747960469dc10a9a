"""Train–inference mismatch drift, phase ``drift``: |logp_old − logp_rollout| rising, IS ESS falling.

* rising rule: level(is_log_ratio_abs_mean) ≥ max(abs_min, rise_factor × its median over the history) and
  its Theil–Sen slope over ``window`` significantly positive (to enter; an open episode stays while the
  level is above that bar);
* ESS rule: level(is_ess) ≤ ess_warn.
Either → warning; ESS level ≤ ess_critical → critical. NULL when the rollout engine gives no log-probs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .config import DetectorConfig, MismatchConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, ess = _num(ev.get("abs_level")), _num(ev.get("ess_level"))
    if level is None and ess is None:
        return None
    parts = []
    if level is not None:
        parts.append(f"|logp_old − logp_rollout| is {level:.3g} nats (bar {_f(ev.get('abs_bar'), '.3g')})")
    if ess is not None:
        parts.append(f"IS effective sample size {ess:.2f}")
    return "train–inference mismatch: " + ", ".join(parts)


@register_detector(primary=("is_log_ratio_abs_mean", "is_ess"), config=MismatchConfig, sentence=_sentence,
                   colour="#7e57c2", phase_names={"drift": "train–inference mismatch"},
                   not_applicable="no rollout log-probs (is_log_ratio_abs_mean / is_ess NULL on every step)",
                   drills=("mismatch",))
class Mismatch:
    name = "mismatch"
    phases = ("drift",)
    inputs = ("is_log_ratio_abs_mean", "is_ess")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.mismatch, self.cfg.smooth_steps
        row = h.row
        if row.num("is_log_ratio_abs_mean") is None and row.num("is_ess") is None:
            return {}
        ev: dict[str, Any] = {}
        fired: list[tuple[str, float, float]] = []
        abs_all = h.series("is_log_ratio_abs_mean", self.cfg.history_steps)
        if len(abs_all) >= c.min_points:
            level = abs_all.level(k)
            bar = max(c.abs_min, c.rise_factor * float(np.median(abs_all.values)))
            ev.update(abs_level=level, abs_bar=bar)
            recent = abs_all.tail(c.window)
            if level >= bar and ("drift" in open_phases or len(recent) >= c.min_points):
                rising = "drift" in open_phases
                if not rising:
                    trend = recent.trend(self.cfg.trend_confidence)
                    ev["abs_trend"] = trend.as_evidence()
                    rising = trend.rising
                if rising:
                    fired.append(("is_log_ratio_abs_mean", level, bar))
        ess = h.series("is_ess", k)
        ess_level = ess.level(k) if len(ess) else None
        ev["ess_level"] = ess_level
        if ess_level is not None and ess_level <= c.ess_warn:
            fired.append(("is_ess", ess_level, c.ess_warn))
        if not fired:
            return {"drift": None}
        metric, value, threshold = fired[0]
        critical = ess_level is not None and ess_level <= c.ess_critical
        ess_text = f"{ess_level:.2f}" if ess_level is not None else "NULL"
        return {"drift": Finding(
            "critical" if critical else "warning", metric, value, threshold, c.window,
            f"train-inference mismatch: |is_log_ratio| level {ev.get('abs_level', float('nan')):.3g} nats, "
            f"IS ESS {ess_text}", {**ev, "rules": [m for m, _, _ in fired]})}
