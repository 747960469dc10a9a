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


def test_a_run_logging_every_10th_step_is_judged(tmp_path):
    # Windows count logged points: at step 150 the reference is the 15 previous logged grad norms (steps
    # 0–140; real values 0.25–2.03, median 1.0075, robust log spread 0.29 → bar max(5, e^(5 · 0.29) = 4.3)
    # = 5). A 100× jump at step 150 (0.469 → 46.9 = 46.6 × the median ≥ critical_factor 20) is flagged at
    # once. Windows counted in steps (the old rule) saw 5 points in 51 steps < min_points 10: no verdict.
    # Severity: the reward level there (median of the last 5 logged rewards, 0.531) is its running best,
    # so the shared gate lowers critical to warning.
    data = _logged_every_10th(tmp_path)
    assert len(data) == 20 and data[15]["step"] == 150
    _, suite = feed(data, ONLY)
    assert suite.episodes() == []  # the real run as logged: nothing
    data[15]["grad_norm"] *= 100
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "grad") == [("explosion", 150, 150, "warning")]
    ev = suite.episodes()[0].evidence
    assert ev["reference_points"] == 15 and round(ev["reference_median"], 4) == 1.0075
    assert round(ev["ratio"], 1) == 46.6 and ev["severity_now"] == "warning"
    assert ev["severity_gate"]["reward_now"] == ev["severity_gate"]["reward_best"] == 0.53125


def test_sparse_grad_norm_beside_per_step_metrics_is_judged(tmp_path):
    # TRL's shape: the probe's metrics every step, grad_norm only on logging steps. Same verdict as above.
    logged = {r["step"]: r for r in _logged_every_10th(tmp_path)}
    logged[150]["grad_norm"] *= 100
    data = rows(200, reward_mean=0.5, grad_norm=lambda s: logged[s]["grad_norm"] if s in logged else None)
    _, suite = feed(data, ONLY)
    assert [(p, a, b) for p, a, b, _ in spans(suite.episodes(), "grad")] == [("explosion", 150, 150)]
