"""The sink interface's parts every sink module imports: :class:`Sink`, the news filter :class:`News`, the tracker
scalar names, the sink kinds and :func:`require` (a missing library refused in one line). The fan-out and the
factory are in :mod:`collapsewatch.sinks`."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..detectors.events import SEVERITY_RANK
from ..series import PREFIX, STEP_KEY
from ..webhooks import scrubbed, shown

SEVERITY_SCALAR = PREFIX + "episode_severity"
"""The tracker scalar of an episode's severity (:func:`collapsewatch.detectors.events.severity_number`), at its
``step_end``: the worst of the episodes reported at that step. Not the series' ``collapsewatch/severity`` (the worst
so far at each logged step): a trainer logging the series into the same tracker run would otherwise get both in one
plot, stepping back in time."""
STEP_SCALAR = STEP_KEY
"""W&B's step axis for :data:`SEVERITY_SCALAR` (``define_metric``): the run's step, not wandb's own counter."""

KINDS: dict[str, tuple[str, str, str, str]] = {
    # kind: (module to find, extra that installs it, module of the sink, class)
    "tensorboard": ("tensorboard", "tensorboard", "tensorboard", "TensorBoardSink"),
    "mlflow": ("mlflow", "mlflow", "mlflow", "MlflowSink"),
    "wandb": ("wandb", "wandb", "wandb", "WandbSink"),
    "trackio": ("trackio", "trackio", "trackio", "TrackioSink"),
    "swanlab": ("swanlab", "swanlab", "swanlab", "SwanLabSink"),
}
SPECS = ("tensorboard:DIR", "mlflow[:TRACKING_URI]", "wandb[:PROJECT]", "trackio[:PROJECT]", "swanlab[:PROJECT]",
         "http(s)://URL", "slack:URL", "discord:URL")
"""What ``--to`` (and a string in ``sinks=``) takes."""
FAIL_SOFT = "a failure stops neither training nor watch"
"""How a sink's failure line ends: a sink runs inside a training loop (Monitor, TRL) or inside ``collapsewatch watch``."""


log = logging.getLogger("collapsewatch")


def logged(line: str) -> None:
    """Where a sink's failure line (:func:`failed_line`) goes unless its owner passes its own ``warn``: the library's
    log, ``collapsewatch: LINE`` (a Monitor, TRL, the trainer). ``collapsewatch watch`` passes its stderr's
    (:func:`collapsewatch.follow.follow`), so every sink's line there reads as its other warnings."""
    log.warning("collapsewatch: %s", line)


Warn = Callable[[str], None]
"""Says one line: :func:`logged`, or a command's own."""


def failed_line(label: str, why: str) -> str:
    """The one line that says a sink failed (:attr:`Sink.label`, then why — its URLs scrubbed of credentials and
    tokens, :func:`collapsewatch.webhooks.scrubbed`); its later failures are not said."""
    return f"the {label} sink failed ({scrubbed(why)}); its later errors are not logged, {FAIL_SOFT}"


class SinkUnavailable(ValueError):
    """A sink whose library is not installed (the message names the extra that installs it)."""


def require(module: str, kind: str) -> None:
    """SinkUnavailable unless ``module`` can be imported (checked without importing it)."""
    if importlib.util.find_spec(module) is None:
        extra = KINDS[kind][1]
        raise SinkUnavailable(f"the {kind} sink needs the {module} package: pip install 'collapsewatch[{extra}]'")


class Sink:
    """One destination. Override what it takes; each method is called through :class:`Sinks` (fail-soft)."""

    name = "sink"
    where: str | None = None
    """The sink's target: what follows ``KIND:`` in ``--to`` (a log dir, a tracking URI, a project), a webhook's URL;
    None for the kind's default."""
    failed = 0
    """Deliveries that failed inside the sink without raising (a webhook POSTs from its own thread and counts them);
    a sink that raises is counted failed by :class:`collapsewatch.sinks.Sinks`."""

    @property
    def label(self) -> str:
        """How every message names this sink: its kind and its target as :func:`collapsewatch.webhooks.shown` shows
        it (``tensorboard:tb/a``, ``mlflow:http://host:5000``, ``webhook:https://hooks.slack.com`` — never a token),
        the kind alone for the kind's default target."""
        return f"{self.name}:{shown(self.where)}" if self.where else self.name

    def events(self, rows: list[dict[str, Any]]) -> None:
        """Episodes reported in one check: ``events`` rows with ``run`` (new, or at a higher severity)."""

    def verdict(self, verdict: dict[str, Any]) -> None:
        """A run's verdict object (:func:`collapsewatch.report.verdict_object`) once the run has ended."""

    def collapse(self, verdict: dict[str, Any]) -> None:
        """A run whose reward collapsed: its verdict object (status ``collapsed``), once per collapse step — from
        ``watch`` at the first poll that sees it (:class:`collapsewatch.follow.EventFollower` says each once), from a
        Monitor once its flushed rows show it (``collapse_news``) or at ``close``; where the run's final verdict is sent
        in the same breath, after it."""

    def close(self) -> None:
        """Write what is pending and let go of the destination."""


class News:
    """Which episodes are news: an episode (run, detector, phase, step_start) once when it first reaches ``least``,
    and once more each time its severity rises; a longer ``step_end`` alone is not news."""

    def __init__(self, least: str = "info") -> None:
        if least not in SEVERITY_RANK:
            raise ValueError(f"severity must be one of {', '.join(SEVERITY_RANK)}, got {least!r}")
        self.least = SEVERITY_RANK[least]
        self._seen: dict[tuple[str, str, str, int], int] = {}

    def __call__(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for row in rows:
            rank = SEVERITY_RANK.get(str(row["severity"]), 0)
            key = (str(row.get("run")), str(row["detector"]), str(row["phase"]), int(row["step_start"]))
            if rank < self.least or rank <= self._seen.get(key, -1):
                continue
            self._seen[key] = rank
            out.append(row)
        return out


ALLOW_FOLDER = "MLFLOW_ALLOW_FILE_STORE"


@contextmanager
def folder_store_allowed() -> Iterator[None]:
    """MLflow ≥ 3.7 refuses its folder store (``mlruns/``, a ``file:`` URI) unless ``MLFLOW_ALLOW_FILE_STORE`` is set:
    set inside this block only (for this reader and the MLflow sink), then put back as it was."""
    before = os.environ.get(ALLOW_FOLDER)
    os.environ[ALLOW_FOLDER] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOW_FOLDER, None)
        else:
            os.environ[ALLOW_FOLDER] = before
