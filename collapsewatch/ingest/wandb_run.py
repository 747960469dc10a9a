"""Weights & Biases run logs: the ``run-<id>.wandb`` file every run leaves on disk, online or offline
(``wandb/run-*/`` or ``wandb/offline-run-*/``), read with wandb's own reader, ``wandb leet inspect --json`` (wandb-core's
transaction-log reader, the one ``wandb sync`` uploads from; wandb ≥ 0.31 — 0.30 removed the Python ``DataStore``).
Its ``history`` records are the rows ``wandb.log`` wrote; a step's rows are merged, a key logged twice at one step
keeping its later value (as wandb itself does for ``log(..., step=s)`` twice). ``--follow`` (:class:`Snapshot`) reads
through the reader's own ``--follow``, so each poll costs only the records written since the last.

FILE is the ``.wandb`` file, its run folder (``wandb/latest-run`` too), or a ``wandb/`` folder: one holding several
runs is refused, naming them, unless ``source_run`` (``--source-run``) names one by run id or folder name.

What a history row holds, as wandb-core prints it:

* the step: HF's ``WandbCallback`` (TRL) and OpenRLHF log the trainer's step as ``train/global_step`` (wandb's
  ``step_sync`` copies it into every row), verl logs ``step=global_step`` so wandb's own ``_step`` is it; the step
  is the first of :data:`.records.STEP_KEYS` a row holds;
* ``_timestamp`` (the wall time) and wandb's other ``_`` keys (``_runtime``, ``_step``) are wandb's bookkeeping;
* a nested dict is flattened with ``.`` (``{"actor": {"entropy": x}}`` → ``actor.entropy``, as W&B's UI names it,
  whichever wandb wrote the file);
  a W&B object (``wandb.Table``, ``Image``, ``Histogram``) is flattened too, as ``<key>._type``, ``<key>.size`` …:
  regrouped here into one value, which is not a number (skipped and counted, never read as a metric);
* NaN and ±Inf are printed as ``"NaN"`` / ``"Infinity"``: numbers.

A file that ends in an incomplete record (a run killed mid-write, or one still writing) keeps the records before it;
wandb's reader says so (it does not say where), and the summary repeats it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .records import IngestError, Record, Skip, flatten, needs, one_run, row_record, step_of

NAME = "wandb"
GROWS = False  # a binary log: followed through :class:`Snapshot`, not read line by line
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
MAGIC = b":W&B\xe1\xbe\x00"
"""A W&B transaction log's header: ident ``:W&B``, magic 0xBEE1 (little-endian), version 0."""
REPORTS = "wandb leet inspect: "
"""wandb's reader's own lines on stderr (an incomplete or corrupt record): the summary's notes."""
OBJECT = "._type"
IDLE = "10m"
"""With ``--follow``, wandb's reader stops after this long without a write to the file (wandb's default). A live run
writes at least its system stats every 15 s; a reader that stopped on a run without its exit record is started again
(its parser merges what it reads twice), and one left behind by a killed ingest stops on its own."""


def _runs(path: Path) -> list[Path]:
    """The .wandb files ``path`` holds: its own, or its run folders' (``latest-run`` counted once)."""
    files = sorted(path.glob("*.wandb")) or sorted(path.glob("*/*.wandb"))
    seen: dict[Path, Path] = {}
    for f in files:
        if not f.parent.is_symlink():  # latest-run links to a run listed under its own name
            seen.setdefault(f.resolve(), f)
    return list(seen.values()) or files


def sniff(path: Path, head: str) -> bool:
    if path.is_dir():
        return bool(_runs(path))
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def run_file(path: Path, source_run: str | None = None) -> Path:
    """The one ``.wandb`` file ``path`` means (see the module docstring); IngestError naming ``path`` otherwise."""
    if not sniff(path, ""):
        raise IngestError(f"{str(path)!r} is not a W&B run log (a run-<id>.wandb file, its run folder or wandb/)")
    if path.is_file():
        return path
    files = _runs(path)
    if len(files) == 1 and source_run is None:
        return files[0]
    by_folder = {f.parent.name: f for f in files}  # a resumed run's folders share its id: the folder is the key
    chosen = one_run(path, "W&B", [(d, f.stem.removeprefix("run-")) for d, f in by_folder.items()], source_run)
    return by_folder[chosen]


