"""SwanLab run logs: the ``run-<id>.swanlab`` file every run leaves in its run folder
(``<logdir>/run-<time>-<id>/``; verl's logger: ``SWANLAB_LOG_DIR``, ``swanlog`` by default), in every mode that
keeps data on disk (``offline``, ``local``, and ``cloud``'s local copy), read with swanlab's own reader — the
``DataStoreReader`` and ``Record`` messages ``swanlab sync`` replays the file with (swanlab ≥ 0.10; internals a minor
may move, checked on 0.10.3). Its ``scalar`` records are the numbers ``swanlab.log`` wrote, each at its step and
time; ``media`` records (verl's validation generations as an ``echarts.Table``, images, text) are one value each
that is not a number (skipped and counted, never read as a metric).

What swanlab itself does before writing, so the file holds it already done: a nested dict is flattened with ``/``
(``{"perf": {"throughput": x}}`` → ``perf/throughput``); a boolean is written as 0 / 1; a string is refused at log
time (not in the file); a key logged twice at one step keeps its first value. NaN and ±Inf are written as numbers.

FILE is the ``.swanlab`` file, its run folder, or the log dir: one holding several runs is refused, naming them,
unless ``source_run`` (``--source-run``) names one by folder name, run id or experiment name.

A file that ends without swanlab's finish record (a run still writing — swanlab flushes only when its buffer fills
and at the end — or one killed mid-write) keeps the records before the first incomplete one, and the summary says
so; so does a run swanlab marked as crashed. A file written by a swanlab whose record format differs (swanlab's
reader reads only its own header version) is refused with swanlab's own reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, needs, one_run

NAME = "swanlab"
GROWS = False  # a binary log: re-read through swanlab's reader at each poll of --follow
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
MAGIC = b":SWL\xd6\xe1"
"""A SwanLab run log's header: ident ``:SWL``, magic 0xE1D6 (little-endian); a version byte follows."""
EXTRA = "swanlab"
"""The extra that installs swanlab (not in ``ingest``: swanlab 0.10 requires protobuf < 7)."""


def _is_log(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def _runs(path: Path) -> list[Path]:
    """The run logs ``path`` holds: its own ``*.swanlab`` or its run folders'."""
    own = [f for f in sorted(path.glob("*.swanlab")) if _is_log(f)]
    return own or [f for f in sorted(path.glob("*/*.swanlab")) if _is_log(f)]


def sniff(path: Path, head: str) -> bool:
    return bool(_runs(path)) if path.is_dir() else _is_log(path)


class Parser:
    """The run as swanlab's reader hands it over: scalars merged into their steps, media counted as values that are
    not numbers, and what the file says about how the run ended (:meth:`notes`)."""

    def __init__(self) -> None:
        self.ended: str | None = None
        """The finish record's state ("FINISHED", "CRASHED" …); None: no finish record (yet)."""
        self._steps: dict[int, tuple[dict[str, Any], float]] = {}

    def add(self, record: Any) -> None:
        kind = record.WhichOneof("record_type")
        if kind in ("scalar", "media"):
            data = getattr(record, kind)
            value: Any = data.value.number if kind == "scalar" else {"_type": _media_type(data)}
            values, wall = self._steps.setdefault(data.step, ({}, 0.0))
            values[data.key] = value
            stamp = data.timestamp.seconds + data.timestamp.nanos / 1e9
            self._steps[data.step] = (values, max(wall, stamp))
        elif kind == "finish":
            self.ended = _state(record.finish.state)

    def records(self) -> list[Record]:
        return [Record(f"step {step}", step, dict(values), wall or None)
                for step, (values, wall) in sorted(self._steps.items())]

    def notes(self) -> list[str]:
        if self.ended is None:
            return ["no finish record: the run is still writing, or was killed (swanlab writes in buffered chunks); "
                    "the records before the first incomplete one are kept"]
        return [] if self.ended == "FINISHED" else [f"swanlab marked the run {self.ended.lower()}"]


def _media_type(data: Any) -> str:
    from swanlab.proto.swanlab.metric.column.v1.column_pb2 import ColumnType

    return "swanlab-" + ColumnType.Name(data.type).removeprefix("COLUMN_TYPE_").lower()  # "swanlab-echarts" …


def _state(state: int) -> str:
    from swanlab.proto.swanlab.run.v1.run_pb2 import RunState

    return RunState.Name(state).removeprefix("RUN_STATE_")


def _start(file: Path) -> tuple[str, str]:
    """(run id, experiment name) of a run log's start record ("", "" when it has none)."""
    for record in _scan(file):
        if record.WhichOneof("record_type") == "start":
            return record.start.id, record.start.name
        break
    return "", ""


def run_file(path: Path, source_run: str | None = None) -> Path:
    """The one ``.swanlab`` file ``path`` means (see the module docstring); IngestError naming ``path`` otherwise."""
    if not sniff(path, ""):
        raise IngestError(f"{str(path)!r} is not a SwanLab run log (a run-<id>.swanlab file, its run folder or the "
                          "log dir)")
    if path.is_file():
        return path
    files = {f.parent.name if f.parent != path else f.name: f for f in _runs(path)}
    if len(files) == 1 and source_run is None:
        return next(iter(files.values()))
    starts = {folder: _start(f) for folder, f in files.items()}
    by_id = [folder for folder, (rid, _) in starts.items() if rid and rid == source_run]
    if len(by_id) == 1:
        return files[by_id[0]]
    return files[one_run(path, "SwanLab", [(folder, name or folder) for folder, (_, name) in starts.items()],
                         source_run)]


def _scan(file: Path) -> Iterator[Any]:
    """Every record of a run log, in order, through swanlab's own reader; it stops before the first incomplete or
    corrupt record."""
    try:
        from swanlab.exceptions import DataStoreError
        from swanlab.proto.swanlab.record.v1.record_pb2 import Record as SwanRecord
        from swanlab.sdk.internal.core_python.store import DataStoreReader
    except ImportError:
        raise needs("swanlab", "a SwanLab run log", EXTRA) from None
    reader = DataStoreReader()
    try:
        reader.open(file)
    except (DataStoreError, AssertionError, OSError) as e:  # its header checks: another format version, a cut header
        raise IngestError(f"{str(file)!r} could not be read by swanlab's reader: "
                          f"{str(e).splitlines()[0] if str(e) else 'incomplete header'}") from None
    try:
        for data in reader:
            record = SwanRecord()
            try:
                record.ParseFromString(data)
            except Exception as e:  # protobuf's DecodeError: a record swanlab's checksum let through
                raise IngestError(f"{str(file)!r} holds a record swanlab's messages cannot parse: {e}") from None
            yield record
    finally:
        reader.close()


def read(path: Path, source_run: str | None = None, parser: Parser | None = None, **_: Any) -> Iterator[Record]:
    file = run_file(path, source_run)
    parser = parser or Parser()
    for record in _scan(file):
        parser.add(record)
    yield from parser.records()


Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
