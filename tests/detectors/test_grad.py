"""Gradient explosion: isolated spike (info), sustained (warning), huge (critical)."""

from __future__ import annotations

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("grad",))


def test_spike_sustained_and_critical_episodes():
    # grad_norm 1.0 (MAD 0 → bar = spike_factor 5): step 100 = 6 (one step: info); steps 150–151 = 8 (two
    # consecutive rows over the bar: warning from 151); step 170 = 30 ≥ 20 × median: critical. Each closes
    # after 3 rows back at 1.0. A 7.0 at step 5 comes before the 10 reference points: no verdict.
    spikes = {5: 7.0, 100: 6.0, 150: 8.0, 151: 8.0, 170: 30.0}
    _, suite = feed(rows(200, grad_norm=lambda s: spikes.get(s, 1.0)), ONLY)
    assert spans(suite.episodes(), "grad") == [
        ("explosion", 100, 100, "info"), ("explosion", 150, 151, "warning"), ("explosion", 170, 170, "critical")]
    crit = suite.episodes()[-1]
    assert crit.value == 30.0 and crit.threshold == 5.0 and crit.evidence["ratio"] == 30.0


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
