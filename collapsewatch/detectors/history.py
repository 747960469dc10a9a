"""The bounded step history every detector reads, and the few statistics the rules use.

Rows are normalised once on the way in: NaN and NULL become ``None`` (a pandas frame read from the store
cannot tell them apart, so neither may the online path); ±Inf becomes ``None`` too, but the column name is
kept in :attr:`Row.nonfinite` so the non-finite detector can report it. Windows are counted in *logged
points* of the column they read (a window of 50 is that column's last 50 non-missing values), not in steps:
a run that logs every 10th step (TRL's default ``logging_steps=10``), or a column logged more sparsely than
the others (a grad norm logged every 10th step beside per-step probe metrics), is judged on the points it
has, exactly like a dense run (docs/architecture.md, *Detectors*). Every rule states the least number of points it needs and
gives no verdict below that. Each column keeps its own last ``maxlen`` points.

Statistics: levels are rolling medians (robust to single-step spikes); trends are Theil–Sen slopes with
their confidence interval (:func:`theil_sen`, scipy's ``theilslopes`` without its argument checks); noise scales are normal-consistent MADs
(1.4826 · MAD). Nothing here keeps state outside the deques and point lists, so truncating them is an exact rollback.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Value = float | bool | str | None


@dataclass(frozen=True, slots=True)
class Row:
    """One normalised step row: only the columns detectors read."""

    step: int
    values: Mapping[str, Value]
    nonfinite: frozenset[str] = frozenset()

    def num(self, key: str) -> float | None:
        v = self.values.get(key)
        return v if isinstance(v, float) else None

    def text(self, key: str) -> str | None:
        v = self.values.get(key)
        return v if isinstance(v, str) else None

    def flag(self, key: str) -> bool | None:
        v = self.values.get(key)
        return v if isinstance(v, bool) else None


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:  # pandas.NA, NaT and NaN all compare unequal to themselves or refuse bool()
        return bool(v != v)
    except TypeError:
        return True


def column_kinds() -> dict[str, str]:
    """Each catalogue step column's kind for normalisation: 'bool', 'text' or 'num'."""
    from ..catalogue import LOGGED_SCALARS, STEP_METRICS

    kind = {"BOOLEAN": "bool", "VARCHAR": "text"}
    return {m.name: kind.get(m.dtype, "num") for m in STEP_METRICS + LOGGED_SCALARS}


def normalise(raw: Mapping[str, Any], columns: Mapping[str, str]) -> Row:
    """Keep ``columns`` (name → 'num' | 'bool' | 'text') of ``raw``.

    Numbers become float: NaN / NULL → None, ±Inf → None with the name noted in ``nonfinite``.
    Booleans accept bool, 0/1 and numpy bools (a pandas column with NULLs turns bools into floats).
    Text keeps non-empty strings.
    """
    step = raw.get("step")
    if _is_missing(step) or isinstance(step, (str, bool)):
        raise ValueError(f"a step row needs an integer 'step', got {step!r}")
    values: dict[str, Value] = {}
    inf: list[str] = []
    for key, kind in columns.items():
        v = raw.get(key)
        if _is_missing(v):
            continue
        if kind == "text":
            if str(v):
                values[key] = str(v)
        elif kind == "bool":
            values[key] = bool(v)
        else:
            x = float(v)
            if math.isfinite(x):
                values[key] = x
            else:
                inf.append(key)
    return Row(int(step), values, frozenset(inf))


@dataclass(frozen=True)
class Trend:
    """Theil–Sen slope (units per step) with its confidence interval over ``n`` points."""

    slope: float
    low: float
    high: float
    n: int

    @property
    def falling(self) -> bool:
        """Significantly negative: the whole confidence interval is below zero."""
        return self.high < 0

    @property
    def rising(self) -> bool:
        return self.low > 0

    def as_evidence(self) -> dict[str, float | int]:
        return {"slope": self.slope, "ci_low": self.low, "ci_high": self.high, "n": self.n}


@dataclass(frozen=True)
class Series:
    """Non-missing values of one column over a step window, oldest first."""

    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def level(self, k: int) -> float:
        """Rolling-median level at the window's end (median of the last ``k`` points)."""
        return median(self.values[-k:])

    def levels(self, k: int) -> np.ndarray:
        """Trailing rolling-median levels; entry j ends at point j + k − 1 (full windows only)."""
        if len(self) < k:
            return np.empty(0)
        return np.median(np.lib.stride_tricks.sliding_window_view(self.values, k), axis=1)

    def trend(self, confidence: float) -> Trend:
        return Trend(*theil_sen(self.values, self.steps, confidence), len(self))

    def span(self) -> float:
        """Steps the points cover, one spacing per point: n for n consecutive steps, 10 n for n points logged
        every 10th step. A slope (per step) times this is the change over the window."""
        n = len(self)
        return float(self.steps[-1] - self.steps[0]) * n / (n - 1) if n > 1 else float(n)

    def tail(self, n: int) -> Series:
        """The last ``n`` points."""
        return Series(self.steps[len(self) - n:], self.values[len(self) - n:]) if n < len(self) else self

    def head(self, n: int) -> Series:
        """All but the last ``n`` points."""
        keep = max(len(self) - n, 0)
        return Series(self.steps[:keep], self.values[:keep])

    def since(self, step: int) -> Series:
        """The points with step > ``step``."""
        keep = self.steps > step
        return Series(self.steps[keep], self.values[keep])

    def before(self, step: int) -> Series:
        """The points with step ≤ ``step``."""
        keep = self.steps <= step
        return Series(self.steps[keep], self.values[keep])

    def noise(self) -> float:
        """Per-point noise scale: :func:`diff_noise` of the first differences (0 below 3 points)."""
        if len(self) < 3:
            return 0.0
        return float(diff_noise(np.diff(self.values)))


