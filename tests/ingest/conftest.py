"""The real TRL runs whose logs the format tests ingest (written once per session, in a subprocess; under
pytest-xdist once for all workers: tests.conftest.built_once)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import built_once, child_env

ROOT = Path(__file__).resolve().parents[2]


def _run(out: Path) -> None:
    with (out / "console.txt").open("w") as stdout:
        subprocess.run([sys.executable, "-m", "tests.ingest.trl_logs", str(out)], cwd=ROOT, stdout=stdout,
                       stderr=subprocess.PIPE, check=True, timeout=300, env=child_env(PYTHONPATH=str(ROOT)))


@pytest.fixture(scope="session")
def trl_logs(tmp_path_factory) -> Path:
    """OUT with console.txt (PrinterCallback's stdout), tb/, mlruns/, trackio/cw.db, wandb/offline-run-*/ and
    trl/checkpoint-3/trainer_state.json of one 3-step tiny TRL GRPO run, and mlflow-default/ (trl_mlflow_db) of a
    second one (tests/ingest/trl_logs.py: one process, two runs)."""
    pytest.importorskip("trl")
    for extra in ("tensorboard", "mlflow", "trackio", "wandb", "sqlalchemy", "alembic"):
        pytest.importorskip(extra)
    return built_once(tmp_path_factory, "trl-logs", _run)


@pytest.fixture(scope="session")
def trl_mlflow_db(trl_logs) -> Path:
    """OUT with mlflow.db — where MLflow 3's default tracking URI puts it when the run sets none — and
    trl/checkpoint-3/trainer_state.json of the same kind of 3-step TRL run, report_to=["mlflow"]."""
    return trl_logs / "mlflow-default"
