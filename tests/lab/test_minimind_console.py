"""lab/public/minimind_console.py: MiniMind GRPO console lines → the JSONL `ingest` reads.
Expected rows are written out by hand from the lines in each test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "public" / "minimind_console.py"
_spec = importlib.util.spec_from_file_location("minimind_console", SCRIPT)
minimind_console = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(minimind_console)

# MiniMind's train_grpo.py line (epoch 2 of 2, step 3 of 10), a completion line, and the R1 variant's line.
LOG = """Model Params: 30.03M
Epoch:[2/2](3/10), Reward: -1.4468, KL_ref: 0.0409, Adv Std: 0.9257, Adv Mean: 0.0000, Actor Loss: 0.0065, \
Avg Response Len: 286.75, Learning Rate: 0.00000030
<think>
Epoch:[1/1](3/500), Reward: 0.4360, Fmt: 1.00, Correct: 0.00, KL_ref: -0.0050, Adv Std: 0.9233, Actor Loss: 0.0005, \
Avg Len: 100, LR: 0.00000100
"""


def test_both_trainers_lines_map_to_the_catalogue():
    steps, other = minimind_console.convert(LOG.splitlines())
    # step of the first line: (2 - 1) × 10 + 3 = 13; the R1 line: (1 - 1) × 500 + 3 = 3; two other lines
    assert other == 2
    assert steps == [
        {"step": 3, "reward_mean": 0.436, "minimind/Fmt": 1.0, "minimind/Correct": 0.0, "minimind/KL_ref": -0.005,
         "minimind/Adv Std": 0.9233, "loss": 0.0005, "response_length_mean": 100.0, "lr": 1e-06},
        {"step": 13, "reward_mean": -1.4468, "minimind/KL_ref": 0.0409, "minimind/Adv Std": 0.9257,
         "minimind/Adv Mean": 0.0, "loss": 0.0065, "response_length_mean": 286.75, "lr": 3e-07},
    ]


def test_a_field_without_a_value_and_a_log_without_step_lines_are_refused():
    with pytest.raises(ValueError, match="'Reward -1.4' is not 'Key: value'"):
        minimind_console.convert(["Epoch:[1/1](1/5), Reward -1.4, LR: 0.1"])
    with pytest.raises(ValueError, match="no 'Epoch"):
        minimind_console.convert(["<think>", "Model Params: 30.03M"])


def test_the_converted_run_fills_the_catalogue_columns(tmp_path):
    src, out = tmp_path / "grpo.log", tmp_path / "out.jsonl"
    src.write_text(LOG)
    assert minimind_console.main([str(src), str(out)]) == 0
    assert [json.loads(x)["step"] for x in out.read_text().splitlines()] == [3, 13]
    store = tmp_path / "store"
    done = ingest_file(store, out, "mm")
    assert (done.format, done.steps) == ("jsonl", 2)
    got = connect(store).execute(
        "SELECT step, reward_mean, response_length_mean, loss, lr FROM steps WHERE run = 'mm' ORDER BY step").fetchall()
    assert got == [(3, 0.436, 100.0, 0.0005, 1e-06), (13, -1.4468, 286.75, 0.0065, 3e-07)]
