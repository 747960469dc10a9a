"""Length budget (``budget``: responses hit the length cap from the run's first points), blow-up (``blowup``:
truncation rising during the run), degenerate output (``degenerate``: responses of a token or two), repetition
(``repetition``) and collapse (``collapse``: responses shrink to a few tokens).

* budget (info): the truncated_frac level is ≥ truncated_frac and so was the median of the run's first
  ``smooth_steps`` points (:meth:`.History.first`, kept however far the window has moved on): a configuration
  finding — the completion length is set too low — present from the start, never a collapse alarm;
* blowup: truncation *rising* — level(truncated_frac) ≥ that start median + truncated_frac (a run that starts near
  0 % truncated: level ≥ truncated_frac) → warning; critical when the mean of the last
  ``blowup_sustain_points`` points is ≥ truncated_critical too (a blow-up that recovers within that many points
  stays a warning); the severity gate keeps it critical only with a sustained reward fall. While the reward has
  not *stayed down* — the last ``severity.sustain_levels`` (5) reward levels are not all below its best by
  :func:`.signals.reward_fall`'s margin (the gate's rule, without its step minimum) — responses are growing into the
  budget as the run learns (longer reasoning): the blow-up is info, a configuration finding like ``budget``. A
  one-level dip beside rising truncation was a warning until session 48: on a tuned-on source's 40-point runs it
  warned three healthy runs (a dip of a point or two) and no collapse counted it (docs/lab/bench.md). No reward
  column, or too few reward points to have held a best for 5 levels → it stays a warning (nothing tells);
* degenerate (critical): the latest response_length_mean ≤ degenerate_tokens — no history needed, so a collapse
  inside a run's first points is flagged at the first point that shows it (``Finding.immediate``). Degenerate
  output is harm by itself: the severity gate never lowers it (``severity.exempt``) — but where no point since the
  run's first was longer (:meth:`.History.highest`) the run never started (``severity.NEVER_STARTED``): a warning
  (a public run logged 1-token responses, all-equal groups and no update for its first 160 steps, then learned:
  docs/lab/bench.md, session 31);
* repetition (warning): level(repeat_frac_max) ≥ repeat_frac. repeat_frac_max is a max over the batch's
  sequences, so the rolling median (not one step) must stay up.
* collapse (warning), abrupt: the latest response_length_mean ≤ collapse_abrupt_frac × the longest of the run's
  first smooth_steps points (:meth:`.History.first`) — responses that shrank tenfold, whatever the reward does
  (a model that drops its reasoning for a bare answer can score more and still has collapsed); no history needed,
  so it is flagged confirm_steps − 1 points after the first point that shows it — not at once: a per-step mean of a
  few responses dips that low for one step in healthy runs (a blind source's 9,751-step run did 54 times,
  docs/lab/bench.md) — unless it ends a *descent*: the confirm_steps − 1 points before it were already ≤
  collapse_approach × the bar, so the point is no lone dip and it is flagged at once (``Finding.immediate``; the
  9,751-step run's 60 dips all came from its normal level, 0 of them after such points); at ≤ degenerate_tokens
  ``degenerate`` says it instead;
* collapse (warning), gradual: level(response_length_mean) ≤ collapse_frac × its *running level* — the median of the
  history's points before the last ``smooth_steps`` — while the reward does not rise: the reward level (same
  smoothing) is below its own running level + collapse_reward_rise (no reward column: the length alone decides).
  Needs collapse_min_points points. The running level is the history's, so a collapse that outlasts about half
  of ``history_steps`` becomes the new running level and its episode ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, LengthConfig
from .events import Finding, Verdict
from .history import History
from .history import median as median_of
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector
from .severity import NEVER_STARTED
from .signals import reward_fall


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    length = ev.get("response_length_level")
    tail = f" (mean length {_f(length, '.0f')} tokens)" if _num(length) is not None else ""
    if phase == "blowup" and _num(ev.get("truncated_frac_level")) is not None:
        return f"{_f(ev['truncated_frac_level'], '.0%')} of responses hit the length budget{tail}"
    if phase == "repetition" and _num(ev.get("repeat_frac_max_level")) is not None:
        return f"one token id makes up {_f(ev['repeat_frac_max_level'], '.0%')} of a response{tail}"
    return None


@register_detector(primary=("truncated_frac", "repeat_frac_max", "response_length_mean"), config=LengthConfig,
                   sentence=_sentence, colour="#26c6da",
                   phase_names={"blowup": "length blow-up", "repetition": "repetition", "budget": "length budget",
                                "degenerate": "degenerate output (length)"}, drills=("length",))
class Length:
    name = "length"
    phases = ("budget", "blowup", "degenerate", "repetition", "collapse")
    inputs = ("truncated_frac", "repeat_frac_max", "response_length_mean", "reward_mean")

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.length, self.cfg.smooth_steps
        verdict: Verdict = {}
        length = h.series("response_length_mean", k)
        ev = {"response_length_level": length.level(k) if len(length) else None}
        if h.row.num("truncated_frac") is not None:
            verdict.update(self._truncation(h, ev))
        if h.row.num("repeat_frac_max") is not None:
            level = h.series("repeat_frac_max", k).level(k)
            verdict["repetition"] = None if level < c.repeat_frac else Finding(
                "warning", "repeat_frac_max", level, c.repeat_frac, k,
                f"repetition: one token id makes up {level:.0%} of a response (rolling median)",
                {**ev, "repeat_frac_max_level": level})
        now = h.row.num("response_length_mean")
        if now is not None:
            verdict["degenerate"] = None if now > c.degenerate_tokens else self._degenerate(h, now, ev)
            verdict.update(self._collapse(h, now))
        return verdict

    def _degenerate(self, h: History, now: float, ev: dict) -> Finding:
        """degenerate (module doc): critical, or a warning where no point since the run's first was longer."""
        c = self.cfg.length
        never = (h.highest("response_length_mean") or now) <= c.degenerate_tokens
        return Finding(
            "warning" if never else "critical", "response_length_mean", now, c.degenerate_tokens, 1,
            f"degenerate output: responses {now:.3g} tokens on average (≤ {c.degenerate_tokens:g})"
            + (f" at every point since the run's first: {NEVER_STARTED}" if never else ""),
            {**ev, "since_start": never}, immediate=True)

    def _truncation(self, h: History, ev: dict) -> Verdict:
        """budget and blowup (module doc) from the truncated_frac points the history holds."""
        c, k = self.cfg.length, self.cfg.smooth_steps
        t, first = h.series("truncated_frac", k), h.first("truncated_frac", k)
        level, start = t.level(k), median_of(first.values)
        ev = {**ev, "truncated_frac_level": level, "truncated_frac_start": start, "start_step": int(first.steps[0])}
        out: Verdict = {"budget": None, "blowup": None}
        if level >= c.truncated_frac and start >= c.truncated_frac:
            out["budget"] = Finding(
                "info", "truncated_frac", level, c.truncated_frac, k,
                f"length budget: {level:.0%} of responses truncated, {start:.0%} from the first points — the "
                f"completion length is set too low (a configuration finding, not a collapse)", ev)
        if level - start >= c.truncated_frac:
            recent = h.series("truncated_frac", c.blowup_sustain_points)
            mean = float(recent.values.mean())
            sustained = len(recent) >= c.blowup_sustain_points and mean >= c.truncated_critical
            ev = {**ev, "truncated_frac_mean": mean, "mean_points": len(recent)}
            msg = f"length blow-up: {level:.0%} of responses truncated, up from {start:.0%} at the start"
            fell, rev = reward_fall(h, self.cfg, self.cfg.severity.sustain_levels)
            if fell is False:  # the reward has not stayed down: growing into the budget, not collapsing
                out["blowup"] = Finding(
                    "info", "truncated_frac", level, start + c.truncated_frac, k,
                    f"{msg}, while the reward has not stayed down (level {rev['reward_now']:.3g}, best "
                    f"{rev['reward_best']:.3g}; a fall holds {rev['sustain_levels']} levels) — responses grew into "
                    f"the length budget: raise the completion length", {**ev, **rev})
            else:
                out["blowup"] = Finding(
                    "critical" if level >= c.truncated_critical and sustained else "warning", "truncated_frac",
                    level, start + c.truncated_frac, k, msg, {**ev, **rev})
        return out

    def _collapse(self, h: History, now: float) -> Verdict:
        c, k, n = self.cfg.length, self.cfg.smooth_steps, self.cfg.history_steps
        start = float(h.first("response_length_mean", k).values.max())
        bar = c.collapse_abrupt_frac * start
        if c.degenerate_tokens < now <= bar:  # ≤ degenerate_tokens: `degenerate` says it
            before = h.series("response_length_mean", c.confirm_steps).values[:-1]
            descent = len(before) == c.confirm_steps - 1 and bool((before <= c.collapse_approach * bar).all())
            return {"collapse": Finding(
                "warning", "response_length_mean", now, bar, 1,
                f"length collapse: responses {now:.3g} tokens, ≤ {c.collapse_abrupt_frac:g} × their start "
                f"{start:.3g} (the longest of the run's first {k} points)"
                + (f", the end of a descent (the {len(before)} points before ≤ {c.collapse_approach:g} × that bar)"
                   if descent else ""),
                {"response_length_now": now, "response_length_start": start, "descent": descent},
                immediate=descent)}
        length = h.series("response_length_mean", n)
        if len(length) < max(c.collapse_min_points, 2 * k):
            return {}
        level, running = length.level(k), median_of(length.head(k).values)
        ev: dict = {"response_length_level": level, "response_length_running": running, "points": len(length)}
        reward = h.series("reward_mean", n)
        if len(reward) >= 2 * k:
            r_now, r_running = reward.level(k), median_of(reward.head(k).values)
            ev.update(reward_level=r_now, reward_running=r_running)
            if r_now >= r_running + c.collapse_reward_rise:
                return {"collapse": None}
        at = c.collapse_frac * running
        if running <= 0 or level > at:
            return {"collapse": None}
        return {"collapse": Finding(
            "warning", "response_length_mean", level, at, n,
            f"length collapse: responses {level:.3g} tokens ≤ {c.collapse_frac:g} × their running level "
            f"{running:.3g}, reward not rising", ev)}