MAD_SD = 1.4826
"""A normal sample's standard deviation ≈ 1.4826 × its median absolute deviation (1 / Φ⁻¹(¾)): the robust spreads."""

MEDIAN_SE = 1.2533
"""The standard error of a median of k normal points ≈ 1.2533 σ / √k (√(π/2)): the noise of a level."""


def diff_noise(d: np.ndarray) -> np.ndarray:
    """The per-point noise of a series from its first differences ``d`` (along the last axis): ``MAD_SD`` × median
    |d − median d| / √2 — differences, so a trend is not read as noise; √2, as a difference holds two points' noise.
    One home for the detectors' estimator (:meth:`Series.noise`) and the reward rule's (``collapsewatch.reward``). A
    short 1-D ``d`` (under ``_SHORT`` values: the reward rule's growing first windows) is read on a list, where
    ``statistics.median`` costs a tenth of ``np.median``'s call; both take the middle value or the two middle ones'
    sum halved, so they agree to the bit (``tests/detectors/test_history.py``)."""
    if d.ndim == 1 and 0 < len(d) < _SHORT:
        xs = d.tolist()
        m = statistics.median(xs)
        return np.float64(MAD_SD * statistics.median([abs(x - m) for x in xs]) / math.sqrt(2))
    return MAD_SD * np.median(np.abs(d - np.median(d, axis=-1, keepdims=True)), axis=-1) / np.sqrt(2)


_SHORT = 64


def median_noise(sigma: float | np.ndarray, k: int | np.ndarray) -> float | np.ndarray:
    """The noise of a median of ``k`` points of per-point noise ``sigma``: ``MEDIAN_SE`` · σ / √k, and σ itself for one
    point (a level of one point is that point)."""
    return np.where(np.asarray(k) > 1, MEDIAN_SE / np.sqrt(np.maximum(k, 1)), 1.0) * sigma


FIRST_POINTS = 20
"""Points of each column's start a History keeps beyond its window (rules that compare with the run's start)."""


def median(values: np.ndarray) -> float:
    """``np.median`` of a 1-D float array, to the bit (the middle value, or the two middle ones' sum halved; NaN when
    any value is NaN), computed on a Python list: for the short windows the detectors read at every step, several
    times faster than numpy's reduction machinery."""
    v = values.tolist()
    if not v or any(x != x for x in v):
        return float(np.median(values))
    return float(statistics.median(v))


class _Points:
    """One column's last ``maxlen`` (step, value, on_policy) points, oldest first, as a deque(maxlen) keeps them —
    a point pushed out stays out, also after a truncate — held in three lists from ``start`` on, so the last n are
    one slice, not a walk over a deque (the detectors read a window of every column at every step). The points before
    ``start`` are deleted once there are ``maxlen`` of them (amortised O(1) a point)."""

    __slots__ = ("maxlen", "start", "steps", "vals", "on")

    def __init__(self, maxlen: int):
        self.maxlen, self.start = maxlen, 0
        self.steps: list[int] = []
        self.vals: list[float] = []
        self.on: list[bool] = []

    def __len__(self) -> int:
        return len(self.steps) - self.start

    def append(self, step: int, value: float, on: bool) -> None:
        self.steps.append(step)
        self.vals.append(value)
        self.on.append(on)
        if len(self) > self.maxlen:
            self.start += 1
            if self.start >= self.maxlen:
                del self.steps[:self.start], self.vals[:self.start], self.on[:self.start]
                self.start = 0

    def truncate(self, step: int) -> None:
        """Drop the points with step ≥ ``step``."""
        while len(self) and self.steps[-1] >= step:
            self.steps.pop(), self.vals.pop(), self.on.pop()

    def values(self) -> list[float]:
        """The window's values, oldest first."""
        return self.vals[self.start:]

    def last(self, n: int, off_policy: bool) -> tuple[list[int], list[float]]:
        """The last ``n`` points (steps, values), oldest first; with ``off_policy`` the on-policy ones skipped and
        not counted."""
        if n <= 0:
            return [], []
        if not off_policy:
            lo = max(self.start, len(self.steps) - n)
            return self.steps[lo:], self.vals[lo:]
        keep = [i for i in range(self.start, len(self.steps)) if not self.on[i]][-n:]
        return [self.steps[i] for i in keep], [self.vals[i] for i in keep]


