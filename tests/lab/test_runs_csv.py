"""lab/public/runs_csv.py: one run of a long-form W&B table (run_name,metric,step,value) → the JSONL `ingest` reads.
Expected rows are written out by hand from the table in each test."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "public" / "runs_csv.py"
_spec = importlib.util.spec_from_file_location("runs_csv", SCRIPT)
runs_csv = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(runs_csv)

# Two runs. "on": on-policy, one train row per GRPO step (steps 0, 1), eval at GRPO steps 0 and 1. "off": two optimizer
# steps per GRPO step (four train rows of each metric over GRPO steps 0, 0, 1, 1), eval at GRPO steps 1 and 3 (no train
# row carries 3).
TABLE = """run_name,metric,step,value
on,eval/reward,0,0.03
on,eval/reward,1,0.25
on,train/entropy,0,0.9
on,train/entropy,1,0.5
on,train/mean_response_length,0,440
on,train/mean_response_length,1,300
off,eval/reward,1,0.4
off,eval/reward,3,0.5
off,train/grad_norm,0,0.1
off,train/grad_norm,0,0.2
off,train/grad_norm,1,0.3
off,train/grad_norm,1,4.0
off,train/mean_response_length,0,400
off,train/mean_response_length,0,400
off,train/mean_response_length,1,20
off,train/mean_response_length,1,20
"""


def _rows():
    return list(csv.DictReader(TABLE.splitlines()))


def test_on_policy_run_one_row_per_grpo_step():
    # train/entropy → entropy_mean, train/mean_response_length → response_length_mean; eval/reward keeps its name and
    # lands on its GRPO step (= the optimizer step here)
    steps, left_out = runs_csv.convert(_rows(), "on")
    assert steps == [{"step": 0, "entropy_mean": 0.9, "response_length_mean": 440.0, "eval/reward": 0.03},
                     {"step": 1, "entropy_mean": 0.5, "response_length_mean": 300.0, "eval/reward": 0.25}]
    assert left_out == 0


def test_off_policy_run_is_stepped_by_optimizer_step():
    # grad_norm rows in file order are optimizer steps 0, 1 (GRPO step 0), 2, 3 (GRPO step 1); the eval of GRPO step 1
    # goes to its first optimizer step, 2; the eval of GRPO step 3 has no train row: left out and counted
    steps, left_out = runs_csv.convert(_rows(), "off")
    assert steps == [{"step": 0, "grad_norm": 0.1, "response_length_mean": 400.0},
                     {"step": 1, "grad_norm": 0.2, "response_length_mean": 400.0},
                     {"step": 2, "grad_norm": 0.3, "response_length_mean": 20.0, "eval/reward": 0.4},
                     {"step": 3, "grad_norm": 4.0, "response_length_mean": 20.0}]
    assert left_out == 1


def test_unknown_run_and_wrong_columns_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no row of run 'nope'"):
        runs_csv.convert(_rows(), "nope")
    bad = tmp_path / "bad.csv"
    bad.write_text("run,metric,step,value\non,eval/reward,0,0.1\n")
    assert runs_csv.main([str(bad), "on", str(tmp_path / "out.jsonl")]) == 1


def test_converted_run_ingests_into_the_catalogue_columns(tmp_path):
    table, out = tmp_path / "t.runs.csv", tmp_path / "on.jsonl"
    table.write_text(TABLE)
    assert runs_csv.main([str(table), "on", str(out)]) == 0
    assert [json.loads(line)["step"] for line in out.read_text().splitlines()] == [0, 1]
    store = tmp_path / "store"
    done = ingest_file(store, out, "on")
    assert (done.format, done.steps) == ("jsonl", 2)
    got = connect(store).execute("SELECT step, entropy_mean, response_length_mean FROM steps WHERE run = 'on' "
                                 "ORDER BY step").fetchall()
    assert got == [(0, 0.9, 440.0), (1, 0.5, 300.0)]
