"""Weights & Biases sink (``--to wandb[:PROJECT]``), on wandb's public run API (``wandb.init``, ``Run.alert``,
``Run.log``, ``Run.summary``, ``wandb.Table``; wandb ≥ 0.31).

Where it writes: without a PROJECT, the run already open in this process (``wandb.run``: TRL's
``report_to="wandb"`` opens it), else a new run; with one (or when none is open), one wandb run per collapsewatch run,
named after it, in PROJECT (default ``collapsewatch``). wandb's own settings apply (``WANDB_MODE=offline`` writes
only ``wandb/offline-run-*``; ``wandb sync`` uploads it later).

What it writes:

* ``Run.alert`` for each episode reported at warning (level WARN) or critical (level ERROR): title
  ``collapsewatch <severity>: <run> <detector>/<phase> from step <step_start>``, text its headline — W&B e-mails /
  Slacks it as the user's alert settings say;
* ``collapsewatch/episode_severity`` on the ``collapsewatch/step`` axis (``define_metric``), at each reported ``step_end``;
* at the verdict: summary ``collapsewatch/verdict`` (status), ``collapsewatch/verdict_sentence``,
  ``collapsewatch/worst``, ``collapsewatch/n_episodes``, and the table ``collapsewatch/episodes``.
"""

from __future__ import annotations

from typing import Any

from ..detectors.events import SEVERITY_RANK
from .base import SEVERITY_SCALAR, STEP_SCALAR
from .tracker import Handle, TrackerSink

PROJECT = "collapsewatch"
EPISODES_KEY = "collapsewatch/episodes"
SUMMARY = "collapsewatch/"
ALERT_FROM = "warning"
"""The least severity that raises a W&B alert (info episodes get the severity point only)."""



def alert_title(row: dict[str, Any]) -> str:
    """One title per (run, episode, severity): wandb holds back an alert whose title repeats within its wait."""
    return (f"collapsewatch {row['severity']}: {row.get('run')} {row['detector']}/{row['phase']} "
            f"from step {int(row['step_start'])}")


class WandbSink(TrackerSink):
    name = "wandb"

    def _open(self, run: str) -> Handle:
        import wandb

        if self.where is None and wandb.run is not None:
            handle = Handle(wandb.run, own=False)
        else:
            handle = Handle(wandb.init(project=self.where or PROJECT, name=run, reinit="create_new",
                                     config={"collapsewatch_run": run}), own=True)
        handle.run.define_metric(STEP_SCALAR, hidden=True)
        handle.run.define_metric(SEVERITY_SCALAR, step_metric=STEP_SCALAR)
        return handle

    def _event(self, handle: Handle, row: dict[str, Any], text: str) -> None:
        import wandb

        sev = str(row["severity"])
        if SEVERITY_RANK[sev] >= SEVERITY_RANK[ALERT_FROM]:
            level = wandb.AlertLevel.ERROR if sev == "critical" else wandb.AlertLevel.WARN
            handle.run.alert(title=alert_title(row), text=text, level=level)

    def _severity(self, handle: Handle, step: int, value: int) -> None:
        handle.run.log({STEP_SCALAR: step, SEVERITY_SCALAR: value}, commit=True)

    def _verdict(self, handle: Handle, verdict: dict[str, Any], table: list[dict[str, Any]], step: int | None) -> None:
        import wandb

        handle.run.summary.update({SUMMARY + "verdict": verdict["status"],
                                   SUMMARY + "verdict_sentence": verdict["sentence"],
                                   SUMMARY + "worst": verdict.get("worst"),
                                   SUMMARY + "n_episodes": verdict["n_episodes"]})
        if table:
            cols = list(table[0])
            at = {} if step is None else {STEP_SCALAR: step}  # on the severity's axis, at the run's last step
            handle.run.log({EPISODES_KEY: wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in table]),
                            **at})

    def _finish(self, handle: Handle) -> None:
        if handle.own:
            handle.run.finish()
