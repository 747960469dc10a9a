"""Detector configuration: every threshold a named, documented, overridable default.

No paper publishes numeric thresholds for these phases (docs/architecture.md, *Detectors*). The defaults below follow
the scale of the quantities — ratios are dimensionless around 1, log-likelihoods are nats per token, rewards are
assumed to live on a [0, 1]-like scale — and are checked on the labelled synthetic series of
``tests/fixtures/synthetic_steps.py`` (``bench/eval_detectors.py``) and on drill runs, chosen on a training split
and scored on held-out runs (``collapsewatch lab calibrate``; docs/lab/detectors-evaluation.md, "Calibration").
Override with ``dataclasses.replace``, :meth:`DetectorConfig.from_file` or :meth:`DetectorConfig.from_dict` (``{"isdd": {"median_threshold": 0.85}}``).

Units of windows: every window (``*_window``, ``*_steps`` lengths, ``history_steps``) counts *logged points* of the
column it reads, not steps (see :mod:`.history`): a run that logs every 10th step gets the same verdicts on its
points, over 10× as many steps. The ``*_steps`` names are kept for compatibility with existing config files."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from .settings import EvaluationConfig, GrpoGuardConfig, MismatchConfig, Timing, ToolsConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class SignalConfig:
    """Confirmation signals shared by ISDD and LLD (they raise severity, they never flag alone)."""

    recent_steps: int = 10
    """Points of the 'recent' side of grad-norm spikes and entropy surges."""
    reference_steps: int = 50
    """Reference points (just before the recent ones) whose median defines 'normal'."""
    grad_spike_factor: float = 3.0
    """Grad spike: max grad_norm over the recent window ≥ this × the reference median."""
    entropy_surge_factor: float = 1.3
    """Entropy surge: recent entropy_mean level ≥ this × the reference median."""
    rise_fall_window: int = 80
    """Window over which 'entropy rose then fell' is judged (ISDD confirmation)."""
    entropy_rise_frac: float = 0.1
    """Entropy rise: peak level ≥ (1 + this) × the level at the window start."""
    entropy_fall_frac: float = 0.1
    """Entropy fall: current level ≤ (1 − this) × the peak level, the peak after the start."""
    reward_peak_window: int = 150
    """The running maximum of the reward level is taken over this many steps (bounded state)."""
    reward_drop_frac: float = 0.25
    """Reward drop: level below the running max by at least this fraction of |running max| …"""
    reward_drop_min: float = 0.05
    """… and by at least this much in reward units."""


@dataclass(frozen=True)
class IsddConfig(Timing):
    """ISDD: the ratio of A>0 tokens drifts down (SAPO, arXiv 2603.10069)."""

    median_threshold: float = 0.9
    """Enter when the smoothed ratio_p50_pos is below this and still falling; stay while below it."""
    trend_window: int = 20
    """Off-policy points over which 'still falling' (Theil–Sen slope of ratio_p50_pos) is judged."""
    min_points: int = 10
    """Off-policy points the trend window needs for a verdict."""
    p05_threshold: float = 0.1
    """Lower-tail rule: smoothed ratio_p05_pos below this."""
    lt_0_1_frac_threshold: float = 0.05
    """Lower-tail rule: smoothed share of A>0 tokens with r < 0.1 above this."""


@dataclass(frozen=True)
class LldConfig(Timing):
    """LLD death spiral on the likelihood of correct responses (LLDS, arXiv 2512.04220)."""

    confirm_steps: int = 5
    exit_patience: int = 10

    slope_window: int = 30
    """Steps of the Theil–Sen slope of L = logp_old_mean_correct (and of I, reward)."""
    min_points: int = 15
    """Points of L the slope window needs for a verdict."""
    stagnation_window: int = 50
    """Steps over which stagnation (L flat, reward rising) is judged; needs half as many points."""
    flat_change: float = 0.03
    """Stagnation: the slope's whole CI × stagnation_window lies within ±this (nats/token): flat, not unsure."""
    decay_change: float = 0.05
    """Decay: slope × slope_window ≤ −this (nats/token) and the slope's CI is below 0."""
    require_incorrect_falling: bool = True
    """Decay also needs logp_old_mean_incorrect not significantly rising (when it has enough points)."""
    accel_factor: float = 2.0
    """Acceleration: slope over the last recent_steps ≤ this × the slope over the whole window (< 0)."""
    recent_steps: int = 10
    """Steps of the 'recent' slope and of the cliff drop."""
    cliff_factor: float = 6.0
    """Cliff: L level fell over recent_steps by ≥ this × the window's per-point noise (MAD), and ≥ decay_change."""
    sentinel_window: int = 12
    """Points of the sentinel L (``detectors.likelihood``) the slopes read in place of slope_window (scored every
    10 steps by default: 120 steps); stagnation reads twice as many. Sentinels carry no sampling noise."""
    sentinel_min_points: int = 6
    """Sentinel points needed before the sentinel L replaces the batch L."""
    sentinel_recent: int = 4
    """Sentinel points of the 'recent' slope and the cliff drop (recent_steps for the batch L)."""


