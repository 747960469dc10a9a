"""Signal starvation, phase ``starvation``: groups whose rewards are all equal have zero GRPO advantage.

level(zero_std_group_frac) ≥ warn_frac → warning; critical when, in addition, the mean over the last
critical_window points is ≥ critical_frac (sustained: a few all-equal steps in a row are ordinary for small
batches of groups, so a 5-point level alone must not make it critical). The evidence tells an
all-correct batch (task too easy) from an all-wrong one (policy lost) by the correct_frac level (≥ 0.5:
all-correct), and so does the severity: starvation of mostly all-correct groups is ``info`` — the policy
solves those prompts, there is no signal but nothing is collapsing (the remedy is harder prompts or dynamic
sampling) — while all-wrong (or unknown) starvation is warning / critical. The lab's corpus had one healthy
run at temperature 0.8 warned this way (correct_frac level 0.5, reward at its best).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, StarvationConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level = _num(ev.get("zero_std_group_frac_level"))
    if level is None:
        return None
    return (f"{level:.0%} of groups got equal rewards for every response (no GRPO signal; mostly "
            f"{ev.get('groups', 'unknown')}), reward level {_f(ev.get('reward_level'))}")


@register_detector(primary=("zero_std_group_frac",), config=StarvationConfig, sentence=_sentence, colour="#8d6e63",
                   phase_names={"starvation": "signal starvation"}, drills=("starvation",))
class Starvation:
    name = "starvation"
    phases = ("starvation",)
    inputs = ("zero_std_group_frac", "correct_frac", "reward_mean")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.starvation, self.cfg.smooth_steps
        if h.row.num("zero_std_group_frac") is None:
            return {}
        level = h.series("zero_std_group_frac", k).level(k)
        if level < c.warn_frac:
            return {"starvation": None}
        correct = h.series("correct_frac", k)
        reward = h.series("reward_mean", k)
        correct_level = correct.level(k) if len(correct) else None
        kind = "unknown" if correct_level is None else ("all-correct" if correct_level >= 0.5 else "all-wrong")
        sustained = h.series("zero_std_group_frac", c.critical_window)
        mean = float(sustained.values.mean())
        ev = {"zero_std_group_frac_level": level, "correct_frac_level": correct_level,
              "reward_level": reward.level(k) if len(reward) else None, "groups": kind,
              "zero_std_group_frac_mean": mean, "mean_points": len(sustained)}
        critical = len(sustained) >= c.critical_window and mean >= c.critical_frac
        severity = "info" if kind == "all-correct" else "critical" if critical else "warning"
        return {"starvation": Finding(
            severity, "zero_std_group_frac", level, c.warn_frac, k,
            f"signal starvation: {level:.0%} of groups have zero reward std (mostly {kind})", ev)}
