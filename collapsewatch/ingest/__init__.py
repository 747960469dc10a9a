"""`collapsewatch ingest`: a run made without the monitor, read from the logs it left, judged like any other.

    collapsewatch ingest STORE FILE --run NAME [--format F] [--follow] [--source-run R] [--map KEY=COLUMN …]

How it reads (one module per format, each with ``sniff`` and ``read``; :data:`FORMATS`):

* ``trainer_state`` — HF Trainer / TRL ``trainer_state.json`` (:mod:`.trainer_state`);
* ``log_history`` — a JSON list of per-step log dicts, ``json.dump(trainer.state.log_history, f)`` (:mod:`.log_history`);
* ``json_columns`` — a JSON object of per-step lists, ``{"step": [...], "reward": [...]}`` (:mod:`.json_columns`);
* ``jsonl`` — ``{"step": N, …}`` lines and verl's file logger (:mod:`.jsonl`);
* ``csv`` — a wide CSV of per-step metrics (a W&B history or panel export, a curve dump) (:mod:`.csv_table`);
* ``console`` — verl's ``step:N - key:value - …`` lines and HF / TRL's printed dicts, saved with ``tee``
  (:mod:`.console`);
* ``tensorboard`` — event files, via TensorBoard's ``EventAccumulator`` (:mod:`.tensorboard`);
* ``mlflow`` — MLflow's local stores, ``mlflow.db`` (MLflow 3's default) or an ``mlruns/`` folder, via ``MlflowClient``
  (:mod:`.mlflow_store`);
* ``trackio`` — a project's ``.db``, via trackio's ``SQLiteStorage`` (:mod:`.trackio_db`);
* ``wandb`` — a W&B run's ``.wandb`` log, via wandb's ``wandb leet inspect --json`` (:mod:`.wandb_run`);
* ``swanlab`` — a SwanLab run's ``.swanlab`` log, via swanlab's own ``DataStoreReader`` (:mod:`.swanlab_run`);
* ``clearml`` — a ClearML offline session's ``metrics.jsonl``, read as ClearML's own importer reads it
  (:mod:`.clearml_offline`).

The format is detected from the file (:func:`detect`); ``--format`` forces one, and a file that is not that format
says so in one line naming it. Every reader yields :class:`.records.Record` rows; :class:`.records.Account` turns
them into steps and counts what it leaves out; :class:`.sink.RunSink` writes the run: every value under its
logged key, and the catalogue columns the keys mean (:mod:`.key_table`, the one home of that mapping, looked up by
:mod:`.keys`), so an ingested run's ``steps`` carry ``entropy_mean``, ``reward_mean``, ``response_length_mean`` … for
the detectors and the dashboard; ``--map KEY=COLUMN`` adds the user's own aliases there (:mod:`.maps`), so every
format and ``--follow`` take them. Per-token metrics cannot be recovered from logs: NULL.

``--follow`` (:class:`Tail`) follows a live run in every format: the complete lines appended to a JSONL or console file,
or the steps after the last ingested one of a snapshot re-read through the format's reader (TensorBoard's and W&B's
``Snapshot`` read only what was appended); each poll is one flush, and the run stays ``running`` until the tail stops.
A file the logger has not created yet is waited for (:func:`wait_for_file`), so the follower can start first.
"""

from __future__ import annotations

import gzip
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import (
    clearml_offline,
    console,
    csv_table,
    json_columns,
    jsonl,
    log_history,
    mlflow_store,
    swanlab_run,
    tensorboard,
    trackio_db,
    trainer_state,
    wandb_run,
)
from .key_table import KEY_MAP, Meaning
from .keys import catalogue_values
from .maps import MapError, check_maps, parse_maps
from .records import Account, IngestError, Reader, Record, Skip, Step, sqlite_tables, step_of
from .result import Ingested, ingested
from .sink import RunSink

__all__ = ["FORMATS", "KEY_MAP", "IngestError", "Ingested", "MapError", "Meaning", "Tail", "catalogue_values",
           "detect", "ingest_file", "parse_maps", "wait_for_file"]