@dataclass(frozen=True)
class EntropyConfig(Timing):
    """Entropy collapse (exploration gone) and blow-up (policy dissolving)."""

    collapse_abs: float = 0.01
    """Collapse: entropy_mean level below this many nats … (verl's 7B GSM8K runs converge to 0.011–0.04 nats)."""
    collapse_frac: float = 0.1
    """… or below this fraction of its peak level over the history (blow-up levels excluded from the peak)."""
    blowup_factor: float = 1.5
    """Blow-up: level ≥ this × the median of entropy_mean over the history (docs/lab/detectors-evaluation.md)."""
    min_points: int = 20
    """Points the history needs before the collapse or blow-up rule gives a verdict."""
    degenerate_floor: float = 1e-3
    """Degenerate output (no history needed): the latest entropy_mean below this many nats."""
    degenerate_points: int = 10
    """… critical once the median of the last this many points (all of them while fewer) is below the floor too, a
    warning before: one step's group answered the same way is not a policy that samples one token (1: critical at
    the first point)."""
    solved_correct: float = 0.95
    """A ``correct_frac`` level this high reads as solving the task: near-zero entropy is convergence (``info``)."""
    solved_reward: bool = True
    """Without ``correct_frac``: a reward at that position of its material range or higher reads so too."""
    ceiling: float = 2.0
    """Diffuse output (warning, no history needed): entropy_mean above this many nats on ``ceiling_points``
    consecutive logged points — near-random sampling (e² ≈ 7 tokens per position); 0: off (docs/lab/bench.md)."""
    ceiling_points: int = 2
    """… consecutive points (one point over the bar is a spike, not output)."""
    early_points: int = 3
    """Early collapse (while the history holds fewer than min_points points): the median of the last this-many points
    ≤ collapse_frac × the highest of the run's first smooth_steps points before them — the collapse phase, flagged at
    the point that shows it (the median is its confirmation); 0: off (docs/lab/bench.md, session 34)."""
    exit_patience: int = 10
    """An episode ends after this many evaluated points without its rule (5 split a flickering level into alarms)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ceiling < 0 or self.ceiling_points < 1:
            raise ValueError("entropy.ceiling must be ≥ 0 and entropy.ceiling_points ≥ 1")
        if self.early_points < 0:
            raise ValueError(f"entropy.early_points must be ≥ 0, not {self.early_points}")
        if self.degenerate_points < 1:
            raise ValueError(f"entropy.degenerate_points must be ≥ 1, not {self.degenerate_points}")
    severity_smooth_steps: int = 20
    """Points of the levels the blow-up's severity tests read: the correct responses' entropy and the reward drop
    (``signals.reward_drop``). 20, chosen on the natural corpus's learning run and its collapsing runs:
    with ``smooth_steps`` (5) the correct responses' entropy of a few responses a step read "blown up" on noise
    (docs/lab/natural-corpus.md, "Entropy per correctness"; held-out runs reported there)."""


@dataclass(frozen=True)
class GradConfig(Timing):
    """Gradient explosion on the pre-clip global grad norm."""

    confirm_steps: int = 1
    exit_patience: int = 3
    window: int = 50
    """Reference points (the previous logged grad norms, current excluded) whose median is the normal one."""
    min_points: int = 20
    """Reference points needed for a verdict (a median of fewer describes a run's first, settling steps)."""
    spike_factor: float = 5.0
    """Explosion: grad_norm ≥ this × the reference median (warning) …"""
    spike_z: float = 5.0
    """… and ≥ exp(this × robust σ of log grad_norm over the window) × the median (jumpy runs need more)."""
    recover_factor: float = 3.0
    """A point ≥ this × the reference median is still elevated (a spike recovers once the norm is back under it)."""
    sustain_steps: int = 3
    """An elevated run (holding a point over the bar) shorter than this is an info spike; this many
    consecutive elevated points make it a warning (critical by critical_factor)."""
    critical_factor: float = 20.0
    """… ≥ this × the reference median: critical."""
    recur_spikes: int = 3
    """Spikes that keep coming back: this many points over the bar within the last ``recur_window`` logged points
    make a warning, however fast each recovered (together they say the update is unstable); 0: off."""
    recur_window: int = 10
    """… counted over this many logged points (the current one included)."""
    dead_frac: float = 0.001
    """Reference points at or under this × the window's 90th percentile are left out of the median and spread: a step
    whose groups all scored alike has no GRPO signal and an all-but-zero gradient (KL and entropy terms only), no
    measure of the norm's scale (a public TRL run whose median step had a 3e-6 norm read its live 0.13 as 46,000 ×;
    docs/lab/bench.md). The percentile, not the highest: after a real spike the highest would leave out the normal
    points themselves. 0: every point counts."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.dead_frac < 1:
            raise ValueError("grad.dead_frac must be in [0, 1)")
        if self.recur_spikes < 0 or not 1 <= self.recur_window <= self.window + 1:
            raise ValueError(f"grad.recur_spikes must be ≥ 0 and grad.recur_window in 1..window + 1 ({self.window + 1})")


@dataclass(frozen=True)
class NonfiniteConfig(Timing):
    """First non-finite value: from first_nonfinite, the nonfinite_* counts, or ±Inf grad_norm / loss."""

    confirm_steps: int = 1
    exit_patience: int = 3


@dataclass(frozen=True)
class StarvationConfig(Timing):
    """Signal starvation: groups whose rewards are all equal carry no GRPO advantage."""

    confirm_steps: int = 1
    """The rule reads a level (3 of the last 5 points ≥ warn_frac): that is its confirmation; 3 more steps only
    delayed the flag (docs/lab/bench.md, 2026-11-29 evening). Not read before ⌈smooth_steps / 2⌉ points."""
    warn_frac: float = 0.8
    """Warning when the zero_std_group_frac level reaches this."""
    cold_start: bool = True
    """All-wrong groups before the run has earned anything are a cold start, info (module doc of
    ``detectors/starvation.py``); False: a warning like any starvation."""
    critical_frac: float = 0.95
    """Critical when the mean of the last ``critical_window`` points reaches this …"""
    critical_window: int = 20
    """… points of zero_std_group_frac (not the 5-point level: with 4 groups of 4 a step, a few all-equal steps
    in a row are ordinary)."""
    single_points: int = 20
    """Groups a starvation level rests on where a step logs one to three (each point g groups, equal or not: a share
    logged as 0 and 1, or in halves or thirds): the mean of the last ⌈this / g⌉ points, read from half as many — not
    the 5-point median, which 3 all-equal points in 5 fill (module doc of ``detectors/starvation.py``). The entropy
    rule reads a run of one group a step over as many points (module doc of ``detectors/entropy.py``)."""


@dataclass(frozen=True)
class LengthConfig(Timing):
    """Length budget / blow-up (truncation), degenerate output, repetition and collapse (outputs shrinking)."""

    truncated_frac: float = 0.3
    """Budget: truncated_frac level and its start (median of the first smooth_steps points) both ≥ this (info).
    Blow-up: the level ≥ its start + this (warning): truncation rising during the run."""
    truncated_critical: float = 0.7
    """… and the level and the mean of the last blowup_sustain_points points ≥ this: critical."""
    blowup_sustain_points: int = 20
    """Points of truncated_frac whose mean must stay ≥ truncated_critical for a critical blow-up (one that
    recovers within them stays a warning)."""
    degenerate_tokens: float = 2.0
    """Degenerate output (critical, no history needed): the latest response_length_mean ≤ this many tokens — a
    letter or a number and the end token, no reasoning and no sentence."""
    repeat_frac: float = 0.6
    """Repetition: repeat_frac_max level ≥ this (one token id is this share of some response)."""
    collapse_frac: float = 0.25
    """Collapse: response_length_mean level ≤ this × its running level (the median of the history's earlier
    points) …"""
    collapse_reward_rise: float = 0.05
    """… unless the reward level rose by at least this (reward units) over its own running level: shorter
    answers that earn more are the model getting concise, not collapsing."""
    collapse_min_points: int = 20
    """Points of response_length_mean the gradual collapse rule needs before a verdict."""
    collapse_abrupt_frac: float = 0.1
    """Abrupt collapse (no history needed): the latest response_length_mean ≤ this × the longest of the run's
    first smooth_steps points — responses shrank tenfold."""
    collapse_approach: float = 2.0
    """… flagged at once, not after confirm_steps, when the confirm_steps − 1 points before were already ≤ this ×
    that bar: the end of a descent, not one short step of a noisy run (docs/lab/bench.md)."""


@dataclass(frozen=True)
class SeverityConfig:
    """The shared severity gate (:mod:`.severity`): critical only with harm (a sustained reward fall from its best)."""

    enabled: bool = True
    """Apply the gate (False: detectors' severities as they compute them)."""
    near_best_frac: float = 0.1
    """'Near its best': reward level within this fraction of |running best| …"""
    near_best_min: float = 0.02
    """… or within this much in reward units, whichever is larger."""
    exempt: tuple[str, ...] = ("nonfinite", "length/degenerate", "entropy/degenerate")
    """Detectors (or ``detector/phase``) whose critical is never lowered: harm by themselves (a NaN ends the run
    whatever the reward says; degenerate output is the failure)."""
    sustain_levels: int = 5
    """Critical only while each of the last this many reward levels is below the running best by the reward-drop
    margin (``signals.reward_drop_*``): a sustained fall, not a one-level dip (5 = ``smooth_steps``: the fall
    outlasts one level's window)."""
    sustain_steps: int = 90
    """… and that run of fallen levels has lasted this many steps (0: off). 90: the natural corpus's rewards dip 30-80
    steps and recover; from 90 on its never-collapsed runs get no critical (docs/lab/bench.md, 2026-12-02)."""
    noise_z: float = 3.0
    """… and by this many times the level's noise (1.2533 · the reward's per-point noise / √smooth_steps): on a
    noisy reward the best level sits high by noise alone, so a fall within the noise shows no harm."""

    def __post_init__(self) -> None:
        if self.near_best_frac < 0 or self.near_best_min < 0:
            raise ValueError("severity.near_best_frac and near_best_min must be ≥ 0")
        if self.sustain_levels < 1:
            raise ValueError("severity.sustain_levels must be ≥ 1")
        if self.sustain_steps < 0:
            raise ValueError("severity.sustain_steps must be ≥ 0")


DETECTORS = ("isdd", "lld", "entropy", "grad", "nonfinite", "starvation", "length", "mismatch", "tools",
             "evaluation", "grpo_guard")
DEFAULT_ENABLED = DETECTORS[:-1]  # grpo_guard is opt-in until calibrated (the synthetic series carry no ratio_mean_pos)


@dataclass(frozen=True)
class DetectorConfig:
    """All detector settings. ``DetectorConfig()`` is the documented default."""

    smooth_steps: int = 5
    """Every 'level' is the median of a column's last this-many points (robust to one-step spikes)."""
    trend_confidence: float = 0.95
    """Confidence of the Theil–Sen slope interval behind 'falling' / 'rising'."""
    history_steps: int = 200
    """The longest window any rule reads (bounded state; per-step cost O(this))."""
    rollback_steps: int = 200
    """A restart going back at most this many rows is replayed exactly (rows and per-step tracker
    snapshots are kept this much longer); an older one starts the detectors cold."""
    enabled: tuple[str, ...] = DEFAULT_ENABLED
    """Detectors to run, by name."""
    signals: SignalConfig = field(default_factory=SignalConfig)
    severity: SeverityConfig = field(default_factory=SeverityConfig)
    isdd: IsddConfig = field(default_factory=IsddConfig)
    lld: LldConfig = field(default_factory=LldConfig)
    entropy: EntropyConfig = field(default_factory=EntropyConfig)
    grad: GradConfig = field(default_factory=GradConfig)
    nonfinite: NonfiniteConfig = field(default_factory=NonfiniteConfig)
    starvation: StarvationConfig = field(default_factory=StarvationConfig)
    length: LengthConfig = field(default_factory=LengthConfig)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    grpo_guard: GrpoGuardConfig = field(default_factory=GrpoGuardConfig)

    def __post_init__(self) -> None:
        unknown = (set(self.enabled) | {e.split("/")[0] for e in self.severity.exempt}) - set(DETECTORS)
        if unknown:
            raise ValueError(f"unknown detectors {sorted(unknown)}; known: {DETECTORS}")
        if self.rollback_steps < 0:
            raise ValueError("rollback_steps must be ≥ 0")
        if not 0 < self.trend_confidence < 1:
            raise ValueError("trend_confidence must be in (0, 1)")
        s = self.signals
        needed = {
            "signals.recent_steps + reference_steps": s.recent_steps + s.reference_steps,
            "signals.rise_fall_window": s.rise_fall_window, "signals.reward_peak_window": s.reward_peak_window,
            "isdd.trend_window": self.isdd.trend_window, "lld.slope_window": self.lld.slope_window,
            "lld.stagnation_window": self.lld.stagnation_window,
            "2 × grad.window + 1": 2 * self.grad.window + 1, "mismatch.window": self.mismatch.window,
        }
        for name, steps in needed.items():
            if steps > self.history_steps:
                raise ValueError(f"{name} = {steps} exceeds history_steps = {self.history_steps}")
        if not 1 <= self.entropy.severity_smooth_steps <= self.history_steps:
            raise ValueError("entropy.severity_smooth_steps must be in [1, history_steps]")
        if self.lld.recent_steps >= self.lld.slope_window:
            raise ValueError("lld.recent_steps must be shorter than lld.slope_window")
        if not 3 <= self.lld.sentinel_min_points <= self.lld.sentinel_window:
            raise ValueError("lld.sentinel_min_points must be in [3, lld.sentinel_window]")
        if self.lld.sentinel_recent >= self.lld.sentinel_window or 2 * self.lld.sentinel_window > self.history_steps:
            raise ValueError("lld.sentinel_recent must be < lld.sentinel_window, and 2 × sentinel_window ≤ "
                             "history_steps")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DetectorConfig:
        """Defaults overridden by a nested mapping, e.g. parsed from JSON or TOML."""
        top = {f.name: f for f in fields(cls)}
        out = cls()
        for key, value in data.items():
            if key not in top:
                raise ValueError(f"unknown detector setting {key!r}{_known(key, top)}")
            current = getattr(out, key)
            if isinstance(value, Mapping):
                if not is_dataclass(current):
                    raise ValueError(f"detector setting {key!r} is a value, not a [{key}] table")
                names = {f.name for f in fields(current)}
                for k in value:
                    if k not in names:
                        raise ValueError(f"unknown setting {k!r} in [{key}]{_known(k, names)}")
                value = replace(current, **{k: tuple(v) if isinstance(v, list) else v for k, v in value.items()})
            elif key == "enabled":
                value = tuple(value)
            out = replace(out, **{key: value})
        return out

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> DetectorConfig:
        """Defaults overridden by a TOML file of the same nesting (``[isdd]`` / ``median_threshold = 0.85``),
        e.g. the output of ``collapsewatch lab calibrate``. Errors name the file."""
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"detectors file {str(p)!r} does not exist")
        try:
            return cls.from_dict(tomllib.loads(p.read_text()))
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"detectors file {str(p)!r} is not valid TOML: {e}") from e
        except (TypeError, ValueError) as e:
            raise ValueError(f"detectors file {str(p)!r}: {e}") from e


def _known(name: str, known: Collection[str]) -> str:
    """``: did you mean 'x'? (known: a, b, …)`` for an unknown setting ``name`` among ``known``."""
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (known: {', '.join(sorted(known))})"
