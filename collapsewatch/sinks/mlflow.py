"""MLflow sink (``--to mlflow[:TRACKING_URI]``), on ``MlflowClient`` (mlflow or mlflow-skinny 3.x).

Where it writes: with a TRACKING_URI (``sqlite:///mlflow.db``, a folder, a server), one MLflow run per collapsewatch
run, named after it, in the experiment ``$MLFLOW_EXPERIMENT_NAME`` (default ``collapsewatch``); without one, the
active MLflow run (TRL's ``report_to="mlflow"`` opens it), else a new run at MLflow's default tracking URI. A folder
(a path or a ``file:`` URI: MLflow's folder store, which MLflow ≥ 3.7 refuses unless ``MLFLOW_ALLOW_FILE_STORE`` is
set) is written with that variable set during the sink's own calls only (``folder_store_allowed``).

What it writes:

* metric ``collapsewatch/episode_severity`` at each reported episode's ``step_end`` (:mod:`collapsewatch.sinks.tracker`);
* tag ``collapsewatch.worst`` — the worst severity reported so far; tag ``collapsewatch.last_event`` — the latest
  episode's headline;
* at the verdict: tags ``collapsewatch.verdict`` (status), ``collapsewatch.verdict_sentence``,
  ``collapsewatch.n_episodes``, and the episodes table as the artifact ``collapsewatch/episodes.json``
  (``MlflowClient.log_table``: the *Evaluation* / artifacts view shows it; ``mlflow.load_table`` reads it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..detectors.events import SEVERITY_RANK
from .base import SEVERITY_SCALAR, folder_store_allowed
from .tracker import TrackerSink

EXPERIMENT = "collapsewatch"
EPISODES_ARTIFACT = "collapsewatch/episodes.json"
TAG = "collapsewatch."
TAG_MAX = 5000
"""MLflow's longest tag value (its stores refuse longer ones); a longer sentence is cut with "…"."""


@dataclass
class _Run:
    client: Any
    run_id: str
    own: bool
    worst: str | None = None


def _cut(text: str) -> str:
    return text if len(text) <= TAG_MAX else text[: TAG_MAX - 1] + "…"


class MlflowSink(TrackerSink):
    name = "mlflow"

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None) -> None:
        super().__init__(tracking_uri)
        self.tracking_uri = tracking_uri
        self.experiment = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        self._folder = tracking_uri is not None and urlparse(tracking_uri).scheme in ("", "file")

    @contextlib.contextmanager
    def _store(self) -> Iterator[None]:
        """What every call of this sink runs in: a folder store allowed for its length (module docstring)."""
        if not self._folder:
            yield
            return

        with folder_store_allowed():
            yield

    def events(self, rows: list[dict[str, Any]]) -> None:
        with self._store():
            super().events(rows)

    def verdict(self, verdict: dict[str, Any]) -> None:
        with self._store():
            super().verdict(verdict)

    def close(self) -> None:
        with self._store():
            super().close()

    def _open(self, run: str) -> _Run:
        import mlflow
        from mlflow import MlflowClient

        active = mlflow.active_run() if self.tracking_uri is None else None
        if active is not None:
            return _Run(MlflowClient(), active.info.run_id, own=False)
        client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(self.experiment)
        created = client.create_run(exp_id, run_name=run, tags={f"{TAG}run": run})
        return _Run(client, created.info.run_id, own=True)

    def _event(self, handle: _Run, row: dict[str, Any], text: str) -> None:
        sev = str(row["severity"])
        if handle.worst is None or SEVERITY_RANK[sev] > SEVERITY_RANK[handle.worst]:
            handle.worst = sev
            handle.client.set_tag(handle.run_id, f"{TAG}worst", sev)
        handle.client.set_tag(handle.run_id, f"{TAG}last_event", _cut(text))

    def _severity(self, handle: _Run, step: int, value: int) -> None:
        handle.client.log_metric(handle.run_id, SEVERITY_SCALAR, value, step=step)

    def _verdict(self, handle: _Run, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        tags = {"verdict": verdict["status"], "verdict_sentence": verdict["sentence"],
                "n_episodes": verdict["n_episodes"]}
        if verdict.get("worst"):
            tags["worst"] = verdict["worst"]
        for k, v in tags.items():
            handle.client.set_tag(handle.run_id, TAG + k, _cut(str(v)))
        if table:
            handle.client.log_table(handle.run_id, data={c: [r[c] for r in table] for c in table[0]},
                                    artifact_file=EPISODES_ARTIFACT)

    def _finish(self, handle: _Run) -> None:
        if handle.own:
            handle.client.set_terminated(handle.run_id)
