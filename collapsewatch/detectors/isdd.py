"""ISDD — importance-sampling distribution drift (SAPO, arXiv 2603.10069), phase ``drift``.

Rule, on off-policy steps only: an on-policy step (``on_policy`` true, or every ratio column NULL) gives no
verdict — it neither flags nor extends nor ends an episode, and its r ≡ 1 values stay out of the windows:

* median rule: level(ratio_p50_pos) < median_threshold and its Theil–Sen slope over trend_window is
  significantly negative (to enter; an open episode stays while the level is below the threshold);
* tail rule: level(ratio_p05_pos) < p05_threshold, or level(ratio_lt_0_1_frac_pos) > lt_0_1_frac_threshold.

Either rule holds → warning; confirmed — entropy rose then fell **and** reward fell from its running max
→ critical. One confirmation alone is recorded in the evidence and stays a warning. The PPO clip does not bound a falling ratio when A > 0, so the usual clip metric
(``clip_low_frac``, TRL semantics: A < 0 only) stays low through the drift; the evidence records it next to
``clip_low_frac_pos`` (A>0 tokens under 1 − ε_low, left unclipped) so the reader sees why clip plots missed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import signals
from .config import DetectorConfig, IsddConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector

RATIO_COLUMNS = ("ratio_p50_pos", "ratio_p05_pos", "ratio_lt_0_1_frac_pos")
TURN_COLUMNS = ("turn_ratio_p50_pos", "turn_ratio_p05_pos")
"""Per-turn ratios of A>0 turns (the probe's turn-level geometric means): recorded in the evidence so a drift can
be read per turn (is it every turn, or the tool-heavy late ones?); no rule reads them yet — no drill of the lab
produced a turn-level drift to calibrate one on."""


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, peak = _num(ev.get("ratio_p50_pos_level")), _num(ev.get("ratio_p50_pos_peak"))
    rules = ev.get("rules") or []
    parts = []
    if level is not None and ("ratio_p50_pos" in rules or (peak is not None and peak - level >= 0.05)):
        at = ev.get("ratio_p50_pos_peak_step")
        over = f" over {now - at} steps" if isinstance(now, int) and isinstance(at, int) else ""
        parts.append(f"median ratio of A>0 tokens fell from {_f(peak)} to {_f(level)}{over}" if peak is not None
                     else f"median ratio of A>0 tokens is {_f(level)}")
    if "ratio_p05_pos" in rules:
        parts.append(f"its p05 is {_f(ev.get('ratio_p05_pos_level'), '.3g')}")
    if "ratio_lt_0_1_frac_pos" in rules:
        parts.append(f"{_f(ev.get('ratio_lt_0_1_frac_pos_level'), '.1%')} of A>0 tokens have r < 0.1")
    if not parts:
        return None
    text = ", ".join(parts) + f" while clip_low stayed {_f(ev.get('clip_low_frac'))}"
    conf = [c.replace("_", " ") for c in ev.get("confirmations") or []]
    if len(conf) > 1:
        return text + f"; confirmed by {' and '.join(conf)}"
    return text + (f"; confirmation at this step: {conf[0]}" if conf else "")


@register_detector(primary=RATIO_COLUMNS, config=IsddConfig, sentence=_sentence, colour="#ffa726",
                   phase_names={"drift": "ISDD drift"},
                   not_applicable="on-policy run (r ≡ 1): ISDD needs several optimizer steps per rollout batch",
                   drills=("isdd",))
class Isdd:
    name = "isdd"
    phases = ("drift",)
    inputs = (*RATIO_COLUMNS, *TURN_COLUMNS, "on_policy", "clip_low_frac_pos", "clip_low_frac", "entropy_mean",
              "reward_mean")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        row, c, k = h.row, self.cfg.isdd, self.cfg.smooth_steps
        if row.flag("on_policy") is True or all(row.num(col) is None for col in RATIO_COLUMNS):
            return {}
        p50 = h.series("ratio_p50_pos", c.trend_window, off_policy=True)
        p05 = h.series("ratio_p05_pos", c.trend_window, off_policy=True)
        lt01 = h.series("ratio_lt_0_1_frac_pos", c.trend_window, off_policy=True)
        ev: dict[str, Any] = {}
        fired: list[tuple[str, float, float]] = []  # (metric, level, threshold) per rule that holds
        if len(p50):
            level = p50.level(k)
            ev["ratio_p50_pos_level"] = level
            if level < c.median_threshold:
                falling = None
                if len(p50) >= c.min_points:
                    trend = p50.trend(self.cfg.trend_confidence)
                    falling = trend.falling
                    ev["ratio_p50_pos_trend"] = trend.as_evidence()
                if falling or "drift" in open_phases:
                    fired.append(("ratio_p50_pos", level, c.median_threshold))
        if len(p05):
            level = ev["ratio_p05_pos_level"] = p05.level(k)
            if level < c.p05_threshold:
                fired.append(("ratio_p05_pos", level, c.p05_threshold))
        if len(lt01):
            level = ev["ratio_lt_0_1_frac_pos_level"] = lt01.level(k)
            if level > c.lt_0_1_frac_threshold:
                fired.append(("ratio_lt_0_1_frac_pos", level, c.lt_0_1_frac_threshold))
        if not fired:
            return {"drift": None}
        return {"drift": self._finding(h, fired, ev)}

    def _peak(self, h: History) -> tuple[float, int] | None:
        k = self.cfg.smooth_steps
        p50 = h.series("ratio_p50_pos", self.cfg.history_steps, off_policy=True)
        if len(p50) < k:
            return None
        levels = p50.levels(k)
        i = int(levels.argmax())
        return float(levels[i]), int(p50.steps[i + k - 1])

    def _finding(self, h: History, fired: list[tuple[str, float, float]], ev: dict[str, Any]) -> Finding:
        row = h.row
        rise_fall, rf_ev = signals.entropy_rise_then_fall(h, self.cfg)
        drop, drop_ev = signals.reward_drop(h, self.cfg)
        confirmations = [name for name, hit in (("entropy_rise_then_fall", rise_fall), ("reward_drop", drop)) if hit]
        clip_low, clip_pos = row.num("clip_low_frac"), row.num("clip_low_frac_pos")
        ev.update(
            rules=[m for m, _, _ in fired], confirmations=confirmations, entropy=rf_ev, reward=drop_ev,
            clip_low_frac=clip_low, clip_low_frac_pos=clip_pos,
            clip_note="PPO clip does not bound r < 1-eps when A > 0: clip_low_frac (A<0 only) misses this drift",
        )
        for col in TURN_COLUMNS:  # levels over the same off-policy window, NULL-free points only
            turn = h.series(col, self.cfg.isdd.trend_window, off_policy=True)
            ev[f"{col}_level"] = turn.level(self.cfg.smooth_steps) if len(turn) else None
        peak = self._peak(h)
        if peak is not None:  # where the median ratio fell from: its highest level over the history
            ev.update(ratio_p50_pos_peak=peak[0], ratio_p50_pos_peak_step=peak[1])
        metric, value, threshold = fired[0]
        parts = [f"{m} level {v:.3g} ({'>' if m.startswith('ratio_lt') else '<'} {t:g})" for m, v, t in fired]
        clip = f"clip_low_frac {clip_low:.3g}" if clip_low is not None else "clip_low_frac NULL"
        confirmed = rise_fall is True and drop is True
        conf = (f"; confirmed by {' and '.join(confirmations)}" if confirmed
                else f"; {confirmations[0]} so far (critical needs both)" if confirmations else "")
        return Finding(
            severity="critical" if confirmed else "warning", metric=metric, value=value, threshold=threshold,
            window_steps=self.cfg.isdd.trend_window,
            message=f"ISDD: {'; '.join(parts)} while the PPO clip stays silent ({clip}){conf}",
            evidence=ev,
        )
