"""`collapsewatch train --resume`: the run continues with its own saved settings; a changed objective (or any field
that defines the experiment) is refused in one line; `--steps` at or below the steps done trains nothing."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.trainer.checkpoint import CONFIG_FILE
from collapsewatch.trainer.cli import main
from collapsewatch.trainer.config import TrainConfig, load_config
from collapsewatch.trainer.loop import train
from collapsewatch.trainer.resume import EXPERIMENT, FREE

SMALL = ["--set", "prompts_per_rollout=2", "--set", "group_size=4", "--set", "max_turn_tokens=24",
         "--set", "max_response_tokens=120", "--set", "progress=false", "--set", "sentinels=0"]


def _rows(store):
    con = connect(store)
    steps = [r[0] for r in con.execute("SELECT step FROM steps ORDER BY step").fetchall()]
    run = con.execute("SELECT objective, config FROM runs").fetchone()
    evals = [r[0] for r in con.execute("SELECT step FROM scalars WHERE key = 'eval/reward' ORDER BY step").fetchall()]
    return steps, run[0], json.loads(run[1]), evals


def test_resume_keeps_the_runs_settings_refuses_a_changed_experiment_and_trains_nothing_past_steps(store, capsys):
    base = ["--store", str(store), "--run", "s1"]
    assert main([*base, "--objective", "sapo_search", "--steps", "2", "--set", "eval_every=2", *SMALL]) == 0
    # the README's resume line names no objective nor eval_every: the run's own (sapo_search, eval_every 2) go on
    assert main([*base, "--steps", "3", "--resume"]) == 0
    steps, objective, config, evals = _rows(store)
    assert steps == [0, 1, 2] and objective == "sapo_search"
    assert (config["eval_every"], config["group_size"], config["steps"]) == (2, 4, 3)
    assert evals == [0, 2]  # eval_every 2 kept: steps 0 and 2 evaluated (it was reset to 0, off, before)
    capsys.readouterr()

    # a changed objective or lr would relabel the run: refused in one line naming field, saved and given values.
    # Without the checkpoint's saved settings (an older checkpoint) the run row's config is read instead.
    (store / "s1" / "checkpoint" / CONFIG_FILE).unlink()
    assert main([*base, "--steps", "5", "--resume", "--objective", "llds"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'objective = "sapo_search", not "llds"' in err, err
    assert main([*base, "--steps", "5", "--resume", "--set", "lr=1e-3"]) == 1
    assert "lr = 5e-05, not 0.001" in capsys.readouterr().err
    # the Python API checks too (its config is whole: the defaults — grpo, 8 prompts × 8 responses,
    # 40 / 200 tokens — would relabel the run); every changed field is named, the objective first
    with pytest.raises(ValueError, match='objective = "sapo_search", not "grpo"; prompts_per_rollout = 2, not 8; '
                                         'group_size = 4, not 8; max_turn_tokens = 24, not 40; max_response_tokens = '
                                         '120, not 200: a resumed run keeps these'):
        train(load_config(steps=5, store=str(store), run="s1", resume=True, progress=False))
    assert _rows(store)[0] == [0, 1, 2]  # nothing trained, nothing relabelled
    assert _rows(store)[1] == "sapo_search"

    # --steps is a total: at or below the 3 steps done, nothing to train (exit 0, the store untouched)
    for n in ("3", "2"):
        assert main([*base, "--steps", n, "--resume"]) == 0
        out = capsys.readouterr().out
        assert out == "run 's1' is already at step 3 (--steps is a total): nothing to train\n", out
    # the Python API says the same as a warning and returns the steps done, the store untouched (its config names
    # the run's own settings: the experiment is not changed)
    same = dict(objective="sapo_search", prompts_per_rollout=2, group_size=4, max_turn_tokens=24,
                max_response_tokens=120, progress=False, sentinels=0)
    with pytest.warns(UserWarning, match=r"run 's1' is already at step 3 \(--steps is a total\): nothing to train"):
        result = train(load_config(steps=3, store=str(store), run="s1", resume=True, **same))
    assert (result.run, result.steps, result.stopped_early) == ("s1", 3, False)
    assert _rows(store)[0] == [0, 1, 2]


def test_resume_from_another_directory_reads_the_detectors_file_the_run_started_with(tmp_path, monkeypatch,
                                                                                    capsys):
    # `--detectors rules.toml` given in first/ is saved as first/rules.toml's absolute path (it was saved as typed
    # and read from the new working directory on --resume: here other/rules.toml, not TOML, which failed the resume)
    first, other, store = tmp_path / "first", tmp_path / "other", tmp_path / "store"
    first.mkdir()
    other.mkdir()
    (first / "rules.toml").write_text("")  # an empty settings file: the built-in rules
    (other / "rules.toml").write_text("[[[ not the run's file")
    base = ["--store", str(store), "--run", "d1"]
    monkeypatch.chdir(first)
    assert main([*base, "--steps", "1", "--detectors", "rules.toml", *SMALL]) == 0
    saved = str((first / "rules.toml").resolve())
    assert json.loads((store / "d1" / "checkpoint" / CONFIG_FILE).read_text())["config"]["detectors"] == saved
    monkeypatch.chdir(other)
    assert main([*base, "--steps", "2", "--resume"]) == 0, capsys.readouterr().err
    steps, _, config, _ = _rows(store)
    assert steps == [0, 1] and config["detectors"] == saved  # step 1 trained under the run's own file
    # the file gone: one line naming it (not the built-in rules silently, not a traceback)
    (first / "rules.toml").unlink()
    capsys.readouterr()
    assert main([*base, "--steps", "3", "--resume"]) == 1
    assert capsys.readouterr().err == (f"error: --resume: run 'd1' was started with the detector settings {saved!r}, "
                                       "which do not exist here: put the file back, or pass --detectors FILE "
                                       "(--detectors '' for the built-in rules)\n")
    assert _rows(store)[0] == [0, 1]


def test_every_config_field_is_either_kept_or_free_on_resume():
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(EXPERIMENT) | FREE == fields and not set(EXPERIMENT) & FREE  # a new field must be classified here


def test_docs_name_the_fields_a_resume_keeps_and_those_it_lets_change():
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "trainer.md").read_text().split())
    free = text.split("where and how the run is watched may change: ", 1)[1].split(". The fields", 1)[0]
    kept = text.split("are kept (`collapsewatch.trainer.resume.EXPERIMENT`): ", 1)[1].split(". A given", 1)[0]
    assert re.findall(r"`(\w+)`", kept) == list(EXPERIMENT)
    assert set(re.findall(r"`(\w+)`", free)) == FREE - {"store", "run", "resume"}  # those three say which run
