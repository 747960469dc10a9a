"""calibrate → detectors.toml → detect: the chosen thresholds survive the round trip and change detection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixtures.synthetic_steps import make_run
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.detectors import DetectorConfig
from collapsewatch.lab.calibrate import calibrate, split, to_toml
from collapsewatch.lab.corpus import Corpus
from collapsewatch.lab.labels import RunLabel
from collapsewatch.offline import detect_runs

ROOT = Path(__file__).resolve().parents[2]


def _corpus(extra: tuple[tuple[str, str], ...] = ()) -> Corpus:
    frames, labels = {}, {}
    for scenario, kind in (("starvation", "starvation"), ("healthy", ""), *extra):
        for seed in range(4):
            run = make_run(scenario, seed=seed, n_steps=200)
            name = f"{kind or 'none'}-{scenario}-{seed}"
            frames[name] = run.frame
            onset = run.label.onset if run.label.onset is not None else (100 if kind else None)
            labels[name] = RunLabel(name, kind, onset, run.label.collapse, 0, 199)
    return Corpus(frames, labels)


def test_split_alternates_within_each_kind():
    train, held = split(_corpus())
    assert train == ["none-healthy-0", "none-healthy-2", "starvation-starvation-0", "starvation-starvation-2"]
    assert held == ["none-healthy-1", "none-healthy-3", "starvation-starvation-1", "starvation-starvation-3"]


def test_calibrate_round_trip(tmp_path):
    config, chosen = calibrate(_corpus())
    # starvation is the only drilled kind: only its grid is searched. zero_std_group_frac ramps to 1 after the
    # onset and stays ≤ ~0.35 on healthy runs, so every warn_frac in [0.6, 0.9] flags every training drill with
    # no healthy flag; the tie goes to the shortest delay: the lowest bar, 0.6, is crossed first on the ramp.
    assert chosen == {"starvation": {"warn_frac": 0.6}}
    path = tmp_path / "detectors.toml"
    path.write_text(to_toml(chosen, "test"))
    assert DetectorConfig.from_file(path) == config
    assert config.starvation.warn_frac == 0.6 and config.isdd == DetectorConfig().isdd


def test_calibrate_keeps_values_without_evidence():
    # healthy series labelled as lld drills from step 100: no lld candidate flags them, so lld keeps its values
    config, chosen = calibrate(_corpus(extra=(("healthy", "lld"),)))
    assert "lld" not in chosen and config.lld == DetectorConfig().lld and "starvation" in chosen


def test_detect_reads_a_detectors_file(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(ROOT / "sample_runs" / "store", store)
    path = tmp_path / "detectors.toml"
    path.write_text('enabled = ["grad"]\n[grad]\nspike_factor = 1.01\nspike_z = 0.01\nconfirm_steps = 1\n')
    config = DetectorConfig.from_file(path)
    expected = detect_runs(store, write=False, config=config)
    default = detect_runs(store, write=False)
    assert set(expected["detector"]) == {"grad"} and len(expected) != len(default)  # the file changes the result
    out = CliRunner().invoke(app, ["detect", str(store), "--csv", "--detectors", str(path)])
    assert out.exit_code == 0, out.output
    assert out.output.count("\n") == len(expected) + 1  # header + one line per episode


@pytest.mark.parametrize("text, msg", [("[isdd]\nnope = 1\n", "detectors file"), ("[isdd\n", "not valid TOML")])
def test_bad_detectors_file_names_the_file(tmp_path, text, msg):
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=msg):
        DetectorConfig.from_file(path)
    out = CliRunner().invoke(app, ["detect", str(tmp_path), "--detectors", str(path)])
    assert out.exit_code == 1 and "d.toml" in out.output