FORMATS: dict[str, Reader] = {m.NAME: m for m in (wandb_run, swanlab_run, clearml_offline, tensorboard,
                                                    mlflow_store, trackio_db, trainer_state, log_history, json_columns,
                                                    jsonl,
                                                    csv_table, console)}
"""Format name → reader module (each a :class:`.records.Reader`), in the order :func:`detect` tries them."""
HEAD_BYTES = 1024 * 1024  # a console log's first step line may follow a long start-up preamble


def _head(path: Path) -> str:
    if not path.is_file():
        return ""
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
        try:
            return f.read(HEAD_BYTES).decode("utf-8", errors="replace")
        except OSError:  # named .gz but not gzip
            return ""


def _text_chunks(path: Path) -> Iterator[str]:
    """The whole file as text, ``HEAD_BYTES`` at a time, each chunk ending at a line's end."""
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
        rest = b""
        try:
            while block := f.read(HEAD_BYTES):
                block = rest + block
                cut = block.rfind(b"\n") + 1
                rest = block[cut:]
                if cut:
                    yield block[:cut].decode("utf-8", errors="replace")
        except OSError:  # named .gz but not gzip
            return
        if rest:
            yield rest.decode("utf-8", errors="replace")


def _looks_like(reader: Reader, path: Path, head: str) -> bool:
    """``reader.sniff`` on the file's head; for a console log also on the rest of the file, a chunk at a time: its
    first step line may follow a start-up preamble of any length (a SLURM capture of a verl run prints megabytes of
    model loading before step 1)."""
    if reader.sniff(path, head):
        return True
    if reader is not console or not path.is_file() or path.stat().st_size <= HEAD_BYTES:
        return False
    return any(console.sniff(path, chunk) for chunk in _text_chunks(path))


def detect(path: Path, fmt: str | None = None) -> Reader:
    """The reader for ``path``: ``fmt`` when given (checked by the reader), else the first whose ``sniff`` agrees."""
    if not path.exists():
        raise IngestError(f"file {str(path)!r} does not exist")
    if fmt is not None:
        if fmt not in FORMATS:
            raise IngestError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
        return FORMATS[fmt]
    _refuse_empty(path)
    head = _head(path)
    for reader in FORMATS.values():
        if reader.sniff(path, head):
            return reader
    if path.is_dir() and any(tensorboard.is_event_file(p) for p in path.rglob(tensorboard.PATTERN)):
        return tensorboard  # event files in sub-folders: its reader names them
    if _looks_like(console, path, head):
        return console  # step lines after a preamble longer than the head
    tables = sqlite_tables(path)
    if tables is not None:
        raise IngestError(f"{str(path)!r} is a SQLite database but neither MLflow's nor trackio's (its tables: "
                          f"{', '.join(sorted(tables)[:8]) or 'none'}); --format forces one")
    as_csv = csv_table.why_not(head) if path.name.removesuffix(".gz").lower().endswith(".csv") else None
    raise IngestError(f"{str(path)!r} is not a format ingest reads ({', '.join(FORMATS)}); "
                      "--format forces one" + (f"; as csv, {as_csv}" if as_csv else ""))


def _refuse_empty(path: Path) -> None:
    if path.is_file() and path.stat().st_size == 0:
        raise IngestError(f"{str(path)!r} is empty (0 bytes)")


def _sniffed(reader: Reader, path: Path) -> None:
    """A forced text format must still look like itself (``SNIFF_FORCED``; the binary readers check on their own)."""
    if not reader.SNIFF_FORCED:
        return
    _refuse_empty(path)
    head = "" if path.is_dir() else _head(path)
    if path.is_dir() or not _looks_like(reader, path, head):
        why = f": {csv_table.why_not(head)}" if reader is csv_table and not path.is_dir() else \
            " (see collapsewatch ingest --help)"
        raise IngestError(f"{str(path)!r} is not {reader.NAME}{why}")


