"""MLflow's local tracking folder (``mlruns/``, the file store), read with MLflow's own ``MlflowClient``: every
metric's full history (``get_metric_history``) at its step and timestamp.

FILE is the ``mlruns`` folder, one experiment's folder, or one run's folder (``mlruns/<experiment id>/<run id>``).
A folder holding several runs is refused, naming them, unless ``source_run`` (``--source-run``) names one by id or
name. MLflow ≥ 3.7 keeps the file store "in maintenance mode" and refuses it unless ``MLFLOW_ALLOW_FILE_STORE`` is
set: set here for the read (reading changes nothing in the folder).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, needs, one_run

NAME = "mlflow"
GROWS = False


def _is_run(p: Path) -> bool:
    return (p / "meta.yaml").is_file() and (p / "metrics").is_dir()


def _root(path: Path) -> tuple[Path, str | None, str | None]:
    """(tracking root, experiment id, run id) that ``path`` points at."""
    if _is_run(path):
        return path.parent.parent, path.parent.name, path.name
    if (path / "meta.yaml").is_file() and any(_is_run(c) for c in path.iterdir()):
        return path.parent, path.name, None
    return path, None, None


def sniff(path: Path, head: str) -> bool:
    if not path.is_dir():
        return False
    root, _, _ = _root(path)
    return any((e / "meta.yaml").is_file() for e in root.iterdir() if e.is_dir())


def read(path: Path, source_run: str | None = None, **_: Any) -> Iterator[Record]:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise needs("mlflow", "an MLflow folder") from None
    if not sniff(path, ""):
        raise IngestError(f"{str(path)!r} is not an MLflow tracking folder (mlruns/, an experiment or a run folder)")
    root, exp, run_id = _root(path)
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        client = MlflowClient(tracking_uri=root.resolve().as_uri())
        if run_id is None:
            exps = [exp] if exp else [e.experiment_id for e in client.search_experiments()]
            runs = [(r.info.run_id, r.info.run_name) for r in client.search_runs(exps)]
            run_id = one_run(path, "MLflow", runs, source_run)
        keys = list(client.get_run(run_id).data.metrics)
        steps: dict[int, dict[str, float]] = defaultdict(dict)
        times: dict[int, float] = {}
        for key in keys:
            for m in client.get_metric_history(run_id, key):
                steps[m.step][key] = m.value
                times[m.step] = max(times.get(m.step, 0.0), m.timestamp / 1000)
    finally:
        if before is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before
    for step in sorted(steps):
        yield Record(f"step {step}", step, steps[step], times[step])
