"""Labelled synthetic step series: a healthy GRPO run and one overlay per failure mode.

Used by the detector tests and ``bench/eval_detectors.py`` (and usable by a demo). Every series is a
pandas frame of catalogue step columns; its :class:`Label` says which detector should flag it, from which
step the failure was built in (``onset``), where the reward collapse starts (``collapse``, the reference of
lead times) and the step range ``[start, end)`` of each phase as built. ``noise`` scales every noise σ;
``gaps`` drops ~2 % of steps and blanks ~1 % of cells (NULL) to exercise robustness.

Healthy shape (t = step, p = 1 − e^(−t/80)): reward 0.15 + 0.55 p, entropy 0.45 + 0.55 e^(−t/100) nats,
L = logp_old_mean_correct −0.9 + 0.5 p, I = logp_old_mean_incorrect −1.2 + 0.3 p, grad_norm ≈ 1 (log-normal
σ 0.2), ratio_p50_pos ≈ 1, ratio_p05_pos ≈ 0.9, zero_std_group_frac 0.1 + 0.25 p, truncated_frac ≈ 0.02,
repeat_frac_max ≈ 0.25, is_log_ratio_abs_mean ≈ 0.012 nats, is_ess ≈ 0.97.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .nonfinite import TENSORS

SCENARIOS = ("healthy", "spiky", "on_policy", "isdd", "lld", "grad", "nonfinite", "starvation", "length", "mismatch",
             "entropy")
NONFINITE_TENSORS = TENSORS  # the catalogue's list, via the non-finite detector


@dataclass(frozen=True)
class Label:
    scenario: str
    detector: str | None
    """The detector expected to flag (None: a healthy run, no warning or critical flag expected)."""
    onset: int | None = None
    """First step of the built-in failure."""
    collapse: int | None = None
    """First step of the reward collapse (None when the reward does not collapse)."""
    phases: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Phase → [start, end) steps as built."""


@dataclass(frozen=True)
class LabelledRun:
    frame: pd.DataFrame
    label: Label


Cols = dict[str, np.ndarray]


def _ramp(t: np.ndarray, start: int, duration: float) -> np.ndarray:
    """0 before ``start``, rising linearly to 1 over ``duration`` steps, 1 after."""
    return np.clip((t - start) / duration, 0.0, 1.0)


def _jitter(rng: np.random.Generator, onset: int) -> tuple[int, float]:
    """A seed-dependent onset (± 20 steps) and speed factor (0.7–1.4 × the nominal durations)."""
    return onset + int(rng.integers(-20, 21)), float(rng.uniform(0.7, 1.4))


def healthy_columns(n_steps: int, rng: np.random.Generator, noise: float) -> Cols:
    t = np.arange(n_steps, dtype=float)
    p = 1 - np.exp(-t / 80)

    def n(sigma: float) -> np.ndarray:
        return rng.normal(0.0, sigma * noise, n_steps)

    reward = np.clip(0.15 + 0.55 * p + n(0.03), 0, 1)
    c: Cols = {
        "step": np.arange(n_steps), "n_seqs": np.full(n_steps, 64), "reward_mean": reward,
        "reward_std": np.sqrt(reward * (1 - reward)), "correct_frac": reward.copy(),
        "entropy_mean": 0.45 + 0.55 * np.exp(-t / 100) + n(0.02),
        "logp_old_mean_correct": -0.9 + 0.5 * p + n(0.015),
        "logp_old_mean_incorrect": -1.2 + 0.3 * p + n(0.02),
        "grad_norm": (1 + 0.2 * p) * np.exp(n(0.2)),
        "ratio_p50_pos": 1 + n(0.004), "ratio_p05_pos": 0.9 + n(0.01), "ratio_p01_pos": 0.8 + n(0.01),
        "ratio_lt_0_1_frac_pos": np.abs(n(0.0005)), "ratio_lt_0_5_frac_pos": 0.005 + np.abs(n(0.002)),
        "ratio_p50_neg": 1 + n(0.004), "clip_low_frac_pos": 0.03 + np.abs(n(0.005)),
        "clip_low_frac": 0.015 + np.abs(n(0.003)), "on_policy": np.zeros(n_steps, dtype=bool),
        "zero_std_group_frac": np.clip(0.1 + 0.25 * p + n(0.04), 0, 1),
        "truncated_frac": np.clip(0.02 + np.abs(n(0.01)), 0, 1),
        "repeat_frac_max": np.clip(0.25 + n(0.04), 0, 1), "response_length_mean": 150 + n(8.0),
        "is_log_ratio_abs_mean": np.abs(0.012 + n(0.001)), "is_ess": np.clip(0.97 + n(0.005), 0, 1),
        "first_nonfinite": np.full(n_steps, None, dtype=object),
    }
    for tensor in NONFINITE_TENSORS:
        c[f"nonfinite_{tensor}"] = np.zeros(n_steps)
    return c


