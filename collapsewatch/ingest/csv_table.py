"""A wide CSV table of per-step metrics: a header row, one row per step, one column per metric — what a W&B run's
history exported with pandas (``run.history().to_csv()``: a ``_step`` column), a W&B panel's "Export CSV"
(``Step``, then ``<run> - <key>`` columns with ``__MIN`` / ``__MAX`` bands) or a project's own curve dump writes.

* The step column is the first header among :data:`.records.STEP_KEYS` and ``Step`` (sniff: the first line is a
  CSV header naming one, the next a row of as many fields).
* A value is read as every format's are (:class:`.records.Account`): a number or a string that reads as one; an
  empty cell is a metric not logged at that step (no value, not NaN).
* A wall-time column (``_timestamp`` of a W&B history, ``Wall time`` of TensorBoard's CSV download, ``wall_time``
  of tbparse's) is the row's wall time, not a metric; in a W&B history (step column ``_step``) wandb's other ``_`` columns (``_runtime``) are
  its bookkeeping, left out as the W&B reader leaves them (:mod:`.wandb_run`).
* A W&B panel export prefixes each column with the run's name (``grpo-7b - train/reward``): one such prefix is
  stripped (the summary says so); several runs' prefixes are refused naming them unless ``--source-run NAME``
  picks one. Its ``__MIN`` / ``__MAX`` columns are the band W&B draws around a sampled line, not logged values:
  left out, and counted.
* A first column with an empty name is the row index pandas' ``DataFrame.to_csv()`` writes unless ``index=False``
  (a W&B ``run.history().to_csv()``, tbparse's below): left out, said in the summary — not a metric named "".
* A long table — a step column, a tag column (``tag``, ``metric``, ``key`` or ``name``) and ``value``, optionally
  ``run`` / ``dir_name`` and a wall time (:data:`WALL_COLUMNS`) and nothing else — is one row per (step, tag), as
  tbparse's ``SummaryReader(logdir).scalars.to_csv()`` writes (tbparse 0.0.9, ``tbparse/summary_reader.py``: the
  index, then ``step``, ``tag``, ``value``; ``wall_time`` and ``dir_name`` with ``extra_columns``; its
  ``pivot=True`` frame is a wide table, a column per tag) and TensorBoard's ``ExperimentFromDev(id).get_scalars()``
  (``run``, ``tag``, ``step``, ``value``; ``wall_time`` with ``include_wall_time``:
  ``tensorboard/data/experimental/experiment_from_dev.py``, for tensorboard.dev, gone from TensorBoard 2.21):
  pivoted to one step with one value per tag, steps in numeric order. A tag logged twice at one step: the later row
  wins (counted in the summary). Several runs in its run column are refused naming them unless ``--source-run NAME``
  picks one; one run is used.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import STEP_KEYS, IngestError, Record, Skip, read_text

NAME = "csv"
GROWS = False
SNIFF_FORCED = True  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
STEP_COLUMNS = (*STEP_KEYS, "Step")
"""Headers read as the step column, the first present."""
BAND = re.compile(r"__(MIN|MAX)$")
"""W&B panel exports: the min / max band of a sampled line."""
BOM = "\ufeff"
"""A byte-order mark (a CSV saved by Excel) before the header: not part of its first name."""
WALL_COLUMNS = ("_timestamp", "Wall time", "wall_time")
"""Headers read as the row's wall time (seconds since the epoch), the first present: W&B's history, TensorBoard's CSV
download (``Wall time,Step,Value``: ``tensorboard/plugins/scalar/scalars_plugin.py``), tbparse's ``extra_columns``."""
INDEX_NOTE = "left out the unnamed first column: the row index pandas' to_csv() writes"
PREFIX = re.compile(r"^(?P<run>.+?) - (?P<key>.+)$")
"""W&B panel exports: ``<run name> - <key>``."""


def _rows(text: str) -> Iterator[list[str]]:
    return csv.reader(io.StringIO(text))


def step_column(header: list[str]) -> str | None:
    names = [h.strip() for h in header]
    return next((k for k in STEP_COLUMNS if k in names), None)


