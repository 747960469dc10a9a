"""trackio sink (``--to trackio[:PROJECT]``), on trackio's public API (``trackio.init``, ``Run.alert``, ``Run.log``,
``trackio.Table``; trackio ≥ 0.43, whose ``alert`` this uses).

Where it writes: without a PROJECT, trackio's current run (TRL's ``report_to="trackio"`` opens it, through
``trackio.alert`` / ``trackio.log``), else — no trackio run open in this thread, as in ``collapsewatch watch`` — as
with a PROJECT in the project ``collapsewatch`` (the W&B sink's default); with one, one trackio run per collapsewatch
run, named after it, in PROJECT (trackio's own settings apply: its local SQLite store under ``$TRACKIO_DIR`` unless a
Space or server is set).

What it writes:

* ``alert`` for each reported episode — level INFO / WARN / ERROR for info / warning / critical, title
  ``collapsewatch <severity>: <run> <detector>/<phase> from step <step_start>``, text its headline, at its
  ``step_end`` (the dashboard's alerts panel; trackio's webhook forwards them if one is set);
* ``collapsewatch/episode_severity`` at each reported ``step_end``;
* at the verdict: one more alert (title ``collapsewatch verdict: <status>``, the verdict's sentence, at the level of
  the worst severity) and the table ``collapsewatch/episodes``, at the run's last step.
"""

from __future__ import annotations

from typing import Any

from .base import SEVERITY_SCALAR
from .tracker import Handle, TrackerSink
from .wandb import EPISODES_KEY, PROJECT, alert_title


def _level(severity: str | None) -> Any:
    import trackio

    return {"critical": trackio.AlertLevel.ERROR, "warning": trackio.AlertLevel.WARN}.get(str(severity),
                                                                                           trackio.AlertLevel.INFO)


class TrackioSink(TrackerSink):
    name = "trackio"
    _latest: Any = None  # the run this sink's last trackio.init made (trackio's current run)

    def _open(self, run: str) -> Handle:
        import trackio
        from trackio import context_vars

        current = context_vars.current_run.get()  # trackio's current run (trackio.alert / log write to it)
        if self.where is None and current is not None and current is not self._latest:
            return Handle(None, own=False)  # someone else's (TRL's report_to): written into, never finished
        self._latest = trackio.init(project=self.where or PROJECT, name=run, resume="allow",
                                    config={"collapsewatch_run": run})
        return Handle(self._latest, own=True)

    def _alert(self, handle: Handle, title: str, text: str, severity: str | None, step: int | None) -> None:
        import trackio

        if handle.run is None:
            trackio.alert(title=title, text=text, level=_level(severity))  # at trackio's current step
        else:
            handle.run.alert(title=title, text=text, level=_level(severity), step=step)

    def _log(self, handle: Handle, values: dict[str, Any], step: int | None) -> None:
        import trackio

        (trackio.log if handle.run is None else handle.run.log)(values, step=step)

    def _event(self, handle: Handle, row: dict[str, Any], text: str) -> None:
        self._alert(handle, alert_title(row), text, str(row["severity"]), int(row["step_end"]))

    def _severity(self, handle: Handle, step: int, value: int) -> None:
        self._log(handle, {SEVERITY_SCALAR: value}, step)

    def _verdict(self, handle: Handle, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        import pandas as pd
        import trackio

        self._alert(handle, f"collapsewatch verdict: {verdict['status']}", str(verdict["sentence"]),
                    verdict.get("worst"), step)
        if table:
            self._log(handle, {EPISODES_KEY: trackio.Table(dataframe=pd.DataFrame(table))}, step)

    def _finish(self, handle: Handle) -> None:
        import trackio

        if handle.own and handle.run is self._latest:
            trackio.finish()  # trackio's current run: finished and let go (else its exit hook finishes it again)
            self._latest = None
        elif handle.own:
            handle.run.finish()
