"""The real TRL run whose logs the format tests ingest (written once per session, in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def trl_logs(tmp_path_factory) -> Path:
    """OUT with console.txt (PrinterCallback's stdout), tb/, mlruns/, trackio/cw.db and
    trl/checkpoint-3/trainer_state.json of one 3-step tiny TRL GRPO run (tests/ingest/trl_logs.py)."""
    pytest.importorskip("trl")
    for extra in ("tensorboard", "mlflow", "trackio"):
        pytest.importorskip(extra)
    out = tmp_path_factory.mktemp("trl-logs")
    with (out / "console.txt").open("w") as stdout:
        subprocess.run([sys.executable, "-m", "tests.ingest.trl_logs", str(out)], cwd=ROOT, stdout=stdout,
                       stderr=subprocess.PIPE, check=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out
