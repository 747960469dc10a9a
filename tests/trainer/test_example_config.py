"""The example command lines of README.md and docs/trainer.md: their config file ships (examples/train.toml) and
the line parses into a valid TrainConfig as written (nothing trained)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.main import get_command

from collapsewatch.trainer.cli import app, given_values
from collapsewatch.trainer.config import TrainConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "docs/trainer.md"])
def test_the_documented_config_command_line_parses_as_written(doc, monkeypatch):
    monkeypatch.chdir(ROOT)  # the docs' paths are the repository's
    line = next(ln for ln in (ROOT / doc).read_text().splitlines() if ln.startswith("collapsewatch train --config"))
    argv = shlex.split(line.split("#")[0])[2:]
    ctx = get_command(app).make_context("collapsewatch train", argv)
    cfg = TrainConfig(**given_values(**ctx.params))
    # examples/train.toml: llds, λ 0.1, eval_every 10; the line sets lr 2e-4 and λ 0.2 over it and adds a stop phase
    assert (cfg.objective, cfg.lr, cfg.objective_params, cfg.eval_every) == ("llds", 2e-4,
                                                                             {"lam": 0.2, "gate": "turn"}, 10)
    assert cfg.stop_on == ("accelerated_collapse",) and cfg.run_name == "llds-example"


def test_the_documented_python_call_loads_the_example(monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config("examples/train.toml", overrides=["lr=2e-4"], steps=50, store="runs/")
    assert (cfg.objective, cfg.lr, cfg.steps, cfg.store, cfg.objective_params["lam"]) == ("llds", 2e-4, 50, "runs/",
                                                                                          0.1)