class Parser:
    """wandb-core's JSON lines → the run's steps: each ``history`` record a row, merged into its step (every other
    record type passed over). What wandb's reader reported on the way (an incomplete or corrupt record) is collected
    for :meth:`notes`."""

    def __init__(self, file: Path | None = None) -> None:
        self.file = file
        self.reported: list[str] = []
        self.skips: list[Skip] = []
        self.ended = False
        """The run's ``exit`` record was read: nothing more will be written."""
        self.alerts: list[dict[str, Any]] = []
        """The run's ``alert`` records (``Run.alert``: title, text, level), in order."""
        self.summary: dict[str, Any] = {}
        """The run's summary as its ``summary`` records left it (the ``update`` of each, the later winning)."""
        self._steps: dict[int, tuple[str, dict[str, Any], float | None]] = {}  # step → (where, values, wall time)

    def feed(self, lines: Iterable[str], first_line: int = 1) -> None:
        for i, line in enumerate(lines, first_line):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                self.skips.append(Skip(f"output line {i}", "not JSON"))
                continue
            if isinstance(rec, dict) and rec.get("type") == "history" and isinstance(rec.get("history"), dict):
                self._add(_row(rec))
            elif isinstance(rec, dict) and rec.get("type") == "alert" and isinstance(rec.get("alert"), dict):
                self.alerts.append(rec["alert"])
            elif isinstance(rec, dict) and rec.get("type") == "summary" and isinstance(rec.get("summary"), dict):
                self.summary.update(rec["summary"].get("update") or {})
            self.ended |= isinstance(rec, dict) and rec.get("type") == "exit"

    def _add(self, row: Record | Skip) -> None:
        if isinstance(row, Skip):
            self.skips.append(row)
            return
        step = step_of(row.step, f"{str(self.file)!r} {row.where}" if self.file else row.where)
        where, values, wall = self._steps.get(step, (row.where, {}, None))
        values.update(row.values)
        self._steps[step] = (where, values, row.wall_time if wall is None else max(wall, row.wall_time or wall))

    def records(self) -> list[Record | Skip]:
        """The run as read so far: one record per step, in step order, then the rows that were skipped."""
        out: list[Record | Skip] = [Record(w, s, dict(v), t) for s, (w, v, t) in sorted(self._steps.items())]
        return out + list(self.skips)

    def notes(self) -> list[str]:
        return self.reported


def _row(rec: dict[str, Any]) -> Record | Skip:
    item = dict(rec["history"].get("item") or {})
    for key in [k for k in item if k.endswith(OBJECT)]:  # a W&B object's fields, back into one value
        name = key[: -len(OBJECT)]
        item[name] = {k[len(name) + 1:]: item.pop(k) for k in list(item) if k.startswith(name + ".")}
    # wandb-core writes a nested dict's keys as one path, printed joined with "."; older wandb (≤ 0.16's Python
    # writer) kept the dict as one JSON value: joined with "." too, so both name it as W&B's UI does
    out = row_record(dict(flatten(item, sep=".")), f"record {rec.get('num', '?')}")
    if isinstance(out, Record):
        stamp = out.values.get("_timestamp")
        out.wall_time = float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
        out.values = {k: v for k, v in out.values.items() if not k.startswith("_")}
    return out


