"""First non-finite value: the tensor named at the episode's first step; Inf in logged scalars."""

from __future__ import annotations

import math

from collapsewatch.detectors import DetectorConfig

from .series import feed, rows, spans

ONLY = DetectorConfig(enabled=("nonfinite",))
CLEAN = {f"nonfinite_{t}": 0.0 for t in ("logp", "logp_old", "logp_rollout", "logp_ref", "entropy",
                                          "advantages", "rewards")}


def test_first_tensor_is_kept_while_the_episode_runs():
    # step 50: advantages (first); step 51: logp first now; 52… clean → closes after 3 clean rows
    data = rows(60, first_nonfinite=lambda s: {50: "advantages", 51: "logp"}.get(s), **CLEAN)
    data[50]["nonfinite_advantages"] = 4.0
    data[51]["nonfinite_logp"], data[51]["nonfinite_advantages"] = 10.0, 4.0
    stream, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 50, 51, "critical")]
    ep = suite.episodes()[0]
    assert ep.evidence["first_tensor"] == "advantages" and ep.evidence["first_step"] == 50
    assert ep.metric == "nonfinite_logp" and ep.value == 10.0
    assert "first in advantages" in ep.message and [e.step_end for e in stream] == [50, 51]


def test_infinite_grad_norm_is_reported_but_nan_is_indistinguishable_from_null():
    data = rows(30, grad_norm=lambda s: {10: math.nan, 20: math.inf}.get(s, 1.0), **CLEAN)
    _, suite = feed(data, ONLY)
    (ep,) = suite.episodes()
    assert (ep.step_start, ep.metric, ep.evidence["first_tensor"]) == (20, "grad_norm", "grad_norm")


def test_an_isolated_nonfinite_grad_norm_is_a_skipped_update():
    # step 20 alone: grad_norm Inf, step 19 and 21 clean, no probe count, loss finite → what fp16 loss scaling logs
    # when it skips an overflowing update: info, the episode's worst, and the message says so
    data = rows(30, grad_norm=lambda s: math.inf if s == 20 else 1.0, loss=0.5, **CLEAN)
    _, suite = feed(data, ONLY)
    (ep,) = suite.episodes()
    assert (ep.step_start, ep.step_end, ep.severity) == (20, 20, "info")
    assert ep.evidence["skipped_update"] is True and "loss scaler skips" in ep.message


def test_a_nonfinite_grad_norm_that_repeats_is_critical():
    # steps 20 and 21 Inf in a row: 20 reads as a skipped update (info), 21 continues the run of non-finite points
    # (first step 20 ≠ 21) → critical from 21: an applied NaN gradient leaves NaN weights, so the norm stays
    data = rows(30, grad_norm=lambda s: math.inf if s in (20, 21) else 1.0, loss=0.5, **CLEAN)
    stream, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 20, 21, "critical")]
    assert [e.severity for e in stream] == ["info", "critical"]
    assert suite.episodes()[0].evidence["first_step"] == 20


def test_a_nonfinite_loss_or_probe_tensor_beside_the_norm_is_critical_at_once():
    # Inf loss with the norm: the loss is the model's own number → critical at its first point
    data = rows(30, grad_norm=lambda s: math.inf if s == 20 else 1.0,
                loss=lambda s: math.inf if s == 20 else 0.5, **CLEAN)
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 20, 20, "critical")]
    # a probe count with the norm (NaN log-probs): critical at once too
    data = rows(30, grad_norm=lambda s: math.inf if s == 20 else 1.0, loss=0.5, **CLEAN)
    data[20]["nonfinite_logp"] = 3.0
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 20, 20, "critical")]


def test_counts_without_a_name_still_flag():
    data = rows(10, **CLEAN)
    data[4]["nonfinite_entropy"] = 2.0
    _, suite = feed(data, ONLY)
    assert spans(suite.episodes(), "nonfinite") == [("nonfinite", 4, 4, "critical")]
    assert suite.episodes()[0].evidence["first_tensor"] == "entropy"


def test_the_tensor_list_is_the_catalogues():
    # one home: the detector reads the catalogue's nonfinite_<tensor> columns, which the probe counts in its order
    from fixtures.synthetic_steps import NONFINITE_TENSORS

    from collapsewatch.catalogue import STEP_METRICS
    from collapsewatch.detectors.nonfinite import TENSORS, Nonfinite
    from collapsewatch.probe import NONFINITE_ORDER

    columns = [m.name for m in STEP_METRICS if m.name.startswith("nonfinite_")]
    assert [f"nonfinite_{t}" for t in TENSORS] == columns
    assert TENSORS == tuple(NONFINITE_ORDER) == NONFINITE_TENSORS
    assert set(columns) <= set(Nonfinite.inputs)