def collapse_reward(c: Cols, start: int, duration: float, floor: float, rng: np.random.Generator,
                    noise: float) -> None:
    """From ``start`` the reward falls linearly to ``floor`` over ``duration`` steps (then stays)."""
    t = c["step"].astype(float)
    r0 = float(np.median(c["reward_mean"][max(0, start - 5): start + 1]))
    w = _ramp(t, start, duration)
    after = t >= start
    fallen = r0 + (floor - r0) * w + rng.normal(0, 0.02 * noise, len(t))
    c["reward_mean"] = np.where(after, np.clip(fallen, 0, 1), c["reward_mean"])
    c["correct_frac"] = c["reward_mean"].copy()


def _isdd(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    (o, k), t = _jitter(rng, 120), c["step"].astype(float)
    f = _ramp(t, o, 70 * k)
    c["ratio_p50_pos"] = c["ratio_p50_pos"] - 0.55 * f ** 1.3
    c["ratio_p05_pos"] = np.clip(c["ratio_p05_pos"] - 0.89 * f ** 0.8, 0.001, None)
    c["ratio_p01_pos"] = np.clip(c["ratio_p01_pos"] - 0.8 * f ** 0.6, 0.0005, None)
    c["ratio_lt_0_1_frac_pos"] = c["ratio_lt_0_1_frac_pos"] + 0.3 * f ** 2
    c["clip_low_frac_pos"] = c["clip_low_frac_pos"] + 0.6 * f  # A>0 tokens under 1-eps: rises, never clipped
    d = t - o
    h = 35 * k
    mult = np.where(d < 0, 1.0, np.where(d <= h, 1 + 0.4 * d / h, 1.4 - 1.0 * np.clip((d - h) / h, 0, 1)))
    c["entropy_mean"] = c["entropy_mean"] * mult
    c_step = o + round(45 * k)
    collapse_reward(c, c_step, 30, 0.05, rng, noise)
    return Label("isdd", "isdd", o, c_step, {"drift": (o, n)})


def _lld(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    o1, k = _jitter(rng, 80)
    k = min(k, 1.2)  # keep the accelerated phase inside a 300-step run
    o2, o3 = o1 + round(70 * k), o1 + round(140 * k)
    t = c["step"].astype(float)
    base = np.clip(0.15 + 0.45 * np.minimum(t / o3, 1) + rng.normal(0, 0.03 * noise, n), 0, 1)
    c["reward_mean"] = base
    L, i_ = c["logp_old_mean_correct"], c["logp_old_mean_incorrect"]
    l1, i1 = -0.9 + 0.5 * (1 - np.exp(-o1 / 80)), -1.2 + 0.3 * (1 - np.exp(-o1 / 80))
    noise_l, noise_i = L - (-0.9 + 0.5 * (1 - np.exp(-t / 80))), i_ - (-1.2 + 0.3 * (1 - np.exp(-t / 80)))
    dec, acc = np.clip(t - o2, 0, None), np.clip(t - o3, 0, None)
    c["logp_old_mean_correct"] = np.where(t < o1, L, l1 - 0.003 / k * dec - 0.0008 * acc ** 2 + noise_l)
    c["logp_old_mean_incorrect"] = np.where(t < o1, i_, i1 - 0.002 / k * dec - 0.0005 * acc ** 2 + noise_i)
    c["grad_norm"] = c["grad_norm"] * np.minimum(20, np.exp(acc / 8))
    c["entropy_mean"] = c["entropy_mean"] * (1 + np.minimum(2, acc / 15))
    collapse_reward(c, o3 + 5, 25, 0.05, rng, noise)
    phases = {"early_stagnation": (o1, o2), "steady_decay": (o2, o3), "accelerated_collapse": (o3, n)}
    return Label("lld", "lld", o1, o3 + 5, phases)


def _grad(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    o, t = _jitter(rng, 150)[0], c["step"]
    burst = (t >= o) & (t < o + 5)
    c["grad_norm"] = np.where(burst, c["grad_norm"] * rng.uniform(10, 50, n),
                              np.where(t >= o + 5, c["grad_norm"] * 8, c["grad_norm"]))
    c["entropy_mean"] = np.where(t >= o, c["entropy_mean"] * 1.5, c["entropy_mean"])
    collapse_reward(c, o + 2, 15, 0.05, rng, noise)
    return Label("grad", "grad", o, o + 2, {"explosion": (o, n)})


def _nonfinite(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    o, t = n - 10, c["step"]
    c["first_nonfinite"] = np.where(t == o, "advantages", np.where(t > o, "logp", None)).astype(object)
    c["nonfinite_advantages"] = np.where(t >= o, 8.0, 0.0)
    c["nonfinite_rewards"] = np.where(t >= o, 1.0, 0.0)
    for tensor in ("logp", "entropy"):
        c[f"nonfinite_{tensor}"] = np.where(t > o, 100.0, 0.0)
    for col in ("reward_mean", "entropy_mean", "logp_old_mean_correct", "ratio_p50_pos", "ratio_p05_pos"):
        c[col] = np.where(t >= o, np.nan, c[col])
    c["grad_norm"] = np.where(t > o, np.inf, c["grad_norm"])
    return Label("nonfinite", "nonfinite", o, o, {"nonfinite": (o, n)})


def _starvation(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    (o, k), t = _jitter(rng, 120), c["step"].astype(float)
    w = _ramp(t, o, 40 * k)
    c["zero_std_group_frac"] = np.clip(c["zero_std_group_frac"] * (1 - w) + w + rng.normal(0, 0.01, n) * w, 0, 1)
    collapse_reward(c, o, 40 * k, 0.0, rng, noise)
    return Label("starvation", "starvation", o, o, {"starvation": (o, n)})


def _length(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    (o, k), t = _jitter(rng, 120), c["step"].astype(float)
    w = _ramp(t, o, 50 * k)
    c["truncated_frac"] = np.clip(c["truncated_frac"] + 0.83 * w, 0, 1)
    c["repeat_frac_max"] = np.clip(c["repeat_frac_max"] + 0.65 * w, 0, 1)
    c["response_length_mean"] = c["response_length_mean"] + 360 * w
    collapse_reward(c, o + round(30 * k), 40, 0.05, rng, noise)
    return Label("length", "length", o, o + round(30 * k), {"blowup": (o, n), "repetition": (o, n)})


def _mismatch(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    (o, k), t = _jitter(rng, 100), c["step"].astype(float)
    w = _ramp(t, o, 100 * k)
    c["is_log_ratio_abs_mean"] = c["is_log_ratio_abs_mean"] * (1 + 3 * w) + 0.29 * w
    c["is_ess"] = np.clip(c["is_ess"] - 0.6 * w, 0.01, 1)
    collapse_reward(c, o + round(80 * k), 30, 0.05, rng, noise)
    return Label("mismatch", "mismatch", o, o + round(80 * k), {"drift": (o, n)})


def _entropy(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    (o, k), t = _jitter(rng, 120), c["step"].astype(float)
    c["entropy_mean"] = np.where(t >= o, np.maximum(c["entropy_mean"] * np.exp(-(t - o) / (12 * k)), 0.005),
                                 c["entropy_mean"])
    plateau = float(np.median(c["reward_mean"][o - 5: o + 1]))
    c["reward_mean"] = np.where(t >= o, np.clip(plateau + rng.normal(0, 0.03 * noise, n), 0, 1), c["reward_mean"])
    return Label("entropy", "entropy", o, None, {"collapse": (o, n)})


def _spiky(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    """Healthy, with one-step outliers every ~25 steps that no rule should take for a phase."""
    t = c["step"]
    for col, fn in (("grad_norm", lambda x: x * 4), ("reward_mean", lambda x: x - 0.3),
                    ("ratio_p05_pos", lambda x: 0.05 + 0 * x), ("ratio_p50_pos", lambda x: x - 0.15),
                    ("entropy_mean", lambda x: x * 1.8), ("truncated_frac", lambda x: 0.6 + 0 * x),
                    ("zero_std_group_frac", lambda x: 0.95 + 0 * x), ("is_ess", lambda x: 0.5 + 0 * x),
                    ("logp_old_mean_correct", lambda x: x - 0.3)):
        hit = (t % 25 == int(rng.integers(0, 25))) & (t > 30)
        c[col] = np.where(hit, fn(c[col]), c[col])
    return Label("spiky", None)


def _on_policy(c: Cols, rng: np.random.Generator, noise: float, n: int) -> Label:
    c["on_policy"] = np.ones(n, dtype=bool)
    for col in ("ratio_p50_pos", "ratio_p05_pos", "ratio_p01_pos", "ratio_p50_neg"):
        c[col] = np.ones(n)  # r ≡ 1 exactly: the policy has not moved since the rollout
    for col in ("ratio_lt_0_1_frac_pos", "ratio_lt_0_5_frac_pos", "clip_low_frac_pos", "clip_low_frac"):
        c[col] = np.zeros(n)
    return Label("on_policy", None)


OVERLAYS: dict[str, Callable[[Cols, np.random.Generator, float, int], Label]] = {
    "healthy": lambda c, rng, noise, n: Label("healthy", None), "spiky": _spiky,
    "on_policy": _on_policy, "isdd": _isdd, "lld": _lld, "grad": _grad, "nonfinite": _nonfinite,
    "starvation": _starvation, "length": _length, "mismatch": _mismatch, "entropy": _entropy,
}


def make_run(scenario: str, seed: int = 0, noise: float = 1.0, n_steps: int = 300, gaps: bool = False,
             ) -> LabelledRun:
    """One labelled series; ``seed`` fixes every random draw."""
    if scenario not in OVERLAYS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {SCENARIOS}")
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])  # independent noise per scenario
    cols = healthy_columns(n_steps, rng, noise)
    label = OVERLAYS[scenario](cols, rng, noise, n_steps)
    frame = pd.DataFrame(cols)
    if gaps:
        keep = rng.random(n_steps) >= 0.02
        frame = frame[keep].reset_index(drop=True)
        numeric = [c for c in frame.columns if c != "step" and frame[c].dtype.kind == "f"]
        blank = rng.random((len(frame), len(numeric))) < 0.01
        frame[numeric] = frame[numeric].mask(blank)
    return LabelledRun(frame, label)
