"""How sure the bench's headline shares are: a 95 % interval over *sources* for each.

The bench is held out by source, and runs of one source are alike (one author, one task, one framework: a RAGEN-2
reproduction holds a third of the held-out collapses). Counting runs as independent draws makes a share look surer
than it is, so the interval resamples the sources, not the runs: ``draws`` times, as many sources as the group has,
drawn with replacement, each bringing all its runs; the share of each draw is Σ numerator / Σ denominator over the
sources drawn (draws whose sources have no denominator are left out), and the interval is the 2.5th and 97.5th
percentiles of those shares (the percentile bootstrap, resampling clusters).

A share of 0 or 1 — no source that differs — has no spread to resample: the bootstrap gives [0, 0] (or [1, 1]),
which is not evidence of "never". Nor has a share whose runs all come from one source: every resample is that
source. There the bound is Wilson's score interval with the runs taken as independent (:func:`wilson`): the
narrowest honest bound, and wider than a point.

The figures (:data:`SHARES`) are the issue's "done when" shares: held-out flagged collapses, healthy runs warned,
first-10 collapses caught, healthy runs with a critical. ``lab bench`` adds ``<share>_ci`` = [lo, hi] to the group
rows of its table (tuned on, held out, all) and prints them under the table. The trust rows (how far to trust
each alarm, :func:`.bench.trust_rows`) carry the same interval for their two shares, healthy runs fired on and
collapses preceded (:func:`class_interval`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SHARES: dict[str, tuple[str, str]] = {
    "flagged_held": ("flagged_held", "collapsed"),
    "healthy_alarmed": ("healthy_alarmed", "healthy"),
    "first10_caught_held": ("first10_caught_held", "first10_collapses"),
    "healthy_critical": ("healthy_critical", "healthy"),
}
"""Share name → (numerator column, denominator column) of :func:`.bench.summarise`'s rows."""
DRAWS = 4000
SEED = 0
Z95 = 1.959963984540054
"""The normal 97.5th percentile (scipy.stats.norm.ppf(0.975))."""


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for k successes of n independent trials: centre (p + z²/2n) / (1 + z²/n), half-width
    z √(p(1 − p)/n + z²/4n²) / (1 + z²/n), p = k/n."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson: need 0 ≤ k ≤ n and n > 0, got k={k}, n={n}")
    p, z2 = k / n, z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def resampled_shares(num: np.ndarray, den: np.ndarray, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """The share Σ num / Σ den of each of ``draws`` resamples of the sources (with replacement, as many as there
    are); resamples without a denominator are dropped."""
    num, den = np.asarray(num, dtype="float64"), np.asarray(den, dtype="float64")
    if num.shape != den.shape or num.ndim != 1:
        raise ValueError(f"resampled_shares: num and den need one value per source, got shapes {num.shape} and "
                         f"{den.shape}")
    if not len(num):
        return np.empty(0)
    pick = np.random.default_rng(seed).integers(0, len(num), size=(draws, len(num)))
    top, bottom = num[pick].sum(axis=1), den[pick].sum(axis=1)
    kept = bottom > 0
    return top[kept] / bottom[kept]


def source_interval(num: np.ndarray, den: np.ndarray, draws: int = DRAWS, seed: int = SEED) -> list[float] | None:
    """[lo, hi]: the 95 % interval over sources of Σ num / Σ den (module doc; Wilson's at a share of 0 or 1, or with
    one source holding every denominator); None without any denominator."""
    k, n = int(np.sum(num)), int(np.sum(den))
    if n == 0:
        return None
    if k in (0, n) or int(np.count_nonzero(np.asarray(den))) < 2:
        return list(wilson(k, n))
    shares = resampled_shares(num, den, draws, seed)
    lo, hi = np.percentile(shares, [2.5, 97.5])
    return [float(lo), float(hi)]


def class_interval(hit: set[str], base: list[str], source: dict[str, str]) -> list[float] | None:
    """The 95 % interval over sources of the share of ``base`` runs (run names) that are in ``hit``: a trust row's
    "fired on k of the n healthy runs that log its inputs" (or "preceded k of n collapses"), each source a cluster
    of its runs (module doc); None without a base run."""
    per: dict[str, list[int]] = {}
    for run in base:
        tally = per.setdefault(source[run], [0, 0])
        tally[0] += run in hit
        tally[1] += 1
    counts = np.array(list(per.values()), dtype="int64").reshape(-1, 2)
    return source_interval(counts[:, 0], counts[:, 1])


def with_intervals(table: pd.DataFrame, groups: dict[str, list[str]]) -> pd.DataFrame:
    """``table`` (rows per source, then group rows) with ``<share>_ci`` on the group rows: ``groups`` maps a group
    row's ``source`` name to the sources it sums."""
    out = table.copy()
    per_source = table.set_index("source")
    for share, (top, bottom) in SHARES.items():
        cis: list[list[float] | None] = []
        for name in out["source"]:
            members = [s for s in groups.get(name, []) if s in per_source.index]
            rows = per_source.loc[members] if members else None
            cis.append(None if rows is None else source_interval(rows[top].to_numpy(), rows[bottom].to_numpy()))
        out[f"{share}_ci"] = cis
    return out


def interval_lines(table: pd.DataFrame) -> list[str]:
    """One line per group row with intervals, for the text output."""
    names = {"flagged_held": "flagged ≤ collapse", "healthy_alarmed": "healthy warned",
             "first10_caught_held": "first-10 caught", "healthy_critical": "healthy critical"}
    lines = []
    for r in table.to_dict("records"):
        parts = [f"{names[s]} {_pct(r[top], r[bottom])} [{100 * ci[0]:.0f}–{100 * ci[1]:.0f} %]"
                 for s, (top, bottom) in SHARES.items() if isinstance(ci := r.get(f"{s}_ci"), list)]
        if parts:
            lines.append(f"{r['source']}: " + "; ".join(parts))
    return lines


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f} %)"
