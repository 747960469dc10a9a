"""lab/natural_ship.py: a natural-corpus run copied stripped scores as the original does; and the committed corpus
(lab/natural/): every run its manifest lists is in the store, finished, with the steps the manifest says, stripped to
what `lab natural` reads and with no training machine's folder in its config."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

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


def test_the_manifest_records_each_copied_run_once(tmp_path):
    # grpo-collapse: the sample store's 200-step GRPO run (sample_runs/make_sample_runs.py); a second copy of the
    # same run replaces its row (a new note), it does not add one
    dest, manifest = tmp_path / "corpus", tmp_path / "runs.csv"
    assert natural_ship.main([str(SAMPLE), str(dest), "grpo-collapse", "--manifest", str(manifest),
                              "--commit", "abc1234", "--note", "first"]) == 0
    assert natural_ship.main([str(SAMPLE), str(dest), "grpo-collapse", "grpo-healthy", "--replace", "--manifest",
                              str(manifest), "--commit", "abc1234", "--note", "again"]) == 0
    rows = list(csv.DictReader(open(manifest, newline="")))
    # with no RUN named, every finished run of the store: the sample store's runs all finished
    assert {"grpo-collapse", "grpo-healthy"} <= set(natural_ship.finished_runs(SAMPLE))
    assert [(r["run"], r["steps"], r["objective"], r["commit"], r["note"]) for r in rows] == [
        ("grpo-collapse", "200", "grpo", "abc1234", "again"), ("grpo-healthy", "200", "grpo", "abc1234", "again")]


def test_a_folder_that_is_no_store_is_refused_by_name(tmp_path):
    try:
        natural_ship.ship(tmp_path, tmp_path / "out", ["x"])
    except SystemExit as e:
        assert str(tmp_path) in str(e) and "no _schema folder" in str(e)
    else:
        raise AssertionError("a folder without _schema was accepted")


CORPUS = ROOT / "lab" / "natural"
STORE = CORPUS / "store"
MANIFEST = list(csv.DictReader(open(CORPUS / "runs.csv", newline="")))


def test_the_manifest_and_the_store_hold_the_same_runs():
    in_store = sorted(p.name for p in STORE.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    assert sorted(r["run"] for r in MANIFEST) == in_store and len(in_store) >= 10


@pytest.mark.parametrize("row", MANIFEST, ids=[r["run"] for r in MANIFEST])
def test_each_run_is_finished_stripped_and_as_long_as_the_manifest_says(row):
    run = STORE / row["run"]
    assert {p.name for p in run.iterdir()} <= set(natural_ship.KEEP)
    ((status, config),) = duckdb.sql("SELECT status, config FROM read_parquet(?)",
                                     params=[str(run / "runs" / "*.parquet")]).fetchall()
    config = json.loads(config)
    assert status == "finished" and config["store"] == "" and config["steps"] == int(row["steps"])
    ((last,),) = duckdb.sql("SELECT max(step) FROM read_parquet(?)",
                            params=[str(run / "step_metrics" / "**" / "*.parquet")]).fetchall()
    assert last == int(row["steps"]) - 1  # steps 0 … steps − 1
