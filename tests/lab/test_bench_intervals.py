"""The bench's intervals over sources (collapsewatch/lab/bench_intervals.py): expected values derived by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collapsewatch.lab.bench import group_sources
from collapsewatch.lab.bench_intervals import (
    Z95,
    class_interval,
    interval_lines,
    resampled_shares,
    source_interval,
    wilson,
    with_intervals,
)


def test_wilson_by_hand():
    # k = 5 of n = 10, z² = 3.8415: centre (0.5 + 3.8415/20) / (1 + 3.8415/10) = 0.69207/1.38415 = 0.5;
    # half-width 1.96 · √(0.025 + 3.8415/400) / 1.38415 = 1.96 · 0.18602 / 1.38415 = 0.26341
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.5 - 0.26341, abs=1e-4) and hi == pytest.approx(0.5 + 0.26341, abs=1e-4)
    # k = 0 of 117: p = 0, so centre = half-width = (z²/234) / (1 + z²/117): the interval is [0, z²/(117 + z²)]
    # = [0, 3.8415/120.8415] = [0, 0.031789]
    lo, hi = wilson(0, 117)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 120.8415, abs=1e-5)


@pytest.mark.parametrize("k,n", [(0, 117), (12, 117), (33, 56), (11, 19), (19, 19), (1, 2)])
def test_wilson_matches_scipy(k, n):
    from scipy.stats import binomtest

    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_wilson_refuses_impossible_counts():
    for k, n in [(3, 2), (-1, 5), (0, 0)]:
        with pytest.raises(ValueError, match="wilson: need 0 ≤ k ≤ n"):
            wilson(k, n)


def test_resampling_sources_matches_the_exact_bootstrap():
    # two sources, A 1 of 1 and B 0 of 1: a resample of two is AA (¼, share 1), AB or BA (½, share ½), BB (¼,
    # share 0) — so the draws' shares are 1, ½, 0 in the proportions ¼, ½, ¼
    shares = resampled_shares(np.array([1, 0]), np.array([1, 1]), draws=20_000)
    for value, p in [(1.0, 0.25), (0.5, 0.5), (0.0, 0.25)]:
        assert np.mean(np.isclose(shares, value)) == pytest.approx(p, abs=0.02)  # 6 standard errors (0.0035)
    # and a source without a denominator never makes a share: A 1 of 2, B 0 of 0 → every kept draw is ½;
    # BB (¼ of draws) has no denominator and is dropped
    shares = resampled_shares(np.array([1, 0]), np.array([2, 0]), draws=8_000)
    assert np.all(shares == 0.5) and len(shares) == pytest.approx(6_000, rel=0.05)


def test_a_clustered_share_is_less_sure_than_independent_runs():
    # ten sources of ten runs, five all flagged and five none: 50 of 100. As independent runs, Wilson gives
    # 0.5 ± 1.96 · √(0.25/100 + z²/40000)/(1 + z²/100) ≈ [0.40, 0.60]; resampling ten sources, the share is the
    # mean of ten 0-or-1 sources: sd √(0.25/10) = 0.158, so about 0.5 ± 0.31 — the interval must be much wider
    num, den = np.array([10] * 5 + [0] * 5), np.full(10, 10)
    lo, hi = source_interval(num, den)
    wlo, whi = wilson(50, 100)
    assert (wlo, whi) == pytest.approx((0.404, 0.596), abs=1e-3)
    assert lo <= 0.25 and hi >= 0.75 and hi - lo > 2.5 * (whi - wlo)
    # one source alone has no spread between sources to resample (the bootstrap would give the point 3/7):
    # Wilson's bound on its runs instead (test_one_source_takes_wilsons_bound_not_a_point)
    assert source_interval(np.array([3]), np.array([7])) == list(wilson(3, 7))


def test_zero_and_all_take_wilsons_bound_and_nothing_to_count_is_none():
    assert source_interval(np.array([0, 0, 0]), np.array([40, 40, 37])) == list(wilson(0, 117))
    assert source_interval(np.array([4, 2]), np.array([4, 2])) == list(wilson(6, 6))
    assert source_interval(np.array([0, 0]), np.array([0, 0])) is None
    with pytest.raises(ValueError, match="one value per source"):
        resampled_shares(np.array([1, 2]), np.array([1]))


def _row(source, flagged, collapsed, warned, healthy):
    return {"source": source, "flagged_held": flagged, "collapsed": collapsed, "healthy_alarmed": warned,
            "healthy": healthy, "first10_caught_held": 0, "first10_collapses": 0, "healthy_critical": 0}


def test_group_rows_get_intervals_over_their_own_sources():
    recs = pd.DataFrame({"source": ["a", "b", "c"]})
    groups = group_sources(recs, ["a"])
    assert groups == {"tuned on (1 source(s))": ["a"], "not tuned on (2 source(s))": ["b", "c"],
                      "all": ["a", "b", "c"]}
    assert group_sources(recs) == {"all": ["a", "b", "c"]}
    rows = [_row("a", 2, 2, 0, 5), _row("b", 1, 1, 1, 4), _row("c", 0, 1, 0, 4)]
    # group rows as bench_table sums them
    table = pd.DataFrame([*rows, _row("tuned on (1 source(s))", 2, 2, 0, 5),
                          _row("not tuned on (2 source(s))", 1, 2, 1, 8), _row("all", 3, 4, 1, 13)])
    out = with_intervals(table, groups)
    by = out.set_index("source")
    assert by.loc["a", "flagged_held_ci"] is None  # a source's own row: no interval
    # tuned on = source a alone, 2 of 2 flagged: a share of 1 → Wilson's bound for 2 of 2
    assert by.loc["tuned on (1 source(s))", "flagged_held_ci"] == list(wilson(2, 2))
    # held out = b (1 of 1) and c (0 of 1): the exact bootstrap of test_resampling_sources… → 2.5th and 97.5th
    # percentiles of {0 (¼), ½ (½), 1 (¼)} = 0 and 1
    assert by.loc["not tuned on (2 source(s))", "flagged_held_ci"] == [0.0, 1.0]
    assert by.loc["all", "first10_caught_held_ci"] is None  # no first-10 collapse anywhere
    assert by.loc["all", "healthy_critical_ci"] == list(wilson(0, 13))
    lines = interval_lines(out)
    assert lines[1].startswith("not tuned on (2 source(s)): flagged ≤ collapse 1/2 (50.0 %) [0–100 %]; "
                               "healthy warned 1/8 (12.5 %) [")
    assert len(lines) == 3 and all("first-10" not in line for line in lines)


def test_one_source_takes_wilsons_bound_not_a_point():
    # 5 of 10 runs, all of one source (a second source with no denominator does not count): every resample is that
    # source, so the bootstrap would say [0.5, 0.5]; Wilson's 5 of 10 instead (test_wilson_by_hand: 0.5 ± 0.26341)
    lo, hi = source_interval(np.array([5, 0]), np.array([10, 0]))
    assert lo == pytest.approx(0.5 - 0.26341, abs=1e-4) and hi == pytest.approx(0.5 + 0.26341, abs=1e-4)


def test_a_trust_share_counts_each_source_as_a_cluster():
    # healthy runs a1 (source A, fired), b1 b2 (B, none fired), c1…c8 (C, none): 1 of 11. Resampling 3 sources:
    # no A in the draw with probability (2/3)³ = 8/27 ≈ 30 % → share 0, so the 2.5th percentile is 0; A three times
    # with probability 1/27 ≈ 3.7 % > 2.5 % → share 1/1, so the 97.5th percentile is 1. As 11 independent runs,
    # Wilson would give [0.016, 0.38]: the cluster view is the honest, wider one.
    source = {"a1": "A", "b1": "B", "b2": "B", **{f"c{i}": "C" for i in range(1, 9)}}
    assert class_interval({"a1"}, list(source), source) == [0.0, 1.0]
    # a run outside the base is not counted (its detector's inputs are not in its log); none of the base fired:
    # 0 of 10 → Wilson's [0, z²/(10 + z²)] = [0, 3.8415/13.8415] = [0, 0.27753]
    base = [r for r in source if r != "a1"]
    lo, hi = class_interval({"a1"}, base, source)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 13.8415, abs=1e-4)
    assert class_interval(set(), [], source) is None


def test_z_is_the_normal_quantile():
    from scipy.stats import norm

    assert Z95 == pytest.approx(norm.ppf(0.975), abs=1e-15)
