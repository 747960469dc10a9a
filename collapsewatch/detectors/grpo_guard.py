"""GRPO-Guard's signature (arXiv 2510.22319), phase ``ratio_left_shift``: the A>0 ratio sits left of 1 while the
upper clip never fires, so the PPO clip has stopped bounding positive updates.

GRPO-Guard (Wang et al., flow-matching image models) observes the importance-ratio distribution's mean falling
below 1; positive-advantage samples then never reach the clipped region r > 1 + ε and over-confident positive
updates go unbounded (their "implicit over-optimization": the proxy reward keeps rising). Their fix
(RatioNorm, gradient reweighting) is for diffusion timesteps; here only the signature is read, on LLM runs.

Rule, on off-policy steps only (an on-policy step has r ≡ 1 and gives no verdict, as ISDD):
level(ratio_mean_pos) < 1 − mean_shift  and  level(clip_high_frac) ≤ clip_high_max, with min_points
off-policy points of ratio_mean_pos → ``info`` (worth a look: the clip is one-sided in practice). Not a
collapse by itself; ISDD (ratio_p50_pos < 0.9 and falling) is the severe form of the same drift. The
thresholds are named defaults, not calibrated (no paper gives numbers for LLM runs), and the detector is
opt-in (``DetectorConfig(enabled=(*DEFAULT_ENABLED, "grpo_guard"))``) until it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, GrpoGuardConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, clip = _num(ev.get("ratio_mean_pos_level")), _num(ev.get("clip_high_frac_level"))
    if level is None or clip is None:
        return None
    return (f"mean ratio of A>0 tokens is {level:.3g} while clip_high fires on {clip:.1%} of tokens "
            f"(at most {_f(ev.get('clip_high_max'), '.1%')}): the upper clip no longer bounds positive updates")


@register_detector(primary=("ratio_mean_pos",), config=GrpoGuardConfig, sentence=_sentence, colour="#d4e157")
class GrpoGuard:
    name = "grpo_guard"
    phases = ("ratio_left_shift",)
    inputs = ("ratio_mean_pos", "clip_high_frac", "on_policy")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.grpo_guard, self.cfg.smooth_steps
        row = h.row
        if row.flag("on_policy") is True or row.num("ratio_mean_pos") is None or row.num("clip_high_frac") is None:
            return {}
        mean = h.series("ratio_mean_pos", k, off_policy=True)
        clip = h.series("clip_high_frac", k, off_policy=True)
        if len(h.series("ratio_mean_pos", c.min_points, off_policy=True)) < c.min_points:
            return {}
        mean_level, clip_level = mean.level(k), clip.level(k)
        threshold = 1.0 - c.mean_shift
        if not (mean_level < threshold and clip_level <= c.clip_high_max):
            return {"ratio_left_shift": None}
        ev: dict[str, Any] = {"ratio_mean_pos_level": mean_level, "clip_high_frac_level": clip_level,
                              "clip_high_max": c.clip_high_max}
        return {"ratio_left_shift": Finding(
            "info", "ratio_mean_pos", mean_level, threshold, k,
            f"GRPO-Guard signature: mean A>0 ratio {mean_level:.3g} < {threshold:g} while clip_high fires on "
            f"{clip_level:.3g} of tokens (≤ {c.clip_high_max:g}): the upper clip no longer bounds positive updates",
            ev)}
