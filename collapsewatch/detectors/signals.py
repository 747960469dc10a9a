"""Confirmation signals shared by the ISDD and LLD rules: reward drop, grad spike, entropy surge / rise-fall.

Each returns ``(fired, evidence)``; ``fired`` is None when the inputs are too thin to say. They raise a
phase's severity or complete its rule; they never open an episode by themselves.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .config import DetectorConfig
from .history import History, median_noise

Signal = tuple["bool | None", dict[str, Any]]


def reward_drop(h: History, cfg: DetectorConfig, smooth: int | None = None) -> Signal:
    """Reward level (median of the last ``smooth`` points, default smooth_steps) below its running max (over
    reward_peak_window) by the configured margin and by ``severity.noise_z`` × the level's noise — the severity
    gate's margin on one level (:func:`level_fall` with sustain 1): the best of many levels of a noisy reward sits
    high by noise alone, and a level that far under it is no drop. None below 2 · smooth points."""
    k = smooth or cfg.smooth_steps
    fired, ev = level_fall(h, cfg, "reward_mean", k, 1, name="reward")
    if fired is None:
        return None, {}
    return fired, {**ev, "reward_peak": ev["reward_best"], "drop": ev["reward_best"] - ev["reward_now"], "smooth": k}


def drop_needed(peak: float, cfg: DetectorConfig) -> float:
    """How far below its running max a reward level must be to count as a drop: max(reward_drop_min,
    reward_drop_frac · |max|) — one rule for the confirmation signal and the severity gate's harm test."""
    return max(cfg.signals.reward_drop_min, cfg.signals.reward_drop_frac * abs(peak))


def one_group(h: History, cfg: DetectorConfig) -> bool:
    """Whether the run logs its zero-std share as single groups — one prompt a step, each point one GRPO group: every
    logged value the history holds is 0 or 1, and both occur. The starvation rule reads its share over
    ``starvation.single_points`` points then, and the entropy rule its levels (their module docs)."""
    v = h.series("zero_std_group_frac", cfg.history_steps).values
    return bool(np.isin(v, (0.0, 1.0)).all()) and 0.0 in v and 1.0 in v


def groups_a_step(h: History, cfg: DetectorConfig) -> int | None:
    """How many GRPO groups one point of the logged zero-std share stands for, where so few that the starvation rule
    reads its level over ``starvation.single_points`` groups rather than ``smooth_steps`` points (module doc of
    :mod:`.starvation`): 1 where :func:`one_group`; else the least g ≥ 2 with ⌈single_points / g⌉ > smooth_steps
    (2 or 3 at 20 and 5) such that every logged share the history holds is a multiple of 1/g (within 1e-6: float32
    logs) and one lies strictly between 0 and 1; None otherwise (many groups a step, or a share not so grained)."""
    if one_group(h, cfg):
        return 1
    v = h.series("zero_std_group_frac", cfg.history_steps).values
    if not np.any((v > 0) & (v < 1)):
        return None
    g = 2
    while math.ceil(cfg.starvation.single_points / g) > cfg.smooth_steps:
        if np.all(np.abs(v * g - np.round(v * g)) <= 1e-6):
            return g
        g += 1
    return None


def reward_range(h: History, n: int, k: int) -> tuple[float, float] | None:
    """(lo, hi) of the per-response reward from the last ``n`` points (``k``-point levels): lo = min(0, lowest
    level); hi = the highest level or, with ``reward_std`` s beside a mean r, r + s² / (r − lo) where higher (the
    Bhatia–Davis bound; derivation: :mod:`.starvation`). None without reward points."""
    r = h.series("reward_mean", n)
    if len(r) == 0:
        return None
    levels = r.levels(min(k, len(r)))
    lo, hi = min(0.0, float(levels.min())), max(0.0, float(levels.max()))
    s = h.series("reward_std", n)
    if len(s):
        std = dict(zip(s.steps.tolist(), s.values.tolist(), strict=True))
        pairs = [(m, std[st]) for st, m in zip(r.steps.tolist(), r.values.tolist(), strict=True) if st in std]
        bounds = [m + sd * sd / (m - lo) for m, sd in pairs if m > lo and np.isfinite(sd)]
        if bounds:
            hi = max(hi, max(bounds))
    return lo, hi


def reward_fall(h: History, cfg: DetectorConfig, sustain: int, steps: int = 0) -> Signal:
    """A *sustained* reward drop: each of the last ``sustain`` reward levels (median of smooth_steps points) is
    below the running max of the levels (over reward_peak_window points) by :func:`drop_needed` and by
    ``severity.noise_z`` × the level's noise (1.2533 · the reward's per-point noise / √smooth_steps) — and, with
    ``steps``, the run of such levels ending now began at least ``steps`` steps ago (its first level's last point
    ≤ now − steps + 1: a log of every step needs ``steps`` levels, a sparser one fewer). None when there are fewer
    than 2 · smooth_steps + sustain − 1 reward points (no best to fall from yet)."""
    return level_fall(h, cfg, "reward_mean", cfg.smooth_steps, sustain, steps, name="reward")


def binomial_noise(p: float, n: float) -> float:
    """The sampling noise of a share ``p`` measured on ``n`` examples, √(p(1 − p)/n): exact for right/wrong grades, an
    upper bound for any score in [0, 1] of mean p (its variance is at most p(1 − p)). 0 unless 0 ≤ p ≤ 1 and n > 0."""
    noise = float(binomial_noises(np.float64(p), np.float64(n)))
    return 0.0 if math.isnan(noise) else noise


