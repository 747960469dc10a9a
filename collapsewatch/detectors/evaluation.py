"""Evaluation-score fall, phase ``fall``: the score the run logs on its evaluation set falls from its best.

Many runs log an evaluation every N steps (verl's ``val-core/<data>/acc/mean@N``, HF Trainer's ``eval_<metric>``,
``eval/accuracy`` …), and their authors date a collapse by it: the validation accuracy that peaked and fell. The
step column ``eval_score`` (:func:`collapsewatch.ingest.keys.eval_score`: the mean of the step's accuracy keys, else
score keys, else reward keys) carries it; the rule reads it only at the steps that log it.

The rule is the severity gate's sustained reward fall (:func:`.signals.level_fall`) with each evaluation point its
own level — an evaluation is already a mean over its set: the last ``sustain_points`` points are each below the best
point so far (over ``signals.reward_peak_window`` points) by the reward-drop margin (:func:`.signals.drop_needed`:
max(0.05, 25 % of the best)) and by ``severity.noise_z`` × the score's per-point noise before those points (a fall
does not widen its own bar; with fewer than 3 such points the margin alone decides). It needs sustain_points + 1
points (a best to fall from). Where the log says how many examples the evaluation graded (``eval_size``) and every
score read is in [0, 1], the per-point noise is at least √(p̄(1 − p̄)/n) (:func:`.signals.binomial_noise`, p̄ the mean
of the points before): at 20 questions and p̄ = 0.3 that is 0.10, so a fall must pass 0.31 — a dip of two answers
is sampling, not a collapse, even at a run's second evaluation, where the points' own spread cannot say so yet. A
warning, never critical: the severity gate keeps critical for harm in the training
signals (a sustained reward fall, non-finite values, degenerate output); this says the model got worse on held-out
prompts, which a user acts on, but one evaluation set can be small and noisy (at 20 questions one answer is 0.05). No
history of the training signals is needed, so a run that collapsed before its second evaluation is flagged there.

Chosen on the tuned-on sources (``sustain_points``) and scored held out: docs/lab/bench.md, "evaluation".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, EvaluationConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector
from .signals import level_fall


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    score, best = _num(ev.get("eval_now")), _num(ev.get("eval_best"))
    if score is None or best is None:
        return None
    return (f"the evaluation score fell to {score:.3g} from its best {best:.3g} "
            f"(by ≥ {_f(ev.get('drop_needed'), '.3g')} on {ev.get('sustain_levels', 1)} evaluation(s){_set(ev)})")


def _set(ev: Mapping[str, Any]) -> str:
    """``; a set of 20 examples varies by ±0.107 alone`` where the noise floor of a known set size applied."""
    size, floor = _num(ev.get("set_size")), _num(ev.get("noise_floor"))
    return f"; a set of {size:g} examples varies by ±{floor:.3g} alone" if size is not None and floor is not None else ""


@register_detector(primary=("eval_score",), config=EvaluationConfig, sentence=_sentence, colour="#5c6bc0",
                   phase_names={"fall": "evaluation-score fall"},
                   not_applicable="no evaluation score logged (eval_score NULL on every step: the run logs no "
                                  "eval/val accuracy, score or reward)")
class Evaluation:
    name = "evaluation"
    phases = ("fall",)
    inputs = ("eval_score", "eval_size")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        if h.row.num("eval_score") is None:
            return {}  # read only where the run evaluated: between evaluations an episode stays as it was
        n = self.cfg.evaluation.sustain_points
        fired, ev = level_fall(h, self.cfg, "eval_score", 1, n, name="eval", noise_before=True, size_key="eval_size")
        if not fired:
            return {"fall": None}
        return {"fall": Finding(
            "warning", "eval_score", ev["eval_now"], ev["eval_best"] - ev["drop_needed"], n,
            f"evaluation score {ev['eval_now']:.3g}, below its best {ev['eval_best']:.3g} by "
            f"≥ {ev['drop_needed']:.3g} on the last {n} evaluation(s){_set(ev)}", ev)}
