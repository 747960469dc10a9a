"""One declaration per detector (``@register_detector``): every detector has every part, and the suite, the verdict,
the alerts, the dashboard's colours and the lab's targets are read from it — a detector missing from any of them
fails here."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from fixtures.synthetic_steps import make_run

from collapsewatch.alerts import SENTENCES, event_message
from collapsewatch.dashboard import theme
from collapsewatch.detectors import DETECTORS, DetectorConfig, detect_frame, suite
from collapsewatch.detectors.config import DEFAULT_ENABLED, GrpoGuardConfig
from collapsewatch.detectors.registry import register_detector, specs
from collapsewatch.lab.score import OWN_DETECTORS
from collapsewatch.verdict import PHASE_NAMES, phase_name

HEX = re.compile(r"#[0-9a-f]{6}")


def test_every_detector_is_declared_with_every_part():
    declared = specs()
    assert tuple(declared) == DETECTORS  # each listed name has a module detectors/<name>.py that declares it
    config = DetectorConfig()
    for name, spec in declared.items():
        assert spec.cls.name == name and spec.phases == tuple(spec.cls.phases) and spec.phases
        assert isinstance(getattr(config, name), spec.config)  # DetectorConfig.<name> is its settings' class
        assert spec.primary and set(spec.primary) <= set(spec.cls.inputs) | {"ratio_p50_pos"}, name
        assert callable(spec.sentence) and HEX.fullmatch(spec.colour), name
        assert set(spec.phase_names) <= set(spec.phases)
        assert spec.why_not_applicable()
    colours = [s.colour for s in declared.values()]
    assert len(set(colours)) == len(colours)  # one colour per detector on the run page


def test_everything_else_derives_from_the_declarations():
    declared = specs()
    assert suite.REGISTRY == {n: s.cls for n, s in declared.items()}
    assert suite.PHASES == {n: s.phases for n, s in declared.items()}
    assert suite.PRIMARY == {n: s.primary for n, s in declared.items()}
    assert SENTENCES == {n: s.sentence for n, s in declared.items()}  # grpo_guard had none before the registry
    assert theme.DETECTOR_COLOURS == {n: s.colour for n, s in declared.items()}  # … nor a colour
    assert {(n, p) for n, s in declared.items() for p in s.phase_names} == set(PHASE_NAMES)
    assert phase_name("grad", "explosion") == "gradient explosion"
    assert phase_name("grpo_guard", "ratio_left_shift") == "grpo_guard ratio left shift"  # no name: spaces
    # the lab's targets: a detector per drill it declares (the blow-up drill has two textbook signatures)
    assert OWN_DETECTORS["blowup"] == ("entropy", "grad") and OWN_DETECTORS["lld"] == ("lld",)
    # … and every default detector has one, but tools: a search cost in the built-in task's reward did not make its
    # tiny model stop searching (docs/lab/bench.md, "2026-11-30 (tools)"), so no drill produces its failure; and
    # evaluation: the built-in trainer logs no evaluation score
    assert {d for ds in OWN_DETECTORS.values() for d in ds} == set(DEFAULT_ENABLED) - {"tools", "evaluation"}


def test_a_detector_outside_the_list_or_with_unknown_phases_is_refused():
    class Stray:
        name, phases = "stray", ("x",)

    with pytest.raises(ValueError, match="not listed in DETECTORS"):
        register_detector(primary=("x",), config=GrpoGuardConfig, sentence=lambda p, e, n: None, colour="#000000")(
            Stray)

    class Guard:
        name, phases = "grpo_guard", ("x",)

    with pytest.raises(ValueError, match="already registered"):  # a second class under a taken name
        register_detector(primary=("x",), config=GrpoGuardConfig, sentence=lambda p, e, n: None, colour="#000000")(
            Guard)
    with pytest.raises(ValueError, match="phase_names for unknown phases"):  # a name for a phase it does not have
        register_detector(primary=("x",), config=GrpoGuardConfig, sentence=lambda p, e, n: None, colour="#000000",
                          phase_names={"y": "why"})(specs()["grpo_guard"].cls)
    assert specs()["grpo_guard"].primary == ("ratio_mean_pos",)  # the refused declarations changed nothing


@pytest.mark.parametrize("scenario", ["isdd", "lld", "grad", "nonfinite", "starvation", "length", "mismatch",
                                      "entropy"])
def test_each_sentence_reads_its_detectors_real_evidence(scenario):
    # episodes of the real rules on the labelled series: the detector's own sentence (not the stored message) says it
    events = [e for e in detect_frame(make_run(scenario, seed=0).frame) if e.detector == scenario]
    assert events, scenario
    for e in events:
        built = specs()[e.detector].sentence(e.phase, dict(e.evidence), e.step_end)
        assert built and event_message(e) == built, (e.detector, e.phase)


def test_grpo_guard_sentence():
    # evidence as GrpoGuard.evaluate writes it: level 0.93 of ratio_mean_pos, clip_high on 0.2 % of tokens, cap 1 %
    ev = {"ratio_mean_pos_level": 0.93, "clip_high_frac_level": 0.002, "clip_high_max": 0.01}
    assert specs()["grpo_guard"].sentence("ratio_left_shift", ev, 40) == (
        "mean ratio of A>0 tokens is 0.93 while clip_high fires on 0.2% of tokens (at most 1.0%): the upper clip no "
        "longer bounds positive updates")
    assert specs()["grpo_guard"].sentence("ratio_left_shift", {}, 40) is None


def test_config_fields_and_declarations_name_the_same_detectors():
    per_detector = {f.name for f in fields(DetectorConfig) if f.name in DETECTORS}
    assert per_detector == set(DETECTORS)
