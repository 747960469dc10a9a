"""Grid files: axes expand into named runs; `lab run` trains them and skips finished runs on a second call."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.lab.grid import expand, load_grid


def test_expand_names_each_combination():
    grid = {"base": {"steps": 10, "lr": 1e-4},
            "grid": [{"drill": [{"kind": "lld", "at_step": 4}, {"kind": "isdd", "at_step": 4}], "seed": [0, 1]},
                     {"objective": ["grpo", "llds"], "temperature": [0.8], "stop_on": ["drift"]},
                     {"tag": "x16", "drill": [{"kind": "lld", "at_step": 4, "strength": 16.0}]}]}
    runs = expand(grid)
    # 2 drills × 2 seeds, then 2 objectives × 1 temperature (stop_on is a list-valued field, never an axis),
    # then one tagged run (the tag tells it from lld-grpo-s0 and is not passed to the trainer)
    assert [r.name for r in runs] == ["lld-grpo-s0", "lld-grpo-s1", "isdd-grpo-s0", "isdd-grpo-s1",
                                      "healthy-grpo-temperature0.8-s0", "healthy-llds-temperature0.8-s0",
                                      "lld-grpo-x16-s0"]
    assert "tag" not in runs[6].fields
    assert runs[1].fields == {"steps": 10, "lr": 1e-4, "drill": {"kind": "lld", "at_step": 4}, "seed": 1}
    assert runs[5].fields["stop_on"] == ["drift"]


def test_bad_grids_fail_before_training(tmp_path):
    with pytest.raises(ValueError, match="names repeat"):
        expand({"grid": [{"seed": [0, 0]}]})
    path = tmp_path / "g.toml"
    path.write_text("[base]\nsteps = 3\n[[grid]]\ndrill = [{kind = 'isdd', at_step = 3}]\n")
    with pytest.raises(ValueError, match="run isdd-grpo-s0: drill.at_step"):  # not a rollout boundary
        load_grid(path)
    path.write_text("[bse]\nsteps = 3\n")
    with pytest.raises(ValueError, match="unknown top-level"):
        load_grid(path)


@pytest.mark.slow  # 53 s on the shared 2-core machine: a spawned worker imports torch and trains
def test_lab_run_trains_then_resumes(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text("[base]\nsteps = 2\nprompts_per_rollout = 2\ngroup_size = 4\nmax_turn_tokens = 24\n"
                    "max_response_tokens = 120\n[[grid]]\ndrill = [{kind = 'blowup', at_step = 1}]\n")
    store = tmp_path / "store"
    runner = CliRunner()
    first = runner.invoke(app, ["lab", "run", str(grid), "--store", str(store)])
    assert first.exit_code == 0, first.output
    assert "0 already done, 1 to train" in first.output
    assert "blowup-grpo-s0: finished, 2 steps" in first.output
    second = runner.invoke(app, ["lab", "run", str(grid), "--store", str(store)])
    assert "1 already done, 0 to train" in second.output and "blowup-grpo-s0:" not in second.output
    # `lab hold` reads the same store: one blowup run of objective grpo (its config says so)
    held = runner.invoke(app, ["lab", "hold", str(store), "--runs", "--json"])
    assert held.exit_code == 0, held.output
    rows = json.loads(held.output)  # records
    assert [(r["run"], r["objective"], r["drill"]) for r in rows] == [("blowup-grpo-s0", "grpo", "blowup")]
