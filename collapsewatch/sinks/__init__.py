"""Sinks: where reported detector episodes and each run's verdict go besides the store — a tracker the user already
has open (TensorBoard, MLflow, W&B, trackio, SwanLab) or a webhook (Slack, Discord, any http(s) URL).

    Monitor("runs/", run="exp1", sinks=["tensorboard:tb/", "wandb", "slack:https://hooks.slack.com/…"])
    watch(trainer, "runs/", "trl-exp", sinks=[...])                 # TRL: passed through to the Monitor
    collapsewatch watch STORE --to mlflow:sqlite:///mlflow.db --to trackio:my-project

A sink receives, through :class:`Sinks`, only the news: each episode once per severity it reaches (rising only,
:class:`News`), in one call per check (a poll of ``watch``, a delivery of the Monitor's events); a run whose
reward collapsed (its verdict, once per collapse step: ``collapse`` — from ``watch`` while the run still writes, from
a Monitor once its flushed rows show it or at ``close``); each run's verdict; then ``close`` (what a tracker library
prints meanwhile goes to stderr). A sink given as a string is made by :func:`make_sink`; its library is imported
lazily, and a missing one is refused in one line (:class:`SinkUnavailable`) when the sink is made, before training
starts. An error inside a sink is logged once per
sink and never reaches the caller (training and ``watch`` go on).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterable
from typing import Any

from .base import (
    KINDS,
    SEVERITY_SCALAR,
    SPECS,
    STEP_SCALAR,
    News,
    Sink,
    SinkUnavailable,
    Warn,
    failed_line,
    logged,
    require,
)

__all__ = ["KINDS", "SEVERITY_SCALAR", "SPECS", "STEP_SCALAR", "News", "Sink", "SinkUnavailable", "Sinks",
           "make_sink", "require", "run_verdict"]



def make_sink(spec: str | Sink, warn: Warn | None = None) -> Sink:
    """A sink from ``--to``'s text (:data:`SPECS`), or ``spec`` itself when it is one already; ``warn`` says a
    webhook's failed POST (default :func:`.base.logged`)."""
    if isinstance(spec, Sink):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a sink must be a Sink or a string such as 'tensorboard:DIR', got {type(spec).__name__}")
    if spec.startswith(("http://", "https://", "slack:", "discord:")):
        from .webhook import WebhookSink

        return WebhookSink(spec, warn=warn)
    kind, _, arg = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown sink {spec!r}: one of {', '.join(SPECS)}")
    module, _, where, cls = KINDS[kind]
    require(module, kind)
    return getattr(importlib.import_module(f"{__name__}.{where}"), cls)(arg or None)


class Sinks:
    """The sinks of one Monitor or one ``watch``: news only (:class:`News`), each sink's errors logged once."""

    def __init__(self, sinks: Iterable[str | Sink] = (), least: str = "info", warn: Warn | None = None) -> None:
        """``warn`` says each sink's failure, once per sink (:func:`.base.failed_line`; default :func:`.base.logged`):
        a sink that raises, and a webhook made here whose POST failed."""
        if isinstance(sinks, (str, Sink)):
            sinks = [sinks]
        self.warn = warn or logged
        self.sinks = [make_sink(s, self.warn) for s in sinks]
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

    def collapse(self, verdict: dict[str, Any]) -> None:
        """A run's collapsed verdict, to every sink (the caller says each collapse once: ``watch``'s follower)."""
        for sink in self.sinks:
            self._call(sink, "collapse", verdict)

    def close(self) -> None:
        for sink in self.sinks:
            self._call(sink, "close")

    def failed(self) -> list[str]:
        """The labels (:attr:`Sink.label`) of the sinks that failed to deliver, in their order: a call that raised, or
        a delivery the sink itself counted failed (:attr:`Sink.failed`: a webhook's POST). Read after :meth:`close`."""
        return [s.label for s in self.sinks if id(s) in self._failed or s.failed]

    def _call(self, sink: Sink, method: str, *args: Any) -> None:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # what a tracker prints: `watch --json` keeps stdout JSON
                getattr(sink, method)(*args)
        except Exception as e:  # a tracker that errors never stops training or watching: said once per sink
            if id(sink) not in self._failed:
                self._failed.add(id(sink))
                first = str(e).splitlines()[0] if str(e) else ""
                self.warn(failed_line(sink.label, f"{type(e).__name__}: {first}"))


def run_verdict(store: Any, run: str, config: Any = None) -> dict[str, Any]:
    """The verdict object of ``run`` in the store folder ``store`` (what ``watch`` prints when a run ends), under
    ``config``'s detector rules (default: built-in; a Monitor passes its own)."""
    from ..judge import judge
    from ..report import verdict_object
    from ..store import Store

    s = Store(store)
    try:
        return verdict_object(judge(s, run, config))
    finally:
        s.close()
