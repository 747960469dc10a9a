"""TensorBoard sink (``--to tensorboard:DIR``): each collapsewatch run writes ``DIR/<run>/`` with PyTorch's
``torch.utils.tensorboard.SummaryWriter`` (TensorBoard's event files; needs the ``tensorboard`` package).

* TEXT tab: ``collapsewatch/events`` — each reported episode's headline at its ``step_end``; ``collapsewatch/verdict``
  — the verdict's sentence, and ``collapsewatch/episodes`` — the episodes table (markdown), at the run's last step;
* SCALARS tab: ``collapsewatch/episode_severity`` (:mod:`collapsewatch.sinks.tracker`).

Point TensorBoard at DIR (or at the folder holding the trainer's own log dir and DIR) to see them beside the
trainer's curves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import SEVERITY_SCALAR
from .tracker import EPISODE_COLUMNS, TrackerSink

EVENTS_TAG, VERDICT_TAG, EPISODES_TAG = "collapsewatch/events", "collapsewatch/verdict", "collapsewatch/episodes"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The episodes as a markdown table (TensorBoard's text plugin renders markdown)."""
    head = "| " + " | ".join(EPISODE_COLUMNS) + " |\n|" + "---|" * len(EPISODE_COLUMNS)
    body = ["| " + " | ".join(str(r[c]).replace("|", "\\|") for c in EPISODE_COLUMNS) + " |" for r in rows]
    return "\n".join([head, *body]) if rows else "no episode"


class TensorBoardSink(TrackerSink):
    name = "tensorboard"

    def __init__(self, logdir: str | os.PathLike | None) -> None:
        super().__init__(str(logdir) if logdir else None)
        if not logdir:
            raise ValueError("the tensorboard sink needs a folder: tensorboard:DIR")
        self.logdir = Path(logdir)

    def _open(self, run: str) -> Any:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(log_dir=str(self.logdir / run))

    def _event(self, handle: Any, row: dict[str, Any], text: str) -> None:
        handle.add_text(EVENTS_TAG, text, global_step=int(row["step_end"]))

    def _severity(self, handle: Any, step: int, value: int) -> None:
        handle.add_scalar(SEVERITY_SCALAR, value, global_step=step)

    def _verdict(self, handle: Any, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        handle.add_text(VERDICT_TAG, f"**{verdict['status']}** — {verdict['sentence']}", global_step=step or 0)
        handle.add_text(EPISODES_TAG, markdown_table(table), global_step=step or 0)

    def _flush(self, handle: Any) -> None:
        handle.flush()

    def _finish(self, handle: Any) -> None:
        handle.close()