def ingest_file(store: str | os.PathLike, file: str | os.PathLike, run: str, fmt: str | None = None,
                source_run: str | None = None, run_detectors: bool = False,
                maps: Mapping[str, str] | None = None) -> Ingested:
    """Ingest ``file`` as a new run ``run`` of ``store``; what was read and what was left out. With ``run_detectors`` the
    detectors run over it and their episodes are stored (``collapsewatch detect --write``), so the dashboard shows
    them. ``maps``: the user's own aliases, logged key → catalogue column (:mod:`.maps`)."""
    maps = check_maps(maps or {})
    path = Path(file)
    reader = detect(path, fmt)
    _sniffed(reader, path)
    account, parser = Account(str(path)), reader.Parser() if reader.Parser is not None else None
    steps = account.steps(reader.read(path, source_run=source_run, parser=parser))
    if parser is not None:
        account.notes += parser.notes()
    if not steps:
        raise IngestError(f"{str(path)!r} holds no step rows" + (f" ({account.summary()})" if account.summary()
                                                                   else ""))
    sink = RunSink(store, path, run, reader.NAME, maps)
    sink.add(steps)
    sink.finish()
    return ingested(sink, reader.NAME, account.summary(), store, run_detectors)


_NONE = object()


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)  # NaN == NaN


def wait_for_file(file: str | os.PathLike, interval: float, say: Callable[[str], None],
                  sleep: Callable[[float], None] = time.sleep) -> None:
    """``--follow`` started before the logger created its file (verl's file logger opens it when the trainer starts):
    say so once, then check every ``interval`` seconds until the path exists."""
    path = Path(file)
    if path.exists():
        return
    say(f"{str(path)!r} does not exist yet: waiting for the logger to create it (Ctrl+C to stop)")
    while not path.exists():
        sleep(interval)


