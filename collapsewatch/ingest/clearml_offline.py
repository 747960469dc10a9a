"""ClearML offline sessions: what a task run with ``Task.set_offline(True)`` (or ``CLEARML_OFFLINE_MODE=1``) leaves in
``$CLEARML_CACHE_DIR/offline/`` (``~/.clearml/cache/offline/`` by default): a session folder ``offline-<task id>/``
holding ``task.json`` (the task: id, name, project), ``metrics.jsonl`` (every reported event) and ``log.jsonl``
(console), zipped beside it as ``offline-<task id>.zip`` when the task closes.

``metrics.jsonl`` is text: each line one JSON list of the event dicts ClearML's reporter would have posted to the
server (``events.add_batch``), written at each flush. ClearML's own importer, ``Task.import_offline_session``, reads it
line by line with ``json.loads`` and posts the events to a ClearML server; there is no reader that hands them back
without one, so this module reads the lines the same way (stdlib ``json``; no ClearML needed to read). Checked on
files written by clearml 2.1.12.

* A scalar (``type: training_stats_scalar``) is ``report_scalar(title, series, value, iteration)``: its key here is
  ``title/series`` — verl's logger splits its keys at the first ``/`` into title and series, so its keys come back
  as logged (``actor/entropy``, ``critic/score/mean``); HF's ``ClearMLCallback`` (TRL) reports ``train`` / ``eval`` /
  ``test`` titles, so its keys read ``train/reward`` … (looked up without ``train/``, :mod:`.keys`). The step is the
  iteration, the wall time the event's (ms since the epoch).
* ClearML replaces NaN and ±Inf by 0.0 when they are reported (``Logger.set_reporting_nan_value`` /
  ``set_reporting_inf_value`` choose another value): what the file holds is that value, not the non-finite one.
* ``report_single_value`` (iteration −2³¹, title ``Summary``; HF's ``train_runtime``, ``epoch`` …) has no step: counted
  and left out. Plots, tables (verl's validation generations), histograms and debug images are one value each that is
  not a number (skipped and counted).

FILE is the session folder, its ``.zip``, its ``metrics.jsonl``, or the ``offline/`` folder: one holding several
sessions is refused, naming them, unless ``source_run`` (``--source-run``) names one by task name or task id.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, Skip, one_run

NAME = "clearml"
GROWS = False  # each flush appends a line holding many steps' events: re-read whole at each poll of --follow
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
METRICS, TASK = "metrics.jsonl", "task.json"
SCALAR = "training_stats_scalar"
SINGLE_VALUE_ITER = -(2**31)
"""The iteration ``report_single_value`` reports at."""


def _is_session(path: Path) -> bool:
    return path.is_dir() and (path / TASK).is_file()


def _is_zip(path: Path) -> bool:
    if path.suffix != ".zip" or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return TASK in z.namelist()


def _is_events(first_line: str) -> bool:
    """A line of ClearML's metrics.jsonl: a JSON list of event dicts naming their task, metric and type."""
    try:
        events = json.loads(first_line)
    except (json.JSONDecodeError, RecursionError):
        return False
    return (isinstance(events, list) and bool(events) and isinstance(events[0], dict)
            and {"type", "task", "metric"} <= events[0].keys())


def _sessions(path: Path) -> list[Path]:
    """The sessions an ``offline/`` folder holds: its session folders, and the zips of sessions whose folder is gone."""
    folders = sorted(p for p in path.iterdir() if _is_session(p))
    names = {p.name for p in folders}
    return folders + sorted(p for p in path.glob("*.zip") if p.stem not in names and _is_zip(p))


def sniff(path: Path, head: str) -> bool:
    if path.is_dir():
        return _is_session(path) or bool(_sessions(path))
    if path.suffix == ".zip":
        return _is_zip(path)
    return path.is_file() and _is_events(next((ln for ln in head.splitlines() if ln.strip()), ""))


