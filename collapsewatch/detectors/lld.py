"""LLD death spiral (LLDS, arXiv 2512.04220) on L, the likelihood of correct responses, with I = incorrect ones'.

L is the sentinel L where the run scores sentinels, else the batch L pooled over steps (token-weighted, with its
standard error), else the plain batch mean ``logp_old_mean_correct`` (:mod:`.likelihood`; the evidence's
``L_source`` says which; the sentinel L uses its own, shorter windows of points). Slopes are Theil–Sen over the last slope_window points of L (change = slope × the steps they span), "significant" = the confidence interval excludes 0. Phases
are ordered and mutually exclusive (the highest one that holds is reported; the others get "does not
hold"), and each can be re-entered:

* ``early_stagnation`` (info): reward significantly rising while L is flat — an equivalence test: the
  whole confidence interval of L's slope, times the window, lies within ±flat_change — both judged over
  the longer stagnation_window (a flat slope needs more points to be told from a small one);
* ``steady_decay`` (warning): L significantly falling, by ≥ decay_change over the window, and I not
  significantly rising (when require_incorrect_falling and I has enough points; the evidence says whether
  I's slope is negative — the paper sees both fall, a noisy I slope must not veto the phase);
* ``accelerated_collapse`` (critical): as steady decay, and accelerating — the slope over the last
  recent_steps is itself significantly negative and ≤ accel_factor × the window slope, or L's level fell
  over recent_steps by ≥ cliff_factor × its per-point noise and ≥ decay_change — with one of grad-norm spike,
  entropy surge, reward drop. An open episode stays while L is still significantly falling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from . import likelihood, signals
from .config import DetectorConfig, LldConfig
from .events import Finding, Severity, Verdict
from .history import History, Series, Trend
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector

PHASES = ("early_stagnation", "steady_decay", "accelerated_collapse")


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    trend = ev.get("L_trend") or {}
    change, level = _num(ev.get("L_change_over_window")), _num(ev.get("L_level"))
    if phase == "early_stagnation":
        st, rt = ev.get("L_trend_stagnation") or {}, ev.get("reward_trend") or {}
        if not st or not rt:
            return None
        return (f"likelihood of correct responses stayed flat at {_f(level)} nats/token "
                f"({_f(st.get('slope'), '+.2g')}/step) while the reward rose {_f(rt.get('slope'), '+.2g')}/step")
    if change is None or not trend:
        return None
    text = (f"likelihood of correct responses fell by {_f(-change, '.3f')} nats/token over {trend.get('n')} "
            f"points (now {_f(level)})")
    if ev.get("I_falling"):
        text += ", incorrect responses falling too"
    if phase == "accelerated_collapse":
        what = [w for w, hit in (("accelerating", ev.get("acceleration")), ("a cliff", ev.get("cliff"))) if hit]
        what += [s.replace("_", " ") for s in ev.get("signals") or []]
        if what:
            text += f", with {', '.join(what)}"
    return text


@register_detector(primary=("logp_old_mean_correct",), config=LldConfig, sentence=_sentence, colour="#e040fb",
                   phase_names={"early_stagnation": "LLD early stagnation", "steady_decay": "LLD steady decay", "accelerated_collapse": "LLD accelerated collapse"},
                   not_applicable="logp_old_mean_correct is NULL on every step (no π_old log-probs or no correct responses)",
                   drills=("lld",))
class Lld:
    name = "lld"
    phases = PHASES
    inputs = (*likelihood.INPUTS, "reward_mean", "grad_norm", "entropy_mean")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def windows(self, src: str) -> tuple[int, int, int, int]:
        """(slope window, min points, recent points, stagnation window) for L from ``src``."""
        c = self.cfg.lld
        if src == "sentinel":
            return c.sentinel_window, c.sentinel_min_points, c.sentinel_recent, 2 * c.sentinel_window
        return c.slope_window, c.min_points, c.recent_steps, c.stagnation_window

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        row = h.row
        if all(row.num(col) is None for col in ("logp_old_mean_correct", "model_tokens_correct",
                                                 "sentinel_logp_correct_mean")):
            return {}
        c = self.cfg.lld
        self.src = src = likelihood.source(h, c.sentinel_min_points)
        window, min_points, _, _ = self.windows(src)
        L = likelihood.series(h, src, "correct", window)
        if len(L) < min_points:
            return {}
        trend = L.trend(self.cfg.trend_confidence)
        if not math.isfinite(trend.slope):  # a pooled window with < 3 weighted points: no verdict
            return {}
        change = trend.slope * L.span()  # over the steps the window's points cover
        ev: dict[str, Any] = {"L_source": src, "L_level": L.level(self.cfg.smooth_steps),
                              "L_trend": trend.as_evidence(), "L_change_over_window": change,
                              "window_span_steps": L.span()}
        if src == "pooled":
            ev["L_pooled"], ev["L_pooled_se"] = likelihood.pooled_level(L.values, L.weights)  # type: ignore
        verdict: Verdict = dict.fromkeys(PHASES)
        if trend.falling and change <= -c.decay_change:
            collapse = self._collapse(h, L, trend, ev, "accelerated_collapse" in open_phases)
            if collapse is not None:
                verdict["accelerated_collapse"] = collapse
            elif self._incorrect_ok(h, ev):
                also = ", incorrect falling too" if ev.get("I_falling") else ""
                verdict["steady_decay"] = self._finding("steady_decay", "warning", trend, ev,
                                                        f"L falling {trend.slope:.2g} nats/token per step{also}")
        elif trend.falling and "accelerated_collapse" in open_phases:
            verdict["accelerated_collapse"] = self._collapse(h, L, trend, ev, True)
        else:
            stagnation = self._stagnation(h, ev)
            if stagnation is not None:
                verdict["early_stagnation"] = stagnation
        return verdict

    def _stagnation(self, h: History, ev: dict[str, Any]) -> Finding | None:
        """Reward significantly rising while L's slope is within ±flat_change over stagnation_window."""
        c, w = self.cfg.lld, self.windows(self.src)[3]
        L = likelihood.series(h, self.src, "correct", w)
        reward = h.series("reward_mean", c.stagnation_window)
        if self.src == "sentinel":  # the reward over the steps the sentinel points cover
            reward = h.series("reward_mean", self.cfg.history_steps).since(L.steps[0] - 1) if len(L) else reward
        if len(L) < w // 2 or len(reward) < c.stagnation_window // 2:
            return None
        trend, span = L.trend(self.cfg.trend_confidence), L.span()
        if not (-c.flat_change <= trend.low * span and trend.high * span <= c.flat_change):
            return None
        r_trend = reward.trend(self.cfg.trend_confidence)
        ev.update(L_trend_stagnation=trend.as_evidence(), reward_trend=r_trend.as_evidence())
        if not r_trend.rising:
            return None
        return Finding(
            "info", likelihood.COLUMNS[self.src][0], trend.slope * span, c.flat_change, w,
            f"LLD early stagnation: L flat ({trend.slope:.2g}/step over {span:.0f} steps) while reward rises "
            f"({r_trend.slope:.2g}/step)", dict(ev))

    def _incorrect_ok(self, h: History, ev: dict[str, Any]) -> bool:
        c = self.cfg.lld
        window, min_points, _, _ = self.windows(self.src)
        incorrect = likelihood.series(h, self.src, "incorrect", window)
        if len(incorrect) < min_points:
            ev["I_trend"] = None
            return True
        i_trend = incorrect.trend(self.cfg.trend_confidence)
        ev["I_trend"] = i_trend.as_evidence()
        ev["I_falling"] = i_trend.slope < 0
        return not (c.require_incorrect_falling and i_trend.rising)

    def _collapse(self, h: History, L: Series, trend: Trend, ev: dict[str, Any], is_open: bool) -> Finding | None:
        c, k = self.cfg.lld, self.cfg.smooth_steps
        n_recent = self.windows(self.src)[2]
        recent = L.tail(n_recent)
        accel = cliff = False
        if len(recent) >= max(3, n_recent // 2):
            r_trend = recent.trend(self.cfg.trend_confidence)
            accel = r_trend.falling and r_trend.slope <= c.accel_factor * trend.slope
            ev["L_recent_trend"] = r_trend.as_evidence()
        before = L.head(n_recent)
        if len(before) >= k:
            drop, noise = before.level(k) - L.level(k), L.noise()
            cliff = drop >= max(c.cliff_factor * noise, c.decay_change)
            ev.update(L_recent_drop=drop, L_noise=noise)
        fired = {}
        for name, fn in (("grad_spike", signals.grad_spike), ("entropy_surge", signals.entropy_surge),
                         ("reward_drop", signals.reward_drop)):
            hit, sig_ev = fn(h, self.cfg)
            ev[name] = sig_ev
            fired[name] = bool(hit)
        ev.update(acceleration=accel, cliff=cliff, signals=[n for n, hit in fired.items() if hit])
        if not (is_open or ((accel or cliff) and any(fired.values()))):
            return None
        what = ", ".join([n for n, hit in (("accelerating", accel), ("cliff", cliff)) if hit] + ev["signals"])
        return self._finding("accelerated_collapse", "critical", trend, ev,
                             f"L falling {trend.slope:.2g}/step" + (f" with {what}" if what else ""))

    def _finding(self, phase: str, severity: Severity, trend: Trend, ev: dict[str, Any], detail: str) -> Finding:
        c = self.cfg.lld
        threshold = -c.decay_change if phase == "steady_decay" else None
        return Finding(
            severity=severity, metric=likelihood.COLUMNS[self.src][0], value=ev["L_change_over_window"],
            threshold=threshold, window_steps=self.windows(self.src)[0],
            message=f"LLD {phase.replace('_', ' ')}: {detail}", evidence=dict(ev),
        )
