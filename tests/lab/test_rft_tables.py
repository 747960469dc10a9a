"""lab/public/rft_tables.py: a research log's hand-made per-step markdown table → the JSONL `ingest` reads.
Expected rows are written out by hand from the table in each test."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "public" / "rft_tables.py"
_spec = importlib.util.spec_from_file_location("rft_tables", SCRIPT)
rft_tables = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(rft_tables)

HEADING = rft_tables.RUNS["rft-attempt24"]
# A table in the log's style: a percent, bold emphasis, a signed value, an empty cell, a row missing (step 2), then
# text and a second table that must not be read.
DOC = f"""# log

{HEADING}

| Step | reward | correctness | response_len | truncated | ppo_kl |
|------|--------|-------------|--------------|-----------|--------|
| 1 | 0.500 | 39.1% | 2652 | 60.9% | +0.020 |
| 3 | **0.235** | **9.4%** | 3001 | **85.9%** |  |

### next

| Step | reward |
|------|--------|
| 9 | 1.0 |
"""


def test_the_table_under_the_heading_maps_to_the_catalogue():
    rows = rft_tables.convert(DOC.splitlines(keepends=True), HEADING)
    # 39.1 % → 0.391, 60.9 % → 0.609, +0.020 → 0.02; step 3's empty ppo_kl cell is left out; the later table is not read
    assert rows == [
        {"step": 1, "reward_mean": 0.5, "rft/correctness": pytest.approx(0.391), "response_length_mean": 2652.0,
         "truncated_frac": pytest.approx(0.609), "rft/ppo_kl": 0.02},
        {"step": 3, "reward_mean": 0.235, "rft/correctness": pytest.approx(0.094), "response_length_mean": 3001.0,
         "truncated_frac": pytest.approx(0.859)},
    ]


def test_a_missing_heading_or_a_ragged_row_is_refused():
    with pytest.raises(ValueError, match="no heading"):
        rft_tables.convert(["# other\n"], HEADING)
    ragged = f"{HEADING}\n\n| Step | reward |\n|---|---|\n| 1 | 0.5 | 7 |\n"
    with pytest.raises(ValueError, match="row '1' has 3 cells, header 2"):
        rft_tables.convert(ragged.splitlines(keepends=True), HEADING)


def test_the_converted_run_ingests(tmp_path):
    src, out = tmp_path / "log.md", tmp_path / "out.jsonl"
    src.write_text(DOC)
    assert rft_tables.main([str(src), "rft-attempt24", str(out)]) == 0
    assert rft_tables.main([str(src), "nope", str(out)]) == 1
    store = tmp_path / "store"
    assert ingest_file(store, out, "a24").steps == 2
    got = connect(store).execute("SELECT step, reward_mean, response_length_mean FROM steps WHERE run = 'a24' "
                                 "ORDER BY step").fetchall()
    assert got == [(1, 0.5, 2652.0), (3, 0.235, 3001.0)]
