"""Entropy collapse, blow-up and degenerate output on ``entropy_mean`` (nats), phases ``collapse``, ``blowup`` and
``degenerate``.

* degenerate (critical): the latest entropy_mean < degenerate_floor — no history needed, so a collapse inside a
  run's first points is flagged at the first point that shows it (``Finding.immediate``). Critical once the median
  of the last ``degenerate_points`` (10) points is under the floor too (all the points while fewer), and some point
  since the run's first was at or above the floor (:meth:`.History.highest`; none: a run that never started, not
  harm done by training — a warning, ``severity.NEVER_STARTED``, session 31). A warning before: on a run of one
  prompt a step, one group answered the same way reads below the floor while the policy's level does not (a FinQA
  tool-calling agent, median entropy 0.035, critical blind at step 119 on isolated points; docs/lab/bench.md, session 27). Harm by itself: the
  severity gate never lowers it (``severity.exempt``) — unless the run reads as solving its task (``_solved``: its
  ``correct_frac`` level ≥ ``solved_correct``; without a correctness column, the step's reward at the top of a
  material range of the run's rewards, position ≥ ``solved_correct``): a policy sampling the one answer that is right
  is converged, not degenerate → ``info`` (issue 31: a tinker-cookbook arithmetic run at correct_frac 1.0 and entropy
  1e-4 was marked critical; a TRL arithmetic run of one prompt × 8 answers of 4–8 tokens, entropy below the floor at
  each step all 8 were right, reward 1.2 of 1.2, likewise — docs/lab/bench.md). Degenerate output that is wrong
  stays critical, and so does a run whose reward tells nothing (none logged, or a constant one);

* diffuse (warning): the last ``ceiling_points`` logged entropy_mean values all above ``ceiling`` nats — the policy
  samples among e^ceiling ≈ 7 or more tokens per position: random output (``!!!!`` or tokens of every script), the
  blow-up's end state, and no history needed (``Finding.immediate``): a run that dissolves in its first points is
  flagged when it does, where the blow-up rule still waits for min_points. Chosen on the tuned-on public sources:
  their healthy runs peak at 1.48 nats (docs/lab/bench.md). A warning, not critical: one public run its authors
  call healthy holds 2–11 nats for a third of its steps while its reward holds. A run that starts above
  ceiling / blowup_factor (the median of its first smooth_steps points) gets blowup_factor × its start as the bar:
  it was configured diffuse (a tiny model, a high temperature), it is not dissolving. Once open, the episode holds
  while any of the last smooth_steps points is over the bar: on the natural corpus's two runs that kept their
  reward, entropy flickers across 2 nats, and two points under the bar opened a new alarm each time (22 episodes;
  8 with the hold);

* collapse (warning; ``info`` on a run that reads as solving its task, as above, and, on a run that logs no
  correctness, while the reward holds — its latest level within the drop margin of its best,
  :func:`.signals.reward_drop`, the blow-up's test mirrored: entropy falling while the run earns its reward is a
  policy converging as far as the reward can tell, where a correctness column would tell a plateau short of solved: on
  the public runs its warnings fired on 7 healthy runs before and 4 after, and still preceded the same 5 collapses;
  docs/lab/bench.md, session 37. A warning once it dropped, or where nothing tells — no reward, too few of its
  points): early — while the history holds
  fewer than min_points points, the median of the last ``early_points`` (3) points ≤ collapse_frac × the highest of
  the run's first smooth_steps points that came before them (a rise inside the window is no start to fall from),
  flagged at the point that shows it (``Finding.immediate``; the median of 3 is its confirmation): a policy whose entropy fell tenfold in its first steps (a tuned-on run fell from 0.93 to 0.07
  nats by its 6th point, responses at the length cap, and nothing read it for 20 points: docs/lab/bench.md, session
  34); then level < collapse_abs, or level < collapse_frac × the *normal peak*: the highest level
  over the history that was not itself a blow-up (below blowup_factor × the history median). Without that
  exclusion a blow-up to 5 nats would set the bar at 0.5 and the run's ordinary level (≈ 0.3 on the tiny
  model, where it started) would read as a collapse once the blow-up passed;
* blow-up: level ≥ blowup_factor × the median of entropy_mean over the history. Its severity says whether the
  policy itself degrades — wrong answers going diffuse while correct ones stay sharp and the reward climbs is
  exploration (probability mass pushed off the wrong answers), not a collapse:

  - critical when the policy degrades: the correct responses' entropy (``entropy_mean_correct``) is blown up by
    the same rule on its own history, or L — the likelihood of correct responses, from the LLD detector's source
    (:mod:`.likelihood`) — falls significantly by ≥ ``lld.decay_change`` over its window;
  - warning when neither holds but the reward dropped from its running max (``signals.reward_drop``: by the
    reward-drop margin and by the severity gate's ``noise_z`` × the level's noise — a dip inside the reward's own
    noise is no drop; session 47);
  - info when the reward did not drop and L holds: the correct responses' entropy is known (≥ min_points points)
    and not blown up — the rise is in the incorrect responses — or it is not recorded (ingested or older runs):
    the rule cannot tell exploration from collapse, and a rise while the run still earns its reward is not an
    alarm (issue 31).

  The two level tests read ``severity_smooth_steps`` (20) points, not ``smooth_steps``: the correct responses are a
  few of a step's responses and the reward of a few questions a step swings by a quarter on its own. A reward drop
  alone is a warning, not a critical: on a run of the natural corpus that kept learning, blow-ups made critical by the
  reward drop alone included a real dip the run recovered from, while the collapsing runs' criticals came from L at
  the same steps (docs/lab/natural-corpus.md, "Entropy per correctness").

**One group a step.** A run that samples one prompt a step logs its zero-std share as 0 or 1 only
(:func:`.signals.one_group`, the test the starvation rule reads too), and its ``entropy_mean`` is one group's: a
group that answered alike reads near 0 and the next one 0.1, so 5-point levels swing by tenfold on a healthy run
(a FinQA tool-calling agent of 2,400 steps its authors call healthy held 193 warning episodes of entropy blow-up,
collapse and degenerate output; docs/lab/bench.md, session 36). On such a run the levels of the
collapse and blow-up rules are medians of ``starvation.single_points`` (20) points, the early collapse's of half as
many, and a point under the degenerate floor whose recent median is not is ``info`` (one group answered alike);
critical stays as above.

Blow-up and the collapse rule past its early form need min_points points in the history. The history is bounded
(history_steps), so a blow-up that lasts longer than about half of it becomes the new median and its episode ends:
by then the run is gone.

**Episodes** end after ``exit_patience`` = 10 evaluated points without their rule, not the default 5: a level that
hovers at its bar (a blow-up level near 1.5 × the median, entropy flickering across the diffuse ceiling) re-opened
the same alarm every few steps — on the natural corpus's never-collapsed runs 32 of 50 re-opened blow-up warnings
began ≤ 20 steps after the last one ended. With 10 one alarm stands for the stretch; no alarm rings earlier or later
(an episode kept open escalates only once its rule is confirmed again, :func:`.events.advance`), so which runs are
warned, and when first, is unchanged (docs/lab/bench.md, session 50).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import likelihood, signals
from .config import DetectorConfig, EntropyConfig
from .events import Finding, Severity, Verdict
from .history import History, Series
from .history import median as median_of
from .registry import num as _num
from .registry import register_detector
from .severity import NEVER_STARTED


def _solved(h: History, cfg: DetectorConfig, point: bool = False) -> str:
    """Why the run reads as solving its task ('' where it does not): its ``correct_frac`` level ≥ ``solved_correct``;
    where it logs no correctness (and ``solved_reward``), its reward at the top of a material range — position
    (r − lo) / (hi − lo) ≥ ``solved_correct`` in :func:`.signals.reward_range`, r the latest reward point
    (``point``: the step the degenerate entropy was measured on) or the reward level. The range is the one the
    starvation rule reads its all-correct groups from (floor 0 unless the reward goes below it), so a constant
    positive reward reads as the top, as it reads all-correct there; a range narrower than
    :func:`.signals.drop_needed` of hi (a reward that never rose off its floor) tells nothing."""
    k = cfg.smooth_steps
    correct = h.series("correct_frac", k)
    if len(correct):
        level = correct.level(k)
        return f"correct_frac level {level:.2f}: a task it solves" if level >= cfg.entropy.solved_correct else ""
    rng = signals.reward_range(h, cfg.history_steps, k) if cfg.entropy.solved_reward else None
    if rng is None or rng[1] - rng[0] < signals.drop_needed(rng[1], cfg):
        return ""
    (lo, hi), r = rng, h.series("reward_mean", 1 if point else k)
    reward = float(r.values[-1]) if point else r.level(k)
    if (reward - lo) / (hi - lo) < cfg.entropy.solved_correct:
        return ""
    return f"reward {reward:.3g} at the top of its range {lo:.3g}–{hi:.3g}: a task it solves"


def _tokens(nats: float) -> str:
    """How many equally likely tokens an entropy of ``nats`` stands for, e^nats, written so that a huge logged value
    (an ingested run's 1e3 nats) reads as a power of ten rather than overflowing: ``228`` for 5.43 nats, ``5.2e+21``
    for 50."""
    return f"{np.exp(nats):,.0f}" if nats < 20 else f"{10 ** (nats / np.log(10) % 1):.2g}e+{int(nats / np.log(10))}"


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, peak, median = (_num(ev.get(k)) for k in ("entropy_level", "entropy_peak", "entropy_median"))
    if level is None:
        return None
    if phase == "collapse" and peak:
        if level >= peak:  # under the absolute floor (collapse_abs) with no higher level to fall from: low all along
            return f"entropy at {level:.3g} nats, low all along (its peak level {peak:.3g})"
        return f"entropy fell to {level:.3g} nats, {level / peak:.0%} of its peak {peak:.3g}"
    if phase == "blowup" and median:
        return f"entropy rose to {level:.3g} nats, {level / median:.1f}× its median {median:.3g}"
    return None


@register_detector(primary=("entropy_mean",), config=EntropyConfig, sentence=_sentence, colour="#ffee58",
                   phase_names={"blowup": "entropy blow-up", "collapse": "entropy collapse",
                                "degenerate": "degenerate output (entropy)", "diffuse": "diffuse output (entropy)"},
                   drills=("blowup",))
class Entropy:
    name = "entropy"
    phases = ("collapse", "blowup", "degenerate", "diffuse")
    inputs = ("entropy_mean", "entropy_mean_correct", "reward_mean", "correct_frac", "zero_std_group_frac",
              *likelihood.INPUTS)  # the zero-std share: whether the run samples one group a step

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c, k = self.cfg.entropy, self.cfg.smooth_steps
        now = h.row.num("entropy_mean")
        if now is None:
            return {}
        e = h.series("entropy_mean", self.cfg.history_steps)
        single = signals.one_group(h, self.cfg)
        degenerate: Verdict = {"degenerate": None if now >= c.degenerate_floor
                               else self._degenerate(h, e.values, now, single)}
        degenerate["diffuse"] = self._diffuse(e.values[-max(c.ceiling_points, k):], h.first("entropy_mean", k).values,
                                              "diffuse" in open_phases)
        n = self.cfg.starvation.single_points if single else k  # one group a step: a level of single_points groups
        if len(e) < max(c.min_points, n):  # a level needs its n points (starvation.single_points may exceed min_points)
            return {**degenerate, "collapse": self._early_collapse(h, e, single)}
        level = e.level(n)
        levels, median = e.levels(n), median_of(e.values)
        normal = levels[levels < c.blowup_factor * median] if median > 0 else levels
        peak = float(normal.max() if len(normal) else levels.max())
        ev = {"entropy_level": level, "entropy_peak": peak, "entropy_median": median, "points": len(e),
              "one_group_a_step": single, "level_points": n}
        verdict: Verdict = {"collapse": None, "blowup": None, **degenerate}
        collapse_at = max(c.collapse_abs, c.collapse_frac * peak)
        if level < collapse_at:
            severity, why = self._collapse_severity(h, ev, single)
            verdict["collapse"] = Finding(
                severity, "entropy_mean", level, collapse_at, self.cfg.history_steps,
                f"entropy collapse: level {level:.3g} nats < {collapse_at:.3g} (peak {peak:.3g})" + why, ev)
        blowup_at = c.blowup_factor * median
        if median > 0 and level >= blowup_at:
            severity, why = self._blowup_severity(h, ev)
            verdict["blowup"] = Finding(
                severity, "entropy_mean", level, blowup_at, self.cfg.history_steps,
                f"entropy blow-up: level {level:.3g} nats ≥ {c.blowup_factor:g} × median {median:.3g}; {why}", ev)
        return verdict

    def _early_collapse(self, h: History, e: Series, single: bool = False) -> Finding | None:
        """The collapse finding before the history holds min_points points (module doc, collapse, early), or None;
        ``single``: one group a step, its level read over starvation.single_points // 2 points."""
        c, k = self.cfg.entropy, self.cfg.smooth_steps
        n = max(c.early_points, self.cfg.starvation.single_points // 2) if single else c.early_points
        if c.early_points <= 0 or len(e) < n:
            return None
        first = h.first("entropy_mean", k)
        before = first.values[first.steps < e.steps[-n]]  # the start, before the window it is judged by
        if not len(before):
            return None
        start = float(before.max())
        level, bar = e.level(n), c.collapse_frac * start
        if not (start > 0 and level <= bar):
            return None
        ev = {"entropy_level": level, "entropy_peak": start, "entropy_median": median_of(e.values),
              "points": len(e), "early": True, "one_group_a_step": single, "level_points": n}
        severity, why = self._collapse_severity(h, ev, single)
        return Finding(
            severity, "entropy_mean", level, bar, n,
            f"entropy collapse in the run's first points: level {level:.3g} nats ≤ {c.collapse_frac:g} × {start:.3g}, "
            f"the highest of its first points" + why, ev, immediate=True)

    def _collapse_severity(self, h: History, ev: dict[str, Any], single: bool) -> tuple[Severity, str]:
        """The collapse phase's severity and the message's tail: info on a run that reads as solving its task
        (:func:`_solved`); on a run that logs no correctness, info too while its reward holds at its running max
        (:func:`.signals.reward_drop` over starvation.single_points points on a run of one group a step, else
        smooth_steps) — a policy converging while it earns its reward, as far as the reward can tell. A warning where
        correctness is logged and short of solved (a deterministic policy still often wrong: the plateau an entropy
        collapse causes), where the reward dropped, or where nothing tells (too few reward points, none)."""
        solved = _solved(h, self.cfg)
        ev["solved"] = solved
        if solved:
            return "info", f"; {solved}: a converged policy"
        if len(h.series("correct_frac", 1)):  # correctness known and short of solved: the plateau it causes
            return "warning", ""
        drop, drop_ev = signals.reward_drop(h, self.cfg, self.cfg.starvation.single_points if single else None)
        ev.update(reward=drop_ev, reward_dropped=drop)
        if drop is False:
            return "info", (f"; the reward holds (level {drop_ev['reward_now']:.3g}, its best {drop_ev['reward_peak']:.3g}):"
                            " a converging policy")
        return "warning", ""

    def _degenerate(self, h: History, values: np.ndarray, now: float, single: bool = False) -> Finding:
        """The degenerate-output finding for a point under the floor (module doc): info on a run that reads as solving
        its task, critical once the median of the last ``degenerate_points`` points is under the floor too, else a
        warning (one step's answers alike; the policy's recent level is not degenerate yet) — info on a run of one
        group a step (``single``), where one group answered alike is what such a point is."""
        c = self.cfg.entropy
        solved = _solved(h, self.cfg, point=True)
        recent = values[-c.degenerate_points:]
        recent_median = median_of(recent) if len(recent) else now
        sustained = recent_median < c.degenerate_floor
        never = (h.highest("entropy_mean") or now) < c.degenerate_floor
        if solved:
            why = f"; {solved})"
        elif never:
            why = f" at every point since the run's first: {NEVER_STARTED})"
        elif sustained:
            why = ")"
        else:
            why = (f" at this step; the median of its last {len(recent)} points, {recent_median:.3g}, is not: critical "
                   "once it is" + ("; one group a step: one group answered alike)" if single else ")"))
        quiet = solved or (single and not sustained and not never)
        return Finding(
            "info" if quiet else "critical" if sustained and not never else "warning", "entropy_mean", now,
            c.degenerate_floor, 1,
            f"{'a converged policy' if solved else 'degenerate output'}: entropy {now:.3g} nats < "
            f"{c.degenerate_floor:g} (the policy samples one token per position" + why,
            {"entropy_now": now, "solved": solved, "entropy_recent_median": recent_median, "since_start": never,
             "one_group_a_step": single},
            immediate=True)

    def _diffuse(self, recent: np.ndarray, start: np.ndarray, is_open: bool) -> Finding | None:
        """The diffuse-output finding (module doc), or None, on the last max(ceiling_points, smooth_steps)
        entropies. The bar is ``ceiling``, or ``blowup_factor`` × the run's start (the median of its first
        smooth_steps points) where that is higher: a run that starts that diffuse (a tiny model, a high temperature)
        is configured so, not dissolving. It opens on ``ceiling_points`` points in a row over the bar; once open it
        holds while any of the last smooth_steps points is over it (a point or two under the bar between diffuse
        ones is the same episode, not a new alarm)."""
        c = self.cfg.entropy
        last = recent[-c.ceiling_points:]
        if c.ceiling <= 0 or len(last) < c.ceiling_points:
            return None
        bar = max(c.ceiling, c.blowup_factor * median_of(start))
        over = recent[-self.cfg.smooth_steps:] > bar
        if not (np.all(last > bar) or (is_open and over.any())):
            return None
        now, high = float(last[-1]), float(recent[-self.cfg.smooth_steps:].max())
        return Finding("warning", "entropy_mean", now, bar, c.ceiling_points,
                       f"diffuse output: entropy over {bar:.3g} nats on {int(over.sum())} of the last {len(over)} points"
                       f" (up to {high:.3g}: as random as a uniform pick among {_tokens(high)} tokens per position;"
                       f" now {now:.3g})",
                       {"entropy_now": now, "entropy_max_recent": high, "points_over": int(over.sum()),
                        "entropy_start": median_of(start)}, immediate=True)

    def _blowup_severity(self, h: History, ev: dict[str, Any]) -> tuple[Severity, str]:
        """critical / info / warning by the module docstring's rule; ``ev`` gets what each test saw."""
        c, k = self.cfg.entropy, self.cfg.entropy.severity_smooth_steps
        degrades: list[str] = []
        sharp = False
        ec = h.series("entropy_mean_correct", self.cfg.history_steps)
        if len(ec) >= max(c.min_points, k):
            level_c, median_c = ec.level(k), median_of(ec.values)
            ev.update(entropy_correct_level=level_c, entropy_correct_median=median_c)
            if median_c > 0 and level_c >= c.blowup_factor * median_c:
                degrades.append("correct responses' entropy blown up too")
            else:
                sharp = True
        drop, drop_ev = signals.reward_drop(h, self.cfg, k)
        ev.update(reward=drop_ev, reward_dropped=bool(drop))
        src = likelihood.source(h, self.cfg.lld.sentinel_min_points)
        L = likelihood.series(h, src, "correct", self.cfg.lld.slope_window if src != "sentinel"
                              else self.cfg.lld.sentinel_window)
        if len(L) >= 3:
            trend = L.trend(self.cfg.trend_confidence)
            change = trend.slope * L.span()
            ev.update(L_source=src, L_change_over_window=change)
            if trend.falling and change <= -self.cfg.lld.decay_change:
                degrades.append(f"L ({src}) falling")
        ev["policy_degrades"] = degrades
        if degrades:
            return "critical", "the policy degrades: " + ", ".join(degrades)
        if drop:
            return "warning", (f"the reward dropped (level {drop_ev['reward_now']:.3g} from {drop_ev['reward_peak']:.3g})"
                               " while L holds and the correct responses' entropy is not blown up")
        if sharp:
            return "info", (f"correct responses stay sharp (entropy {ev['entropy_correct_level']:.3g} vs median "
                            f"{ev['entropy_correct_median']:.3g}) and the reward holds: the incorrect ones go diffuse")
        return "info", ("correct responses' entropy not recorded and the reward holds: cannot tell exploration from "
                        "collapse")