def _start(file: Path, follow: bool, stderr: IO[str]) -> subprocess.Popen:
    # only wandb's CLI is run (the reader lives in wandb-core, its Go backend); importing wandb here would wrap this
    # process's stdout and stderr (its console capture)
    if importlib.util.find_spec("wandb") is None:
        raise needs("wandb", "a W&B run log")
    argv = [sys.executable, "-m", "wandb", "leet", "inspect", "--json"]
    if follow:
        argv += ["--follow", "--idle-timeout", IDLE]
    # offline and no error reporting: wandb's CLI then tells wandb-core not to upload telemetry (nothing leaves
    # the machine);
    # silent: no banner on stderr. This process's other WANDB_* variables are dropped: wandb sets some in a process
    # that ran wandb (a training run that reported to W&B, then ingested), and reading a local file needs none
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}, "WANDB_MODE": "offline",
           "WANDB_ERROR_REPORTING": "false", "WANDB_SILENT": "true"}
    # its own process group: wandb's CLI runs wandb-core as a child, and both must stop when the read stops early
    return subprocess.Popen([*argv, str(file)], stdout=subprocess.PIPE, stderr=stderr, env=env,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _notes(stderr: str) -> list[str]:
    """wandb's reader's reports, each once (a restarted reader may say the same again)."""
    lines = [ln.removeprefix(REPORTS) for ln in stderr.splitlines() if ln.startswith(REPORTS)]
    return ["wandb's reader: " + ln for ln in dict.fromkeys(lines)]


def _failure(file: Path, stderr: str) -> IngestError:
    last = next((ln for ln in reversed(stderr.splitlines()) if ln.strip()), "no message")
    return IngestError(f"{str(file)!r} could not be read by wandb's reader: {last.removeprefix('Error: ')}")


def read(path: Path, source_run: str | None = None, parser: Parser | None = None,
         **_: Any) -> Iterator[Record | Skip]:
    """The steps of the run ``path`` means, read whole by wandb's reader; its reports land on ``parser``."""
    file = run_file(path, source_run)
    parser = parser if parser is not None else Parser()
    parser.file = file
    with tempfile.TemporaryFile("w+") as err:  # stderr to a file: a pipe left unread could fill and stall it
        proc = _start(file, False, err)
        try:
            assert proc.stdout is not None
            parser.feed(line.decode(errors="replace") for line in proc.stdout)
            rc = proc.wait(timeout=60)  # its output has ended: it is exiting
        finally:
            _stop(proc)
        err.seek(0)
        stderr = err.read()
    if rc != 0:
        raise _failure(file, stderr)
    parser.reported += _notes(stderr)
    yield from parser.records()


class Snapshot:
    """A live run as read so far (``--follow``): wandb's reader follows the run's file (``--follow``), and each
    :meth:`records` parses only the records it has printed since the last call, without waiting. The file grows each
    time wandb flushes it (every 15 s by default, ``x_transaction_log_flush_interval``). :meth:`close` stops the
    reader."""

    def __init__(self, path: Path, source_run: str | None = None, **_: Any) -> None:
        self.file = run_file(path, source_run)
        self.parser = Parser(self.file)
        self._err = tempfile.TemporaryFile("w+")
        self._start()

    def _start(self) -> None:
        self._proc = _start(self.file, True, self._err)
        assert self._proc.stdout is not None
        self._fd = self._proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._partial, self._line = b"", 1

    def records(self) -> list[Record | Skip]:
        chunks = [self._partial]
        while True:
            try:
                chunk = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:  # the reader has exited: the run finished, or the reader failed
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        lines = data[:end].decode(errors="replace").splitlines()
        self.parser.feed(lines, self._line)
        self._line += len(lines)
        rc = self._proc.poll()
        if rc not in (None, 0):
            self._err.seek(0)
            raise _failure(self.file, self._err.read())
        if rc == 0 and not self.parser.ended:  # stopped idle on a run that has not ended: read it again
            _stop(self._proc)
            self._start()
        return self.parser.records()

    def close(self) -> list[str]:
        """Stop the reader; what it reported (an incomplete or corrupt record)."""
        _stop(self._proc)
        self._err.seek(0)
        notes = _notes(self._err.read())
        self._err.close()
        return notes
