"""TensorBoard event files (HF Trainer's / TRL's ``TensorBoardCallback``, verl's and OpenRLHF's tensorboard
loggers, Keras' ``TensorBoard`` callback), read with TensorBoard's own reader — the ``EventAccumulator`` of
``plugin_event_accumulator``, the one the TensorBoard server reads with: every scalar of every tag, at its step and wall
time. A scalar is either a ``simple_value`` (``torch.utils.tensorboard``'s ``add_scalar``, tensorboardX, TF1) or a
rank-0 tensor of the scalars plugin (TF2's ``tf.summary.scalar``, ``add_scalar(..., new_style=True)``); TensorBoard
turns the first into the second as it reads (``data_compat``), so both are read alike. Other plugins' tensors
(histograms, images, text) are not scalars: left out.

FILE is an event file or the folder holding them (the log dir). An event file is what TensorBoard's own reader takes
for one — a name holding ``tfevents`` (``events.out.tfevents.*`` as written; a copy renamed
``events.grpoout.tfevents.*`` too) — whose first record is an event (a TFRecord holding ``brain.Event:``, the file
version every writer puts first): content, not the name alone. A folder whose event files sit only in sub-folders
(several runs) is refused, naming them: pass one.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import IngestError, Record, needs

NAME = "tensorboard"
GROWS = False
SNIFF_FORCED = False  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
SCALARS_PLUGIN = "scalars"
"""The plugin name of a scalar summary's metadata (``tensorboard/plugins/scalar/metadata.py``, ``PLUGIN_NAME``)."""
PATTERN = "*tfevents*"
"""What TensorBoard's reader takes for an event file in a log dir (``IsTensorFlowEventsFile``: the name holds it)."""


def is_event_file(path: Path) -> bool:
    """A file whose name holds ``tfevents`` and whose first TFRecord (8-byte little-endian length, 4-byte CRC, the
    data) is an event carrying the writer's ``brain.Event:`` file version."""
    if "tfevents" not in path.name or not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(12)
            if len(head) < 12:
                return False
            (n,) = struct.unpack("<Q", head[:8])
            return n <= 4096 and b"brain.Event:" in f.read(n)
    except OSError:
        return False


def sniff(path: Path, head: str) -> bool:
    return is_event_file(path) or (path.is_dir() and any(is_event_file(p) for p in path.glob(PATTERN)))


class Snapshot:
    """The run as read so far; each :meth:`records` reads only the events appended since the previous call
    (``EventAccumulator.Reload`` keeps its place in the files), so following a live run costs its new events."""

    def __init__(self, path: Path, **_: Any) -> None:
        try:
            from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
            from tensorboard.util.tensor_util import make_ndarray
        except ImportError:
            raise needs("tensorboard", "TensorBoard files") from None
        if path.is_dir() and not any(is_event_file(p) for p in path.glob(PATTERN)):
            runs = sorted({str(p.parent) for p in path.rglob(PATTERN) if is_event_file(p)})
            raise IngestError(f"{str(path)!r} holds no event file" + (
                f"; its sub-folders hold runs: {', '.join(runs[:5])}: ingest one" if runs else ""))
        if not sniff(path, ""):
            raise IngestError(f"{str(path)!r} is not a TensorBoard event file (a name holding 'tfevents', its first "
                              "record an event) or log dir")
        self.path, self._array = path, make_ndarray
        # the scalars plugin's points, every one (0: not a reservoir sample); the other plugins' at their defaults
        self._acc = EventAccumulator(str(path), tensor_size_guidance={SCALARS_PLUGIN: 0})

    def records(self) -> list[Record]:
        try:
            self._acc.Reload()
        except Exception as e:  # a corrupt record: TensorBoard's reader raises its own errors
            raise IngestError(f"{str(self.path)!r} could not be read as TensorBoard events: {e}") from None
        steps: dict[int, dict[str, float]] = defaultdict(dict)
        times: dict[int, float] = {}
        tags = self._acc.PluginTagToContent(SCALARS_PLUGIN) if SCALARS_PLUGIN in self._acc.ActivePlugins() else {}
        for tag in tags:
            for ev in self._acc.Tensors(tag):
                value = self._array(ev.tensor_proto)
                if value.size != 1:  # a scalar summary is one number (rank 0); anything else is none
                    continue
                steps[ev.step][tag] = float(value.reshape(()))
                times[ev.step] = max(times.get(ev.step, ev.wall_time), ev.wall_time)
        return [Record(f"step {step}", step, steps[step], times[step]) for step in sorted(steps)]


def read(path: Path, **_: Any) -> Iterator[Record]:
    yield from Snapshot(path).records()


Parser = None  # no parser of its own (collapsewatch.ingest.records.Reader)