class History:
    """The last ``maxlen`` rows in step order, plus each column's last ``maxlen`` (step, value, on_policy) points
    and its first ``FIRST_POINTS`` points (the run's start, kept when the window has moved on: :meth:`first`).

    A row with a step ≤ the last one is the caller's business (the suite truncates first, see suite.py).
    Series are memoised until the next push / truncate: several detectors read the same windows.
    """

    def __init__(self, maxlen: int):
        self.maxlen = maxlen
        self.rows: deque[Row] = deque(maxlen=maxlen)
        self._points: dict[str, _Points] = {}
        self._memo: dict[tuple[str, int, bool], Series] = {}
        self._first: dict[str, list[tuple[int, float]]] = {}

    @property
    def step(self) -> int:
        return self.rows[-1].step

    @property
    def row(self) -> Row:
        return self.rows[-1]

    def __len__(self) -> int:
        return len(self.rows)

    def push(self, row: Row) -> None:
        self._memo.clear()
        self.rows.append(row)
        on = row.flag("on_policy") is True
        for key, v in row.values.items():
            if type(v) is float:
                points = self._points.get(key)
                if points is None:
                    points = self._points[key] = _Points(self.maxlen)
                points.append(row.step, v, on)
                first = self._first.setdefault(key, [])
                if len(first) < FIRST_POINTS:
                    first.append((row.step, v))

    def truncate(self, step: int) -> None:
        """Drop the rows and points with step ≥ ``step`` (a restart from an earlier checkpoint)."""
        self._memo.clear()
        while self.rows and self.rows[-1].step >= step:
            self.rows.pop()
        for points in self._points.values():
            points.truncate(step)
        for first in self._first.values():
            while first and first[-1][0] >= step:
                first.pop()

    def first(self, key: str, n: int) -> Series:
        """The first ``n`` points of column ``key`` the run logged (at most ``FIRST_POINTS``), oldest first — the
        run's start, however far the window has moved on since."""
        pts = self._first.get(key, [])[:n]
        return Series(np.asarray([p[0] for p in pts], dtype=float), np.asarray([p[1] for p in pts], dtype=float))

    def highest(self, key: str) -> float | None:
        """The highest value of column ``key`` the history holds — its first points and its window (None: no point):
        a state whose bar this never crossed has held since the run's first point (exact while the run is shorter
        than the window plus ``FIRST_POINTS``; beyond that, points between the two are not kept)."""
        points = self._points.get(key)
        values = [p[1] for p in self._first.get(key, ())] + (points.values() if points else [])
        return max(values) if values else None

    def recent(self, n: int) -> Iterator[Row]:
        """The last ``n`` rows, newest first."""
        for i, row in enumerate(reversed(self.rows)):
            if i >= n:
                return
            yield row

    def series(self, key: str, n: int, *, off_policy: bool = False) -> Series:
        """The last ``n`` points of column ``key`` (oldest first); with ``off_policy`` points of rows flagged
        on_policy are skipped (and not counted)."""
        memo_key = (key, n, off_policy)
        if memo_key in self._memo:
            return self._memo[memo_key]
        points = self._points.get(key)
        steps, values = points.last(n, off_policy) if points else ([], [])
        out = Series(np.asarray(steps, dtype=float), np.asarray(values, dtype=float))
        self._memo[memo_key] = out
        return out


def theil_sen(y: np.ndarray, x: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(slope, low, high): the Theil–Sen slope of ``y`` over ``x`` (the median of the pairwise slopes over pairs
    with distinct ``x``) and its ``confidence`` interval from Kendall's tau (Sen 1968, eq. 2.6; ties in ``x`` and
    ``y`` lower its variance), exactly as ``scipy.stats.theilslopes(y, x, confidence)`` gives them — without that
    function's argument checks, which were half of the detectors' time (``tests/detectors/test_history.py``:
    parity on random series with and without ties). NaN bounds where the interval cannot be formed."""
    dx = x[:, None] - x
    dy = y[:, None] - y
    pos = dx > 0
    slopes = np.sort(dy[pos] / dx[pos])
    if not slopes.size:
        raise ValueError("every x is the same: no slope")
    alpha = 1.0 - confidence if confidence > 0.5 else confidence
    z = statistics.NormalDist().inv_cdf(alpha / 2.0)
    n, nt = len(y), len(slopes)
    sigsq = (n * (n - 1) * (2 * n + 5) - _ties(x) - _ties(y)) / 18.0
    slope = float(np.median(slopes))
    if not sigsq >= 0:
        return slope, math.nan, math.nan
    sigma = math.sqrt(sigsq)
    upper = min(int(round((nt - z * sigma) / 2.0)), nt - 1)
    lower = max(int(round((nt + z * sigma) / 2.0)) - 1, 0)
    return slope, float(slopes[lower]), float(slopes[upper])


def _ties(v: np.ndarray) -> float:
    """Σ t (t − 1) (2t + 5) over the groups of t > 1 equal values of ``v``."""
    _, counts = np.unique(v, return_counts=True)
    t = counts[counts > 1].astype(float)
    return float((t * (t - 1) * (2 * t + 5)).sum())