def why_not(head: str) -> str | None:
    """None when ``head`` opens a CSV of per-step metrics — a header naming a step column, then a row of as many
    fields — else why not, in a phrase."""
    lines = [ln for ln in head.lstrip(BOM).splitlines()[:3] if ln.strip()]
    if not lines or "," not in lines[0]:
        return "its first line is no CSV header (column names separated by commas)"
    if lines[0].lstrip()[:1] in ("{", "["):
        return "its first line is JSON, not a CSV header"
    try:
        header = next(_rows(lines[0]))
        if step_column(header) is None:
            return f"its header names no step column (one of {', '.join(STEP_COLUMNS)})"
        if len(lines) < 2:
            return "it holds a header and no row"
        first = next(_rows(lines[1]))
    except (csv.Error, StopIteration):
        return "it does not read as CSV"
    if len(header) < 2 or len(first) != len(header):
        return f"its first row has {len(first)} field(s), its header {len(header)}"
    return None


def sniff(path: Path, head: str) -> bool:
    """A header naming a step column, then a row of as many fields (a CSV of per-step metrics)."""
    return why_not(head) is None


class Notes:
    """What the reader left out, for the summary (the Account counts skipped rows and values itself)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def notes(self) -> list[str]:
        return self.lines


def _keys(header: list[str], step: str, source_run: str | None, path: Path, notes: Notes) -> dict[int, str]:
    """Column index → the key its values are stored under (band columns and other runs' columns left out)."""
    cols = {i: h.strip() for i, h in enumerate(header) if h.strip() != step and h.strip() not in WALL_COLUMNS}
    if step == "_step":  # a W&B history: wandb's bookkeeping columns are not metrics
        cols = {i: h for i, h in cols.items() if not h.startswith("_")}
    band = {i for i, h in cols.items() if BAND.search(h)}
    if band:
        notes.lines.append(f"left out {len(band)} __MIN/__MAX column(s): the band W&B draws around a sampled line")
    cols = {i: h for i, h in cols.items() if i not in band}
    prefixed = {i: PREFIX.match(h) for i, h in cols.items()}
    if not cols or not all(prefixed.values()):
        return cols
    runs = sorted({m["run"] for m in prefixed.values() if m})
    if len(runs) > 1 and source_run not in runs:
        which = "" if source_run is None else f"--source-run {source_run!r} is none of them; "
        raise IngestError(f"{str(path)!r} holds the columns of {len(runs)} runs ({', '.join(runs[:8])}): {which}"
                          "--source-run NAME picks one")
    run = source_run if len(runs) > 1 else runs[0]
    notes.lines.append(f"read the columns of run {run!r} (W&B panel export: '{run} - <key>')")
    return {i: m["key"] for i, m in prefixed.items() if m and m["run"] == run}


LONG_TAGS = ("tag", "metric", "key", "name")
"""A long table's tag column, the first present."""
LONG_RUNS = ("run", "dir_name")


def long_columns(header: list[str], step: str) -> tuple[int, int, int | None, int | None] | None:
    """(tag, value, run, wall time) column indexes when ``header`` is a long table's, else None."""
    names = [h.strip() for h in header]
    tag = next((t for t in LONG_TAGS if t in names), None)
    if tag is None or "value" not in names:
        return None
    run = next((r for r in LONG_RUNS if r in names), None)
    wall = next((w for w in WALL_COLUMNS if w in names), None)
    if set(names) - {step, tag, "value", run, wall} or len(set(names)) != len(names):
        return None
    return (names.index(tag), names.index("value"), None if run is None else names.index(run),
            None if wall is None else names.index(wall))


def _read_long(path: Path, rows: Iterator[list[str]], header: list[str], step: str, cols: tuple[int, int, int | None,
               int | None], source_run: str | None, notes: Notes) -> Iterator[Record | Skip]:
    at = [h.strip() for h in header].index(step)
    tag_at, value_at, run_at, wall_at = cols
    kept: list[tuple[int, list[str]]] = []
    skips: list[Skip] = []
    for n, row in enumerate(rows, start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            skips.append(Skip(f"line {n}", f"has {len(row)} fields, the header {len(header)}"))
        elif not row[at].strip() or not row[tag_at].strip():
            skips.append(Skip(f"line {n}", f"has no {'step' if not row[at].strip() else 'tag'}"))
        else:
            kept.append((n, row))
    runs = sorted({row[run_at].strip() for _, row in kept}) if run_at is not None else []
    if len(runs) > 1:
        if source_run not in runs:
            which = "" if source_run is None else f"--source-run {source_run!r} is none of them; "
            raise IngestError(f"{str(path)!r} holds the rows of {len(runs)} runs in its column "
                              f"{header[run_at].strip()!r} ({', '.join(runs[:8])}): {which}--source-run NAME picks one")
        kept = [(n, row) for n, row in kept if row[run_at].strip() == source_run]
        notes.lines.append(f"read the rows of run {source_run!r} (column {header[run_at].strip()!r})")
    steps: dict[str, tuple[int, dict[str, str], float | None]] = {}
    twice = 0
    for n, row in kept:
        line, values, wall = steps.setdefault(row[at].strip(), (n, {}, None))
        tag, value = row[tag_at].strip(), row[value_at].strip()
        twice += tag in values
        if value:
            values[tag] = value
        else:
            values.pop(tag, None)  # logged empty later: the later row wins
        seconds = _seconds(row[wall_at]) if wall_at is not None else None
        steps[row[at].strip()] = (line, values, seconds if seconds is not None else wall)
    if twice:
        notes.lines.append(f"{twice} (step, tag) pair(s) logged twice: the later row kept")
    notes.lines.append(f"long table: {len(kept)} (step, tag) row(s) pivoted into {len(steps)} step(s)")
    yield from skips
    for raw, (line, values, wall) in sorted(steps.items(), key=lambda kv: (_number(kv[0]) is None, _number(kv[0])
                                                                          or 0.0, kv[1][0])):
        number = _number(raw)
        yield Record(f"line {line}", raw if number is None else number, values, wall)


def _number(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def read(path: Path, source_run: str | None = None, parser: Notes | None = None, **_: Any) -> Iterator[Record | Skip]:
    notes = parser if parser is not None else Notes()
    rows = _rows(read_text(path).lstrip(BOM))
    try:
        header = next(rows)
    except StopIteration:
        raise IngestError(f"{str(path)!r} is empty") from None
    if len(header) > 1 and not header[0].strip():  # pandas' index (DataFrame.to_csv() without index=False)
        header = header[1:]
        rows = (row[1:] for row in rows)
        notes.lines.append(INDEX_NOTE)
    step = step_column(header)
    if step is None:
        raise IngestError(f"{str(path)!r}: no step column in its header (expected one of {', '.join(STEP_COLUMNS)})")
    if (long := long_columns(header, step)) is not None:
        try:
            yield from _read_long(path, rows, header, step, long, source_run, notes)
        except csv.Error as e:
            raise IngestError(f"{str(path)!r}: not a readable CSV ({e})") from None
        return
    names = [h.strip() for h in header]
    at = names.index(step)
    wall = next((names.index(w) for w in WALL_COLUMNS if w in names), None)
    keys = _keys(header, step, source_run, path, notes)
    try:
        for n, row in enumerate(rows, start=2):
            where = f"line {n}"
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                yield Skip(where, f"has {len(row)} fields, the header {len(header)}")
                continue
            raw = row[at].strip()
            if not raw:
                yield Skip(where, "has no step")
                continue
            try:
                value: Any = float(raw)
            except ValueError:
                value = raw  # step_of names the line and the value
            yield Record(where, value, {k: row[i].strip() for i, k in keys.items() if row[i].strip()},
                         _seconds(row[wall]) if wall is not None else None)
    except csv.Error as e:
        raise IngestError(f"{str(path)!r}: not a readable CSV ({e})") from None


def _seconds(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


Parser = Notes  # not a growing log: its notes only (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
