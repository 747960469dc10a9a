"""lab/natural_ship.py: a natural-corpus run copied stripped scores as the original does."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "store"
spec = importlib.util.spec_from_file_location("natural_ship", ROOT / "lab" / "natural_ship.py")
natural_ship = importlib.util.module_from_spec(spec)
spec.loader.exec_module(natural_ship)


def _config(store: Path, run: str) -> dict:
    rows = duckdb.sql("SELECT config FROM read_parquet(?)", params=[str(store / run / "runs" / "*.parquet")]).fetchall()
    return json.loads(rows[0][0])


def _natural(store: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "collapsewatch", "lab", "natural", str(store), "--runs", "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def test_a_shipped_run_keeps_what_the_lab_reads_and_scores_the_same(tmp_path):
    run = "grpo-collapse"  # a built-in trainer run of the sample store (tokens/ and sequences/ beside its metrics)
    assert (SAMPLE / run / "tokens").is_dir() and (SAMPLE / run / "sequences").is_dir()
    dest = tmp_path / "corpus"
    assert natural_ship.ship(SAMPLE, dest, [run]) == [run]
    # only the folders `lab natural` reads are copied (the sample run has no sentinels folder: none to copy)
    assert sorted(p.name for p in (dest / run).iterdir()) == sorted(
        p for p in natural_ship.KEEP if (SAMPLE / run / p).is_dir())
    assert not (dest / run / "tokens").exists() and (dest / "_schema").is_dir()
    # the recorded config: its store path blanked, every other field as it was
    before, after = _config(SAMPLE, run), _config(dest, run)
    assert after["store"] == "" and {**before, "store": ""} == after
    # the same row of `lab natural --runs` from the copy as from the original
    # (a table of one run leaves out the detector columns that are empty in it: compare the filled cells)
    filled = lambda r: {k: v for k, v in r.items() if v != ""}  # noqa: E731
    (row,) = [r for r in _natural(SAMPLE) if r["run"] == run]
    (copy,) = _natural(dest)
    assert filled(copy) == filled(row) and any(k not in ("run", "steps", "collapse") for k in filled(row))
    # a second copy leaves the run as it is unless told to replace it
    assert natural_ship.ship(SAMPLE, dest, [run]) == []
    assert natural_ship.ship(SAMPLE, dest, [run], replace=True) == [run]


def test_a_folder_that_is_no_store_is_refused_by_name(tmp_path):
    try:
        natural_ship.ship(tmp_path, tmp_path / "out", ["x"])
    except SystemExit as e:
        assert str(tmp_path) in str(e) and "no _schema folder" in str(e)
    else:
        raise AssertionError("a folder without _schema was accepted")
