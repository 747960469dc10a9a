"""SwanLab sink (``--to swanlab[:PROJECT]``), on swanlab's public run API (``swanlab.init``, ``Run.log_text``,
``Run.log``; swanlab 0.10). SwanLab has no alert call: each episode is a text entry instead (its *Text* panel), the
nearest public equivalent.

Where it writes: without a PROJECT, the run open in this process (``swanlab.get_run()``: verl's and TRL's swanlab
loggers open it), else a new one; with one, one SwanLab run per collapsewatch run (one at a time: swanlab keeps a
single active run, so a second collapsewatch run finishes the first's), named after it, in PROJECT (default
``collapsewatch``), mode ``$SWANLAB_MODE`` or ``offline`` (written to disk only; ``swanlab sync`` uploads it). With a
PROJECT while another SwanLab run is open (a trainer's), the sink refuses (logged once) rather than end that run.

What it writes:

* text ``collapsewatch/events`` — each reported episode's headline, at its ``step_end``;
* ``collapsewatch/episode_severity`` at each reported ``step_end``;
* at the verdict: text ``collapsewatch/verdict`` (status and sentence) and text ``collapsewatch/episodes`` (one entry
  per episode: its headline), at the run's last step.
"""

from __future__ import annotations

import os
from typing import Any

from .base import SEVERITY_SCALAR
from .tensorboard import EPISODES_TAG, EVENTS_TAG, VERDICT_TAG
from .tracker import Handle, TrackerSink

PROJECT = "collapsewatch"



class SwanLabSink(TrackerSink):
    name = "swanlab"

    def _open(self, run: str) -> Handle:
        import swanlab

        if self.where is None and swanlab.has_run():
            return Handle(swanlab.get_run(), own=False)
        for other, handle in list(self._handles.items()):  # swanlab keeps one active run
            if handle.own:
                self._finish(self._handles.pop(other))
        if swanlab.has_run():  # someone else's (a trainer's logger): a new run would finish it
            raise RuntimeError("a SwanLab run is already open in this process and swanlab keeps one: use --to "
                               "swanlab without a PROJECT to write into it")
        mode = os.environ.get("SWANLAB_MODE", "offline")
        return Handle(swanlab.init(project=self.where or PROJECT, name=run, mode=mode,
                                   config={"collapsewatch_run": run}), own=True)

    def _event(self, handle: Handle, row: dict[str, Any], text: str) -> None:
        handle.run.log_text(key=EVENTS_TAG, data=text, step=int(row["step_end"]))

    def _severity(self, handle: Handle, step: int, value: int) -> None:
        handle.run.log({SEVERITY_SCALAR: value}, step=step)

    def _verdict(self, handle: Handle, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        handle.run.log_text(key=VERDICT_TAG, data=f"{verdict['status']}: {verdict['sentence']}", step=step)
        if table:
            handle.run.log_text(key=EPISODES_TAG, data=[r["text"] for r in table], step=step)

    def _finish(self, handle: Handle) -> None:
        if handle.own:
            handle.run.finish()
