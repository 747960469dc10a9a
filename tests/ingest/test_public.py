"""The public-runs corpus's committed raw files (lab/public/raw, MIT): real verl console output, ingested as it was
saved. Step 1's values are read by hand from the files' ``step:1 - …`` lines; the detector outcome is the one
docs/lab/public_runs.md reports."""

from __future__ import annotations

import csv
import gzip
import hashlib
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file
from collapsewatch.offline import detect_runs

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"
SOURCES = {r["run"]: r for r in csv.DictReader((PUBLIC / "sources.csv").open())}
COMMITTED = [run for run, r in SOURCES.items() if r["raw_in_repo"] == "yes"]


@pytest.mark.parametrize("run", COMMITTED)
def test_committed_raw_files_are_the_recorded_ones(run):
    raw = gzip.decompress((PUBLIC / "raw" / SOURCES[run]["file"]).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == SOURCES[run]["sha256"]


def test_verl_console_logs_of_the_corpus(store):
    # verl-q7b-math, step 1: actor/entropy:0.354 - critic/score/mean:0.433 - response_length/mean:308.049 -
    # response_length/clip_ratio:0.036; 211 step lines (step 0 is the validation before training).
    # verl-q7b-math-megatron, step 1: actor/entropy:0.336 - critic/score/mean:0.259 - response_length/mean:198.191 -
    # response_length/clip_ratio:0.002
    done = {run: ingest_file(store, PUBLIC / "raw" / SOURCES[run]["file"], run) for run in COMMITTED}
    assert {run: (d.format, d.steps) for run, d in done.items()} == {
        "verl-q7b-math": ("console", 211), "verl-q7b-math-megatron": ("console", 106)}
    con = connect(store)
    got = con.execute("SELECT run, entropy_mean, reward_mean, response_length_mean, truncated_frac FROM steps "
                      "WHERE step = 1 ORDER BY run").fetchall()
    assert got == [("verl-q7b-math", 0.354, 0.433, 308.049, 0.036), ("verl-q7b-math-megatron", 0.336, 0.259, 198.191,
                                                                       0.002)]
    events = detect_runs(store)
    warned = sorted({(r, f"{d}/{p}") for r, d, p, s in events[["run", "detector", "phase", "severity"]].itertuples(
        index=False) if s != "info"})
    # the reference math run: half its responses are truncated late in the run (length blow-up); its entropy
    # falls to a 0.012-nat level at reward 0.95, above entropy.collapse_abs 0.01 (0.05 warned on it); the
    # Megatron run: no warning
    assert warned == [("verl-q7b-math", "length/blowup")]
