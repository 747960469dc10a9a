"""What every tracker sink writes, whatever the tracker: one tracker run per collapsewatch run, and in it

* per reported episode: its one-line headline (:func:`collapsewatch.alerts.event_headline`) as the tracker's text or
  alert, at the episode's ``step_end``;
* :data:`~collapsewatch.sinks.SEVERITY_SCALAR` at each reported ``step_end``: the worst severity reported there, as a
  number (:func:`collapsewatch.detectors.events.severity_number`: 1 info, 2 warning, 3 critical);
* at the run's verdict: the verdict (status and sentence) and the episodes table (:data:`EPISODE_COLUMNS`, each
  reported episode in its latest reported version), once — and before it, where ``watch`` or a Monitor sees the
  reward collapse while the run still writes (``collapse``), the verdict as it stands then.

A tracker sink subclasses :class:`TrackerSink` and fills in ``_open`` / ``_event`` / ``_severity`` / ``_verdict`` /
``_finish`` with its library's public API.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..alerts import event_headline
from ..detectors.events import severity_number
from .base import KINDS, Sink, require

EPISODE_COLUMNS = ("run", "detector", "phase", "step_start", "step_end", "severity", "text")
"""The episodes table a tracker gets at the verdict."""
VERDICT_FIELDS = ("status", "sentence", "worst", "n_episodes", "collapse_step", "first_warning_step")
"""The verdict's fields a tracker keeps (tags, summary)."""


@dataclass
class Handle:
    """A tracker's run: the library's run object (None: the library's current run, through its module functions) and
    whether the sink opened it (then the sink finishes it at ``close``)."""

    run: Any
    own: bool


def severity_points(rows: list[dict[str, Any]]) -> dict[int, int]:
    """``step_end`` → the worst severity (as a number) of the rows ending there."""
    out: dict[int, int] = {}
    for row in rows:
        step = int(row["step_end"])
        out[step] = max(out.get(step, 0), severity_number(str(row["severity"])))
    return dict(sorted(out.items()))


def episode_record(row: dict[str, Any]) -> dict[str, Any]:
    """One row of the episodes table."""
    rec = {c: row.get(c) for c in EPISODE_COLUMNS if c != "text"}
    rec["step_start"], rec["step_end"] = int(rec["step_start"]), int(rec["step_end"])
    return dict(rec, text=event_headline(row))


class TrackerSink(Sink, ABC):
    """Per-run tracker handles, the episodes reported so far, and the common order of writes."""

    def __init__(self, where: str | None = None) -> None:
        """``where``: what follows ``KIND:`` in ``--to`` (a folder, a tracking URI, a project), None without it. A
        missing library is refused here (:func:`collapsewatch.sinks.base.require`)."""
        require(KINDS[self.name][0], self.name)
        self.where = where
        self._handles: dict[str, Any] = {}
        self._episodes: dict[str, dict[tuple, dict[str, Any]]] = {}
        self._ended: set[str] = set()  # the runs whose final verdict is written

    def events(self, rows: list[dict[str, Any]]) -> None:
        for run in dict.fromkeys(str(r["run"]) for r in rows):
            mine = [r for r in rows if str(r["run"]) == run]
            handle = self._handle(run)
            for row in mine:
                rec = episode_record(row)
                self._episodes.setdefault(run, {})[(rec["detector"], rec["phase"], rec["step_start"])] = rec
                self._event(handle, row, rec["text"])
            for step, value in severity_points(mine).items():
                self._severity(handle, step, value)
            self._flush(handle)

    def verdict(self, verdict: dict[str, Any]) -> None:
        self._write_verdict(verdict)
        self._ended.add(str(verdict["run"]))

    def collapse(self, verdict: dict[str, Any]) -> None:
        """A reward collapse seen while the run writes: the verdict as it stands then — the tracker's verdict fields
        (and trackio's alert) now, not only at the run's end, which writes it again; nothing once the run's final
        verdict is written (``watch``'s last poll and a Monitor's ``close`` send the verdict first)."""
        if str(verdict["run"]) not in self._ended:
            self._write_verdict(verdict)

    def _write_verdict(self, verdict: dict[str, Any]) -> None:
        run = str(verdict["run"])
        handle = self._handle(run)
        table = sorted(self._episodes.get(run, {}).values(), key=lambda r: (r["step_start"], r["detector"]))
        self._verdict(handle, {k: verdict.get(k) for k in VERDICT_FIELDS}, table, verdict.get("last_step"))
        self._flush(handle)

    def close(self) -> None:
        handles, self._handles = self._handles, {}
        for handle in handles.values():
            self._finish(handle)

    def _handle(self, run: str) -> Any:
        if run not in self._handles:
            self._handles[run] = self._open(run)
        return self._handles[run]

    # -- what each tracker fills in -----------------------------------------------------------------------------
    @abstractmethod
    def _open(self, run: str) -> Any:
        """Open (or resume) the tracker's run for ``run``: the handle every later call gets."""

    @abstractmethod
    def _event(self, handle: Any, row: dict[str, Any], text: str) -> None:
        """Write one reported episode (its row and one-line text)."""

    @abstractmethod
    def _severity(self, handle: Any, step: int, value: int) -> None:
        """Write the severity number (0–3) at ``step``."""

    @abstractmethod
    def _verdict(self, handle: Any, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        """Write a run's verdict and its episode table (at ``step``, its last step, where known)."""

    def _flush(self, handle: Any) -> None:
        """Make what was written readable (a tracker that buffers)."""

    @abstractmethod
    def _finish(self, handle: Any) -> None:
        """End the tracker's run: what was written is kept."""
