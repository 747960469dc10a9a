"""Sinks: where reported detector episodes and each run's verdict go besides the store — a tracker the user already
has open (TensorBoard, MLflow, W&B, trackio, SwanLab) or a webhook (Slack, Discord, any http(s) URL).

    Monitor("runs/", run="exp1", sinks=["tensorboard:tb/", "wandb", "slack:https://hooks.slack.com/…"])
    watch(trainer, "runs/", "trl-exp", sinks=[...])                 # TRL: passed through to the Monitor
    collapsewatch watch STORE --to mlflow:sqlite:///mlflow.db --to trackio:my-project

A sink receives, through :class:`Sinks`, only the news: each episode once per severity it reaches (rising only,
:class:`News`), in one call per check (a poll of ``watch``, a delivery of the Monitor's events), then each run's
verdict, then ``close`` (what a tracker library prints meanwhile goes to stderr). A sink given as a string is made
by :func:`make_sink`; its library is imported lazily, and a missing one is refused in one line
(:class:`SinkUnavailable`) when the sink is made, before training starts. An error inside a sink is logged once per
sink and never reaches the caller (training and ``watch`` go on).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import sys
from collections.abc import Iterable
from typing import Any

from ..detectors.events import SEVERITY_RANK

log = logging.getLogger("collapsewatch")

SEVERITY_SCALAR = "collapsewatch/severity"
"""The tracker scalar of an episode's severity (:func:`collapsewatch.detectors.events.severity_number`), at its
``step_end``: the worst of the episodes reported at that step."""
STEP_SCALAR = "collapsewatch/step"
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

    def events(self, rows: list[dict[str, Any]]) -> None:
        """Episodes reported in one check: ``events`` rows with ``run`` (new, or at a higher severity)."""

    def verdict(self, verdict: dict[str, Any]) -> None:
        """A run's verdict object (:func:`collapsewatch.report.verdict_object`) once the run has ended."""

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


def make_sink(spec: str | Sink) -> Sink:
    """A sink from ``--to``'s text (:data:`SPECS`), or ``spec`` itself when it is one already."""
    if isinstance(spec, Sink):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a sink must be a Sink or a string such as 'tensorboard:DIR', got {type(spec).__name__}")
    if spec.startswith(("http://", "https://", "slack:", "discord:")):
        from .webhook import WebhookSink

        return WebhookSink(spec)
    kind, _, arg = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown sink {spec!r}: one of {', '.join(SPECS)}")
    module, _, where, cls = KINDS[kind]
    require(module, kind)
    return getattr(importlib.import_module(f"{__name__}.{where}"), cls)(arg or None)


class Sinks:
    """The sinks of one Monitor or one ``watch``: news only (:class:`News`), each sink's errors logged once."""

    def __init__(self, sinks: Iterable[str | Sink] = (), least: str = "info") -> None:
        if isinstance(sinks, (str, Sink)):
            sinks = [sinks]
        self.sinks = [make_sink(s) for s in sinks]
        self.news = News(least)
        self._failed: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def events(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pass the news among ``rows`` to every sink; returns the news."""
        news = self.news(rows)
        if news:
            for sink in self.sinks:
                self._call(sink, "events", news)
        return news

    def verdict(self, verdict: dict[str, Any]) -> None:
        for sink in self.sinks:
            self._call(sink, "verdict", verdict)

    def close(self) -> None:
        for sink in self.sinks:
            self._call(sink, "close")

    def _call(self, sink: Sink, method: str, *args: Any) -> None:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # what a tracker prints: `watch --json` keeps stdout JSON
                getattr(sink, method)(*args)
        except Exception as e:  # a tracker that errors never stops training or watching: said once per sink
            if id(sink) not in self._failed:
                self._failed.add(id(sink))
                log.warning("collapsewatch: the %s sink failed (%s: %s); training goes on, its later errors are "
                            "not logged", sink.name, type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def run_verdict(store: Any, run: str) -> dict[str, Any]:
    """The verdict object of ``run`` in the store folder ``store`` (what ``watch`` prints when a run ends)."""
    from ..judge import judge
    from ..report import verdict_object
    from ..store import Store

    s = Store(store)
    try:
        return verdict_object(judge(s, run))
    finally:
        s.close()
