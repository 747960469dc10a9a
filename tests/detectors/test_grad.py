"""Gradient explosion: a spike that recovers (info, whatever its size), sustained (warning), huge and
sustained (critical)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from collapsewatch.detectors import DetectorConfig, SeverityConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("grad",))


def test_spike_sustained_and_critical_episodes():
    # grad_norm 1.0 (MAD 0 → bar = spike_factor 5; elevated ≥ recover_factor 3; the median of any 50-point
    # window stays 1.0, the spikes are a minority). A 7.0 at step 5 comes before the 20 reference points:
    # no verdict. Step 100 = 6 and step 120 = 60 are single points over the bar that fall back to 1.0 at
    # once: info, however big. Steps 140–142 = 3.5, 4, 6: a ramp (elevated, not over the bar) up to one
    # spike at 142 — the ramp does not count, 143 is back: info. Steps 150–152 = 8, 8, 4: the third point
    # since the spike is still ≥ 3 × median (sustain_steps 3): warning at 152. Steps 170–172 = 30, 5, 5:
    # sustained and the peak 30 ≥ critical_factor 20 × median: critical at 172 by the rule. No reward is logged,
    # so nothing shows harm and the severity gate lowers it to warning (gate off: the rule's critical). Each
    # episode opens at its spike and closes after 3 rows back at 1.0.
    spikes = {5: 7.0, 100: 6.0, 120: 60.0, 140: 3.5, 141: 4.0, 142: 6.0, 150: 8.0, 151: 8.0, 152: 4.0,
              170: 30.0, 171: 5.0, 172: 5.0}
    data = rows(200, grad_norm=lambda s: spikes.get(s, 1.0))
    expected = [("explosion", 100, 100, "info"), ("explosion", 120, 120, "info"), ("explosion", 142, 142, "info"),
                ("explosion", 150, 152, "warning"), ("explosion", 170, 172, "critical")]
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "grad") == expected[:4] + [("explosion", 170, 172, "warning")]
    assert suite.episodes()[-1].evidence["severity_gate"]["lowered_from"] == "critical"
    _, suite = feed(data, replace(ONLY, severity=SeverityConfig(enabled=False)))
    assert spans(suite.episodes(), "grad") == expected
    crit = suite.episodes()[-1]
    assert crit.threshold == 5.0 and crit.evidence["elevated_run"] == 3 and crit.evidence["peak_ratio"] == 30.0


def test_jumpy_runs_need_a_bigger_jump():
    # log grad_norm alternates ±0.3 (1.35 / 0.74): robust σ = 1.4826 · 0.3 ≈ 0.445, bar = exp(5 · 0.445) ≈ 9.26
    # × the reference median (25 + 25 values → (0.74 + 1.35) / 2 = 1.045). At step 100: 8.0 = 7.7 × is not
    # an explosion in this run (it would be in a smooth one), 10.0 = 9.6 × is.
    base = lambda s: 1.35 if s % 2 else 0.74  # noqa: E731  (≈ e^{±0.3})
    for spike, expected in ((8.0, []), (10.0, [("explosion", 100, 100, "info")])):
        _, suite = feed(rows(110, grad_norm=lambda s, x=spike: x if s == 100 else base(s)), ONLY)
        assert spans(suite.episodes(), "grad") == expected


def test_null_and_nan_grad_norms_are_skipped():
    data = rows(100, grad_norm=lambda s: None if s % 5 == 0 else (float("nan") if s % 7 == 0 else 1.0))
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []


def _logged_every_10th(tmp_path) -> list[dict]:
    """The real grpo-healthy sample run (built-in trainer, 200 steps), as a run with TRL's default
    logging_steps=10 would have logged it: grad_norm and reward_mean at steps 0, 10, …, 190 only. Read from a
    copy: opening a store may add newer schema files, and the shipped folder must stay as it is."""
    import shutil
    from pathlib import Path

    from collapsewatch.store.queries import Store

    shutil.copytree(Path(__file__).parents[2] / "sample_runs" / "store", tmp_path / "store")
    store = Store(tmp_path / "store")
    df = store.query("SELECT step, grad_norm, reward_mean FROM steps WHERE run = 'grpo-healthy' AND rank = 0 "
                     "AND step % 10 = 0 ORDER BY step")
    store.close()
    return df.to_dict("records")


def test_a_run_s_first_20_points_are_no_reference():
    # grad_norm 1.0 (MAD 0 → bar = spike_factor 5), with 10.0 at three points in a row: 10 × the median, still ≥
    # recover_factor 3 × it at the third point (sustain_steps 3) → warning, under critical_factor 20 ×. Steps 0, 1, …:
    # at steps 15–17 the reference holds 15–17 points < min_points 20 — the run's first steps, no normal level yet —
    # so no verdict at all. At steps 25–27 it holds 25–27 points, median 1.0: the episode opens at 25, warning from
    # 27. Under min_points 10 (the default before session 55) the early one is judged the same way: 15–17, warning.
    early = rows(60, grad_norm=lambda s: 10.0 if 15 <= s <= 17 else 1.0)
    later = rows(60, grad_norm=lambda s: 10.0 if 25 <= s <= 27 else 1.0)
    _, suite = feed(early, ONLY)
    assert spans(suite.episodes(), "grad") == []
    _, suite = feed(later, ONLY)
    assert spans(suite.episodes(), "grad") == [("explosion", 25, 27, "warning")]
    _, suite = feed(early, replace(ONLY, grad=replace(ONLY.grad, min_points=10)))
    assert spans(suite.episodes(), "grad") == [("explosion", 15, 17, "warning")]


def test_a_run_logging_every_10th_step_is_judged(tmp_path):
    # Windows count logged points. With min_points 10 (the default is 20: under it this 20-point log has no
    # point with 20 before it, and nothing is judged — checked last): at step 150 the reference is the 15 previous
    # logged grad norms (steps 0–140; real values 0.25–2.03, median 1.0075, robust log spread 0.29 → bar max(5,
    # e^(5 · 0.29) = 4.3) = 5). A 100× jump at step 150 (0.469 → 46.9 = 46.6 × the median) is seen at once; windows
    # counted in steps (the old rule) saw 5 points in 51 steps < min_points 10: no verdict. Alone (step 160 is back to
    # its real 0.73 < 3 × median) it is an info spike. Kept up at 160 and 170 too (× 100 each), step 170 is
    # the third point since the spike: at 170 the reference is the 17 points 0–160, two of them raised, so
    # its median is the 9th smallest, 1.1179 (step 10's value), and 113.4 = 101.5 × it ≥ critical_factor
    # 20. Severity: the reward level there (median of the logged rewards at 130–170: 0.531) is its running
    # best, so the shared gate lowers critical to warning.
    ten = replace(ONLY, grad=replace(ONLY.grad, min_points=10))
    data = _logged_every_10th(tmp_path)
    assert len(data) == 20 and data[15]["step"] == 150
    _, suite = feed(data, ten)
    assert suite.episodes() == []  # the real run as logged: nothing
    data[15]["grad_norm"] *= 100
    _, suite = feed(data, ten)
    assert spans(suite.episodes(), "grad") == [("explosion", 150, 150, "info")]
    ev = suite.episodes()[0].evidence
    assert ev["reference_points"] == 15 and round(ev["reference_median"], 4) == 1.0075
    assert round(ev["ratio"], 1) == 46.6 and ev["elevated_run"] == 1
    for i in (16, 17):
        data[i]["grad_norm"] *= 100
    _, suite = feed(data, ten)
    assert spans(suite.episodes(), "grad") == [("explosion", 150, 170, "warning")]
    ev = suite.episodes()[0].evidence
    assert ev["reference_points"] == 17 and round(ev["reference_median"], 4) == 1.1179
    assert round(ev["ratio"], 1) == 101.5 and ev["elevated_run"] == 3 and ev["severity_now"] == "warning"
    assert ev["severity_gate"]["reward_now"] == ev["severity_gate"]["reward_best"] == 0.53125
    _, suite = feed(data, ONLY)  # the default min_points 20: the 19 points before step 190 are too few
    assert suite.episodes() == []


def test_sparse_grad_norm_beside_per_step_metrics_is_judged(tmp_path):
    # TRL's shape: the probe's metrics every step, grad_norm only on logging steps. Same verdict as above (min_points
    # 10 as there: NULL rows are not points).
    logged = {r["step"]: r for r in _logged_every_10th(tmp_path)}
    logged[150]["grad_norm"] *= 100
    data = rows(200, reward_mean=0.5, grad_norm=lambda s: logged[s]["grad_norm"] if s in logged else None)
    _, suite = feed(data, replace(ONLY, grad=replace(ONLY.grad, min_points=10)))
    assert [(p, a, b) for p, a, b, _ in spans(suite.episodes(), "grad")] == [("explosion", 150, 150)]


def test_spikes_that_keep_coming_back_are_a_warning():
    # grad_norm 1.0 (bar = spike_factor 5, as above) with single points of 6.0 (6 × the median: over the bar)
    # that fall back at once, so each alone is an info spike (elevated_run 1 < sustain_steps 3). At 100, 104,
    # 108: at 108 the last recur_window 10 logged points (99–108) hold 3 = recur_spikes points over the bar
    # (100, 104, 108; each over its own bar: two 6.0s in a 50-point window of 1.0s leave median 1.0 and MAD 0):
    # warning at 108. At 100, 105, 110: at 110 the last 10 points (101–110) hold 105 and 110 only: info.
    # Each spike is its own episode (3 rows back at 1.0 close one, exit_patience 3).
    for at, expected in (((100, 104, 108), ["info", "info", "warning"]), ((100, 105, 110), ["info"] * 3)):
        _, suite = feed(rows(130, grad_norm=lambda s, at=at: 6.0 if s in at else 1.0), ONLY)
        assert spans(suite.episodes(), "grad") == [("explosion", s, s, sev) for s, sev in zip(at, expected, strict=True)]
    _, suite = feed(rows(130, grad_norm=lambda s: 6.0 if s in (100, 104, 108) else 1.0), ONLY)
    last = suite.episodes()[-1]
    assert last.evidence["recent_spikes"] == 3 and last.evidence["recur_window"] == 10
    assert "spike 3 in the last 10 logged points" in last.message
    # recur_spikes 0 turns it off: three info spikes
    off = replace(ONLY, grad=replace(ONLY.grad, recur_spikes=0))
    _, suite = feed(rows(130, grad_norm=lambda s: 6.0 if s in (100, 104, 108) else 1.0), off)
    assert [sev for *_, sev in spans(suite.episodes(), "grad")] == ["info"] * 3


def test_no_signal_batches_are_no_scale_for_the_reference():
    from collapsewatch.detectors.config import GradConfig
    from collapsewatch.detectors.grad import reference

    # 40 no-signal steps (norm 3e-6: KL terms only) and 10 live ones (0.1) before point 50 (0.13). The 90th
    # percentile of the 50 is 0.1 (position 0.9 × 49 = 44.1 of the sorted 50, among the 0.1s from position 40), so the
    # dead bar is 1e-3 × 0.1 =
    # 1e-4: the 40 dead points are left out, the median is that of ten 0.1s = 0.1, and 0.13 is 1.3 × it — no spike
    # (bar ≥ spike_factor 5). Every point counted (dead_frac 0), the median is 3e-6 and 0.13 is 43,333 × it.
    # min_points 10 here: ten live points are a reference (under the default 20 they are too few, as below)
    ten = GradConfig(min_points=10)
    values = np.array([3e-6] * 40 + [0.1] * 10 + [0.13])
    median, bar, spread = reference(values, 50, ten)
    assert median == pytest.approx(0.1) and spread == 0.0 and bar == 5.0
    assert reference(values, 50, GradConfig(min_points=10, dead_frac=0.0))[0] == pytest.approx(3e-6)
    # fewer than min_points live points: no reference at all, as with too short a history
    assert reference(np.array([3e-6] * 45 + [0.1] * 5 + [0.13]), 50, ten) is None
    assert reference(values, 50, GradConfig()) is None  # 10 live points < the default 20
    # a window without dead points is untouched: a spike's own height (1000 × the rest) does not move the bar
    # (the 90th percentile of 49 ones and one 1000 is 1, bar 1e-3)
    base = np.array([1.0] * 25 + [1000.0] + [1.0] * 24 + [7.0])
    assert reference(base, 50, GradConfig())[0] == reference(base, 50, GradConfig(dead_frac=0.0))[0] == 1.0
