"""`collapsewatch ingest`: a run made without the monitor, read from the logs it left, judged like any other.

    collapsewatch ingest STORE FILE --run NAME [--format F] [--follow] [--source-run R]

How it reads (one module per format, each with ``sniff`` and ``read``; :data:`FORMATS`):

* ``trainer_state`` — HF Trainer / TRL ``trainer_state.json`` (:mod:`.trainer_state`);
* ``jsonl`` — ``{"step": N, …}`` lines and verl's file logger (:mod:`.jsonl`);
* ``console`` — verl's ``step:N - key:value - …`` lines and HF / TRL's printed dicts, saved with ``tee``
  (:mod:`.console`);
* ``tensorboard`` — event files, via TensorBoard's ``EventAccumulator`` (:mod:`.tensorboard`);
* ``mlflow`` — a local ``mlruns/`` folder, via ``MlflowClient`` (:mod:`.mlflow_folder`);
* ``trackio`` — a project's ``.db``, via trackio's ``SQLiteStorage`` (:mod:`.trackio_db`).

The format is detected from the file (:func:`detect`); ``--format`` forces one, and a file that is not that format
says so in one line naming it. Every reader yields :class:`.records.Record` rows; :class:`.records.Account` turns
them into steps and counts what it leaves out; :class:`.sink.RunSink` writes the run: every value under its
logged key, and the catalogue columns the keys mean (:mod:`.keys`, the one home of that mapping), so an ingested
run's ``steps`` carry ``entropy_mean``, ``reward_mean``, ``response_length_mean`` … for the detectors and the
dashboard. Per-token metrics cannot be recovered from logs: NULL.

``--follow`` (:class:`Tail`) tails a growing JSONL or console file: each poll ingests the complete lines appended
since the last one as one flush; the run stays ``running`` until the tail stops.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from . import console, jsonl, mlflow_folder, tensorboard, trackio_db, trainer_state
from .keys import KEY_MAP, Meaning, catalogue_values
from .records import Account, IngestError
from .sink import RunSink

__all__ = ["FORMATS", "KEY_MAP", "IngestError", "Ingested", "Meaning", "Tail", "catalogue_values", "detect",
           "ingest_file"]

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (tensorboard, mlflow_folder, trackio_db, trainer_state, jsonl,
                                                       console)}
"""Format name → reader module, in the order :func:`detect` tries them."""
HEAD_BYTES = 1024 * 1024  # a console log's first step line may follow a long start-up preamble


@dataclass
class Ingested:
    format: str
    steps: int
    summary: str
    """What was left out or noted (empty: every row and value was kept)."""
    flagged: list[str] | None = None
    """With ``run_detectors``: the warning / critical episodes the detectors stored ("entropy/collapse @77"); None: not run."""

    def message(self, run: str) -> str:
        out = f"ingested {self.steps} step(s) of {self.format} into run {run!r}" + (
            f"; {self.summary}" if self.summary else "")
        if self.flagged is not None:
            out += "\ndetectors: " + (", ".join(self.flagged) if self.flagged else "no warning") + (
                f" (details: collapsewatch detect STORE --run {run})")
        return out


def _head(path: Path) -> str:
    if not path.is_file():
        return ""
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
        try:
            return f.read(HEAD_BYTES).decode("utf-8", errors="replace")
        except OSError:  # named .gz but not gzip
            return ""


def detect(path: Path, fmt: str | None = None) -> ModuleType:
    """The reader for ``path``: ``fmt`` when given (checked by the reader), else the first whose ``sniff`` agrees."""
    if not path.exists():
        raise IngestError(f"file {str(path)!r} does not exist")
    if fmt is not None:
        if fmt not in FORMATS:
            raise IngestError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
        return FORMATS[fmt]
    head = _head(path)
    if path.is_dir() and any(path.rglob(tensorboard.PATTERN)):
        return tensorboard  # event files in sub-folders: its reader names them
    for reader in FORMATS.values():
        if reader.sniff(path, head):
            return reader
    raise IngestError(f"{str(path)!r} is not a format ingest reads ({', '.join(FORMATS)}); "
                      "--format forces one")


def _sniffed(reader: ModuleType, path: Path) -> None:
    """A forced line format must still look like itself (the binary readers check on their own)."""
    if reader.NAME in ("jsonl", "console", "trainer_state") and (path.is_dir() or not reader.sniff(path, _head(path))):
        raise IngestError(f"{str(path)!r} is not {reader.NAME} (see collapsewatch ingest --help)")


def ingest_file(store: str | os.PathLike, file: str | os.PathLike, run: str, fmt: str | None = None,
                source_run: str | None = None, run_detectors: bool = False) -> Ingested:
    """Ingest ``file`` as a new run ``run`` of ``store``; what was read and what was left out. With ``run_detectors`` the
    detectors run over it and their episodes are stored (``collapsewatch detect --write``), so the dashboard shows
    them."""
    path = Path(file)
    reader = detect(path, fmt)
    _sniffed(reader, path)
    account, parser = Account(str(path)), console.Parser() if reader is console else None
    steps = account.steps(reader.read(path, source_run=source_run, parser=parser))
    if parser is not None:
        account.notes += parser.notes()
    if not steps:
        raise IngestError(f"{str(path)!r} holds no step rows" + (f" ({account.summary()})" if account.summary()
                                                                   else ""))
    sink = RunSink(store, path, run, reader.NAME)
    sink.add(steps)
    sink.finish()
    return Ingested(reader.NAME, len(sink.steps), account.summary(), _detect(store, run) if run_detectors else None)


def _detect(store: str | os.PathLike, run: str) -> list[str]:
    from ..offline import detect_runs

    events = detect_runs(store, run=run, write=True)
    flagged = events[events["severity"] != "info"].groupby(["detector", "phase", "severity"]).step_start.min()
    return [f"{d}/{p} {sev} @{step}" for (d, p, sev), step in sorted(flagged.items(), key=lambda kv: kv[1])]


class Tail:
    """Follows a growing JSONL or console file. Each :meth:`poll` ingests the complete lines appended since the last
    one as one flush; :meth:`close` marks the run finished. A partial last line (the logger mid-write) waits."""

    def __init__(self, store: str | os.PathLike, file: str | os.PathLike, run: str, fmt: str | None = None) -> None:
        self.path = Path(file)
        reader = detect(self.path, fmt) if self.path.stat().st_size or fmt else jsonl  # an empty file: verl's JSONL
        if not reader.GROWS:
            raise IngestError(f"--follow reads growing text logs (jsonl, console); {str(self.path)!r} is "
                              f"{reader.NAME}")
        self.format = reader.NAME
        self.parser: Any = reader.Parser()
        self.account = Account(str(self.path))
        self.sink = RunSink(store, self.path, run, reader.NAME)
        self.sink.flush()  # listed as running before the first line
        self._offset, self._line = 0, 1

    @property
    def steps(self) -> set[int]:
        return self.sink.steps

    def poll(self) -> int:
        """Ingest the new complete lines; returns how many steps they held."""
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            return 0
        text = chunk[:end].decode(errors="replace")
        self._offset += end
        steps = self.account.steps(self.parser.feed(text, self._line))
        self._line += text.count("\n")
        if steps:
            self.sink.add(steps)
            self.sink.flush()
        return len({s.step for s in steps})

    def close(self) -> Ingested:
        self.poll()
        self.sink.finish()
        notes = self.parser.notes() if hasattr(self.parser, "notes") else []
        self.account.notes += notes
        return Ingested(self.format, len(self.sink.steps), self.account.summary())