def _texts(session: Path) -> tuple[dict[str, Any], str]:
    """(task.json, metrics.jsonl's text) of a session folder, zip or metrics.jsonl ({} / "" when absent)."""
    def load(raw: str | None, name: str) -> dict[str, Any]:
        if raw is None:
            return {}
        try:
            task = json.loads(raw)
        except json.JSONDecodeError as e:
            raise IngestError(f"{str(session)!r}: {name} is not JSON ({e})") from None
        return task if isinstance(task, dict) else {}

    if session.is_dir():
        task, metrics = session / TASK, session / METRICS
        return (load(task.read_text(errors="replace") if task.is_file() else None, TASK),
                metrics.read_text(errors="replace") if metrics.is_file() else "")
    if session.suffix == ".zip":
        try:
            with zipfile.ZipFile(session) as z:
                names = set(z.namelist())
                def member(n: str) -> str | None:
                    return z.read(n).decode(errors="replace") if n in names else None
                return load(member(TASK), TASK), member(METRICS) or ""
        except (zipfile.BadZipFile, OSError) as e:
            raise IngestError(f"{str(session)!r} could not be read as a zip: {e}") from None
    return load((session.parent / TASK).read_text(errors="replace") if (session.parent / TASK).is_file() else None,
                TASK), session.read_text(errors="replace")


def session_of(path: Path, source_run: str | None = None) -> Path:
    """The one session ``path`` means (see the module docstring); IngestError naming ``path`` otherwise."""
    if not sniff(path, _head(path)):
        raise IngestError(f"{str(path)!r} is not a ClearML offline session (its offline-<id> folder or .zip, its "
                          "metrics.jsonl, or the offline/ folder)")
    if not path.is_dir() or _is_session(path):
        return path
    sessions = {p.stem: p for p in _sessions(path)}
    if len(sessions) == 1 and source_run is None:
        return next(iter(sessions.values()))
    names = {stem: _texts(p)[0].get("name") or stem for stem, p in sessions.items()}  # stem: the task id
    return sessions[one_run(path, "ClearML", [(stem, names[stem]) for stem in sessions], source_run)]


def _head(path: Path) -> str:
    if not path.is_file() or path.suffix == ".zip":
        return ""
    with path.open("rb") as f:
        return f.read(1024 * 1024).decode(errors="replace")


class Parser:
    """metrics.jsonl's lines → one record per step; what was left out that is not a value (single values, an
    incomplete last line) for :meth:`notes`."""

    def __init__(self) -> None:
        self.single_values = 0
        self.incomplete = False
        self.skips: list[Skip] = []
        self._steps: dict[int, tuple[dict[str, Any], float | None]] = {}

    def feed(self, text: str) -> None:
        lines = text.split("\n")
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                events = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                if i == len(lines):  # no newline after it: the reporter was writing it (or was killed doing so)
                    self.incomplete = True
                else:
                    self.skips.append(Skip(f"line {i}", "not JSON"))
                continue
            if not isinstance(events, list):
                self.skips.append(Skip(f"line {i}", "not a list of events"))
                continue
            for event in events:
                self._add(event, i)

    def _add(self, event: Any, line: int) -> None:
        if not isinstance(event, dict) or "metric" not in event:
            self.skips.append(Skip(f"line {line}", "holds an event that is not an object with a metric"))
            return
        step = event.get("iter")
        if step == SINGLE_VALUE_ITER:
            self.single_values += 1
            return
        key = f"{event['metric']}/{event.get('variant', '')}" if event.get("variant") else str(event["metric"])
        value = event.get("value") if event.get("type") == SCALAR else {"_type": f"clearml-{event.get('type')}"}
        if not isinstance(step, int) or isinstance(step, bool):
            self.skips.append(Skip(f"line {line}", f"event {key!r} has no iteration"))
            return
        values, wall = self._steps.setdefault(step, ({}, None))
        values[key] = value
        stamp = event.get("timestamp")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            wall = max(wall or 0.0, stamp / 1000)
        self._steps[step] = (values, wall)

    def records(self) -> list[Record | Skip]:
        out: list[Record | Skip] = [Record(f"iteration {s}", s, dict(v), w) for s, (v, w) in sorted(self._steps.items())]
        return out + list(self.skips)

    def notes(self) -> list[str]:
        notes = []
        if self.single_values:
            notes.append(f"left out {self.single_values} single value(s) (report_single_value: no step)")
        if self.incomplete:
            notes.append("the last line is incomplete (a run still writing, or killed mid-write): left out")
        return notes


def read(path: Path, source_run: str | None = None, parser: Parser | None = None, **_: Any) -> Iterator[Record | Skip]:
    session = session_of(path, source_run)
    _, text = _texts(session)
    parser = parser or Parser()
    parser.feed(text)
    yield from parser.records()


Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