def binomial_noises(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """√(p(1 − p)/n) element-wise over arrays (NaN where p is not in [0, 1] or n is not > 0: no band)."""
    p, n = np.asarray(p, dtype=float), np.asarray(n, dtype=float)
    ok = (p >= 0) & (p <= 1) & (n > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, np.sqrt(p * (1 - p) / np.where(ok, n, 1.0)), np.nan)


def level_fall(h: History, cfg: DetectorConfig, key: str, k: int, sustain: int, steps: int = 0,
               name: str = "level", noise_before: bool = False, size_key: str | None = None) -> Signal:
    """:func:`reward_fall`'s rule on any column whose fall from its best is harm, with levels of ``k`` points (1: each
    point its own level, as for an evaluation score, itself a mean over its evaluation set). A level's noise is
    1.2533 · σ / √k for a median of k > 1 points and σ for one point (σ: :meth:`.Series.noise`, 0 below 3 points —
    then the margin alone decides); with ``noise_before``, σ of the points before the last ``sustain`` levels', so a
    fall cannot widen its own bar (of three sparse points, one fall is half their differences). With ``size_key``
    (a column logging how many examples each point averages), where every point is in [0, 1] and the last size is
    known, σ is at least :func:`binomial_noise` of those points' mean — a small set's sampling noise, which the
    points' own spread cannot show while they are few. Evidence keys ``<name>_best`` / ``<name>_now``."""
    r = h.series(key, cfg.signals.reward_peak_window)
    if len(r) < 2 * k + sustain - 1:
        return None, {}
    levels = r.levels(k)
    peak = float(levels.max())
    # a level is a median of k points: its noise is ≈ 1.2533 σ / √k (σ the per-point noise); the best of many noisy
    # levels sits high by noise alone, so a fall must also exceed noise_z such level noises
    before = r.head(sustain + k - 1) if noise_before else r  # head(n): all but the last n points
    sigma = before.noise()
    floor = 0.0
    if size_key is not None:
        size = h.series(size_key, 1)
        if len(size) and np.all((r.values >= 0) & (r.values <= 1)):  # a share: every point read in [0, 1]
            floor = binomial_noise(float((before if len(before) else r).values.mean()), float(size.values[-1]))
        sigma = max(sigma, floor)
    level_noise = float(median_noise(sigma, k))
    need = max(drop_needed(peak, cfg), cfg.severity.noise_z * level_noise)
    down = peak - levels >= need
    fired = bool(np.all(down[-sustain:]))
    ev = {f"{name}_best": peak, f"{name}_now": float(levels[-1]), "drop_needed": need,
          "level_noise": float(level_noise), "sustain_levels": sustain}
    if floor > 0:
        ev.update(noise_floor=floor, set_size=float(size.values[-1]))
    if fired and steps > 0:
        n = len(down) - int(np.flatnonzero(~down)[-1]) - 1 if not down.all() else len(down)  # fallen levels in a row
        since = int(r.steps[len(levels) - n + k - 1])  # the last point of the first of them
        lasted = int(r.steps[-1]) - since + 1
        fired = lasted >= steps
        ev.update(fallen_since=since, fallen_steps=lasted, sustain_steps=steps)
    return fired, ev


def _recent_vs_reference(h: History, key: str, cfg: DetectorConfig) -> tuple[np.ndarray, np.ndarray] | None:
    s = cfg.signals
    x = h.series(key, s.recent_steps + s.reference_steps)
    recent, ref = x.tail(s.recent_steps), x.head(s.recent_steps)
    if len(recent) < 1 or len(ref) < max(5, s.reference_steps // 4):
        return None
    return recent.values, ref.values


def grad_spike(h: History, cfg: DetectorConfig) -> Signal:
    """Max grad_norm over the recent window ≥ grad_spike_factor × the reference median."""
    pair = _recent_vs_reference(h, "grad_norm", cfg)
    if pair is None:
        return None, {}
    recent, ref = pair
    peak, base = float(recent.max()), float(np.median(ref))
    fired = base > 0 and peak >= cfg.signals.grad_spike_factor * base
    return fired, {"grad_norm_recent_max": peak, "grad_norm_reference_median": base}


def entropy_surge(h: History, cfg: DetectorConfig) -> Signal:
    """Entropy level over the recent window ≥ entropy_surge_factor × the reference median."""
    pair = _recent_vs_reference(h, "entropy_mean", cfg)
    if pair is None:
        return None, {}
    recent, ref = pair
    now, base = float(np.median(recent[-cfg.smooth_steps:])), float(np.median(ref))
    fired = base > 0 and now >= cfg.signals.entropy_surge_factor * base
    return fired, {"entropy_now": now, "entropy_reference_median": base}


def entropy_rise_then_fall(h: History, cfg: DetectorConfig) -> Signal:
    """Over rise_fall_window: entropy level rose from the window start to a peak, then fell from it."""
    s, k = cfg.signals, cfg.smooth_steps
    e = h.series("entropy_mean", s.rise_fall_window)
    if len(e) < 3 * k:
        return None, {}
    levels = e.levels(k)
    start, now = float(levels[0]), float(levels[-1])
    i_peak = int(np.argmax(levels))
    peak = float(levels[i_peak])
    fired = (0 < i_peak < len(levels) - 1 and peak >= (1 + s.entropy_rise_frac) * start
             and now <= (1 - s.entropy_fall_frac) * peak)
    return fired, {"entropy_start": start, "entropy_peak": peak, "entropy_now": now,
                   "entropy_peak_step": int(e.steps[i_peak + k - 1])}