class Tail:
    """Follows a run's log while it grows. Each :meth:`poll` ingests what became complete since the last one as one
    flush; :meth:`close` takes the rest and marks the run finished.

    * Text logs (jsonl, console: ``GROWS``) are read from where the last poll stopped; a partial last line (the
      logger mid-write) waits.
    * Every other format (TensorBoard, MLflow, trackio …) is re-read whole through its library's reader, and the steps
      after the last ingested one are taken, except the newest: its values may still be arriving (a logger writes a
      step's keys one call at a time), so it waits until a later step appears or the tail closes. Values a logger
      adds to an already-ingested step are left out and counted. The first read happens at once, so a file that
      is not the format, or a store whose run must be picked with ``source_run``, fails at the start; a later read
      that fails mid-write (a file being replaced, a partial record) is retried at the next poll, and only the
      last read's error is reported, at close.
    """

    def __init__(self, store: str | os.PathLike, file: str | os.PathLike, run: str, fmt: str | None = None,
                 source_run: str | None = None, maps: Mapping[str, str] | None = None) -> None:
        maps = check_maps(maps or {})
        self.path = Path(file)
        if not self.path.exists():
            raise IngestError(f"file {str(self.path)!r} does not exist")
        empty = self.path.is_file() and not self.path.stat().st_size
        self.reader = jsonl if empty and not fmt else detect(self.path, fmt)  # an empty file: verl's JSONL
        if not empty and not (fmt and self.reader.GROWS):  # a forced text log may hold only start-up text so far
            _sniffed(self.reader, self.path)
        self.format = self.reader.NAME
        self.source_run = source_run
        self.store = store
        self.parser: Any = self.reader.Parser() if self.reader.GROWS else None
        """A text log's parser, fed what each poll appends; a format re-read whole: the last good read's (its notes
        are the file's as it is now, as a one-shot ``ingest`` of it says them, never one per read)."""
        # a reader's Snapshot re-reads only what was appended (TensorBoard); the others re-read the whole file
        self._snap: Any = self.reader.Snapshot
        if not self.reader.GROWS:  # a file that is not the format, or a --source-run to pick: said now, not retried
            self._snap = self._snap(self.path, source_run=source_run) if self._snap else None
            self._read()
        self.account = Account(str(self.path))
        try:
            self.sink = RunSink(store, self.path, run, self.reader.NAME, maps)
        except BaseException:
            self._close_snapshot()  # W&B's: a reader process to stop
            raise
        self.sink.flush()  # listed as running before the first line
        self._offset, self._line = 0, 1
        self._last: int | None = None  # snapshot formats: the newest step ingested
        self._got: dict[int, dict[str, Any]] = {}  # snapshot formats: each ingested step's values as read
        self._late: set[tuple[int, str]] = set()  # (step, key) logged or changed after that step was ingested
        self._skips: set[str] = set()
        self._error: str | None = None

    @property
    def steps(self) -> set[int]:
        return self.sink.steps

    def poll(self, final: bool = False) -> int:
        """Ingest what became complete; returns how many steps it held."""
        steps = self._lines(final) if self.reader.GROWS else self._snapshot(final)
        if steps:
            self.sink.add(steps, complete=not self.reader.GROWS)  # a snapshot's steps are whole
            self.sink.flush()
        return len({s.step for s in steps})

    def _lines(self, final: bool) -> list[Step]:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = len(chunk) if final else chunk.rfind(b"\n") + 1  # a partial last line waits, unless this is the last read
        if end == 0:
            return []
        text = chunk[:end].decode(errors="replace")
        self._offset += end
        steps = self.account.steps(self.parser.feed(text, self._line))
        self._line += text.count("\n")
        return steps

    def _snapshot(self, final: bool) -> list[Step]:
        try:
            items = self._read()
        except IngestError as e:
            self._error = str(e)
            return []
        self._error = None
        fresh: list[Record | Skip] = []
        try:
            for item in items:
                if isinstance(item, Record):
                    item.step = step_of(item.step, f"{str(self.path)!r} {item.where}")
        except IngestError as e:
            self._error = str(e)
            return []
        for item in items:
            if isinstance(item, Skip):
                if item.where not in self._skips:
                    self._skips.add(item.where)
                    fresh.append(item)
            elif self._last is None or item.step > self._last:
                fresh.append(item)
            else:
                got = self._got.get(item.step, {})
                self._late.update((item.step, k) for k, v in item.values.items() if not _same(got.get(k, _NONE), v))
        records = [i for i in fresh if isinstance(i, Record)]
        if not final and records:  # the newest step waits for a later one
            newest = max(r.step for r in records)
            fresh = [i for i in fresh if isinstance(i, Skip) or i.step != newest]
        steps = self.account.steps(fresh)
        for r in fresh:
            if isinstance(r, Record):
                self._got.setdefault(r.step, {}).update(r.values)
        if steps:
            self._last = max(s.step for s in steps)
        return steps

    def _read(self) -> list[Record | Skip]:
        if self._snap:
            return list(self._snap.records())
        parser = self.reader.Parser() if self.reader.Parser is not None else None  # fresh: a read is a whole file
        items = list(self.reader.read(self.path, source_run=self.source_run, parser=parser))
        self.parser = parser
        return items

    def _close_snapshot(self) -> list[str]:
        """Stop a snapshot that holds a process (W&B's reader); what it reported."""
        return self._snap.close() if hasattr(self._snap, "close") else []

    def close(self, run_detectors: bool = False) -> Ingested:
        """Take the rest — a text log's last line too, ended or not (a line cut mid-write is skipped and named, as
        ``ingest`` without ``--follow`` does) — and mark the run finished; with ``run_detectors``, judge it as
        :func:`ingest_file` does."""
        try:
            self.poll(final=True)
        finally:
            self.account.notes += self._close_snapshot()
        self.sink.finish()
        if self.parser is not None and hasattr(self.parser, "notes"):
            self.account.notes += self.parser.notes()
        if self._late:
            self.account.notes.append(f"left out {len(self._late)} value(s) logged or changed after their step had "
                                      "been ingested (a resumed run rewinds its steps: ingest it again when it ends)")
        if self._error:
            self.account.notes.append(f"the last read failed: {self._error}")
        return ingested(self.sink, self.format, self.account.summary(), self.store, run_detectors)
