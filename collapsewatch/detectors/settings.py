"""Settings shared by every detector (:class:`Timing`) and those of the detectors that read optional inputs — rollout
log-probs (:class:`MismatchConfig`), an agent's tool calls (:class:`ToolsConfig`), an evaluation score
(:class:`EvaluationConfig`), PPO ratios split by advantage sign (:class:`GrpoGuardConfig`). :mod:`.config` re-exports
them; :class:`~.config.DetectorConfig` holds one of each.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Episode timing shared by every detector config (see :mod:`.events`)."""

    confirm_steps: int = 3
    """A phase is entered after its rule held on this many consecutive evaluated steps."""
    exit_patience: int = 5
    """An open episode ends after this many consecutive evaluated steps where its rule does not hold."""

    def __post_init__(self) -> None:
        if self.confirm_steps < 1 or self.exit_patience < 1:
            raise ValueError("confirm_steps and exit_patience must be ≥ 1")


@dataclass(frozen=True)
class MismatchConfig(Timing):
    """Train–inference mismatch drift (logp_old vs logp_rollout)."""

    window: int = 30
    """Steps of the Theil–Sen slope of is_log_ratio_abs_mean."""
    min_points: int = 15
    """Points the window needs for the rising rule."""
    abs_min: float = 0.02
    """Rising rule: level ≥ this many nats …"""
    rise_factor: float = 2.0
    """… and ≥ this × the median over the history, with a significantly rising slope."""
    ess_warn: float = 0.7
    """ESS rule: is_ess level ≤ this (is_ess is normalised to (0, 1])."""
    ess_critical: float = 0.3
    """ESS level ≤ this: critical."""


@dataclass(frozen=True)
class GrpoGuardConfig(Timing):
    """GRPO-Guard's signature (:mod:`.grpo_guard`): A>0 ratio mean left of 1 while clip_high never fires."""

    mean_shift: float = 0.02
    """Flag when the ratio_mean_pos level is below 1 − this …"""
    clip_high_max: float = 0.001
    """… while the clip_high_frac level is at most this (the upper clip is silent)."""
    min_points: int = 5
    """Off-policy points of ratio_mean_pos needed before any verdict."""


@dataclass(frozen=True)
class ToolsConfig(Timing):
    """Tool-use collapse (:mod:`.tools`): an agent that made tool calls stops making them."""

    smooth_points: int = 3
    """Level = the median of tool_calls_mean's last this-many points (short: a search agent's no-search collapse
    runs its course in about ten steps)."""
    min_points: int = 6
    """Points of tool_calls_mean needed before any verdict (two levels' worth: a peak, then a level to compare)."""
    established: float = 0.5
    """Tool use counts as established once a level reached this many calls per response; a run that never got
    there (a model that never learned the tool) is not abandoning it."""
    collapse_frac: float = 0.1
    """Flag when the level is ≤ this × the highest level so far (the peak). 0.1, chosen leave one source out among
    0.2 and 0.1 on the public runs (docs/lab/bench.md, session 54): at 0.2 healthy agents that searched less for a
    while were warned on two sources."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.smooth_points < 1 or self.min_points < self.smooth_points:
            raise ValueError("tools.smooth_points must be ≥ 1 and tools.min_points ≥ smooth_points")
        if not 0 < self.collapse_frac < 1 or self.established <= 0:
            raise ValueError("tools.collapse_frac must be in (0, 1) and tools.established > 0")


@dataclass(frozen=True)
class EvaluationConfig(Timing):
    """Evaluation-score fall (:mod:`.evaluation`): the score the run logs on its evaluation set falls from its best."""

    confirm_steps: int = 1
    """The rule's own ``sustain_points`` is its confirmation (evaluations are sparse: a wait of more points is a wait
    of more evaluation intervals)."""
    exit_patience: int = 2
    """Evaluation points no longer fallen that end an episode (the rule is read only where the score is logged)."""
    sustain_points: int = 1
    """Flag when the last this-many evaluation points are all below the best by the reward-drop margin."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sustain_points < 1:
            raise ValueError("evaluation.sustain_points must be ≥ 1")
