"""Two tiny TRL ``GRPOTrainer`` runs, one process, that leave their logs in every format users keep, written by the
real loggers.

    python -m tests.ingest.trl_logs OUT    (run by tests/ingest/conftest.py in a subprocess, stdout → OUT/console.txt)

The first run: HF's own callbacks write its logs. ``PrinterCallback`` prints the log dicts (``disable_tqdm``: what
``tee`` saves), ``TensorBoardCallback`` writes ``OUT/tb``, ``MLflowCallback`` ``OUT/mlruns``, ``TrackioCallback``
``OUT/trackio``, ``WandbCallback`` ``OUT/wandb/offline-run-*/run-<id>.wandb`` (offline: nothing is sent), and the
checkpoint at the last step holds ``trainer_state.json``. It is also watched by collapsewatch (``watch_run``: store
OUT/store), so its trackers hold the ``collapsewatch/…`` series too, and its W&B run the W&B sink's alert, severity
and verdict (the events ``watch``'s ``on_event`` was given: OUT/seen.json).

The second run (``OUT/mlflow-default``) reports to MLflow only and sets no tracking URI, as in most users' runs:
MLflow 3 then writes ``sqlite:///mlflow.db`` in the working directory (``OUT/mlflow-default``); its own
``trainer_state.json`` is the reference for its values. In the first run's process (the imports are paid once): its
MLflow variables are removed and MLflow's process-wide URI forgotten first, and its printed dicts go to its own
``console.txt``, not the first run's.

A subprocess because trackio and MLflow read their folders from the environment when imported, and
``PrinterCallback`` prints to the process's stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

STEPS = 3


def main(out: Path) -> None:
    os.environ.update({"HF_HUB_OFFLINE": "1"})
    every_tracker_run(out)
    default_mlflow_run(out / "mlflow-default")


def every_tracker_run(out: Path) -> None:
    """The first run: TensorBoard, MLflow (folder store), trackio and W&B, watched by collapsewatch."""
    os.environ.update({"TRACKIO_DIR": str(out / "trackio"), "MLFLOW_TRACKING_URI": (out / "mlruns").as_uri(),
                       "MLFLOW_ALLOW_FILE_STORE": "true", "TENSORBOARD_LOGGING_DIR": str(out / "tb"),
                       "TRACKIO_PROJECT": "cw"})
    # W&B offline, into OUT/wandb; no console capture (PrinterCallback's stdout stays as printed), no banner, no
    # error reports sent anywhere
    os.environ.update({"WANDB_MODE": "offline", "WANDB_DIR": str(out), "WANDB_PROJECT": "cw",
                       "WANDB_CONSOLE": "off", "WANDB_SILENT": "true", "WANDB_ERROR_REPORTING": "false"})
    from tests.integrations.trl_tiny import tiny_grpo_trainer

    trainer = tiny_grpo_trainer(str(out / "trl"), max_steps=STEPS, report_to=["tensorboard", "mlflow", "trackio",
                                "wandb"], save_strategy="steps", save_steps=STEPS, project="cw", run_name="tiny",
                                steps_per_generation=2)
    seen = watch_run(trainer, out / "store")
    trainer.train()
    import wandb

    wandb.finish()  # returns once W&B's service process has written the run's last records into its file
    (out / "seen.json").write_text(json.dumps([e.as_row() for e in seen]))


def default_mlflow_run(out: Path) -> None:
    """The second run: MLflow only, at MLflow's default tracking URI (OUT/mlflow.db), as a process that never set
    one would log."""
    import mlflow

    from tests.integrations.trl_tiny import tiny_grpo_trainer

    for key in [k for k in os.environ if k.startswith("MLFLOW_")]:
        del os.environ[key]  # HF's MLflowCallback reads MLFLOW_TRACKING_URI: unset, it sets no URI
    out.mkdir()
    os.chdir(out)  # where MLflow's default sqlite:///mlflow.db lands
    mlflow.set_tracking_uri(None)  # forget the URI the first run's callback set in this process
    if mlflow.get_tracking_uri() != f"sqlite:///{out / 'mlflow.db'}":
        raise SystemExit(f"MLflow's default tracking URI is {mlflow.get_tracking_uri()}, not OUT/mlflow.db")
    trainer = tiny_grpo_trainer(str(out / "trl"), max_steps=STEPS, report_to=["mlflow"], save_strategy="steps",
                                save_steps=STEPS, project="cw", run_name="tiny", steps_per_generation=2)
    with (out / "console.txt").open("w") as printed, contextlib.redirect_stdout(printed):
        trainer.train()


RULES = {"enabled": ["starvation"], "starvation": {"warn_frac": 0.0, "cold_start": False}}
SENTINELS = [("the cat sat", " on the mat", True), ("a dog ran", " banana", False)]


def watch_run(trainer, store: Path) -> list:
    """collapsewatch watches the run as a user's ``watch()`` would, into STORE (run ``tiny``), and adds its
    ``collapsewatch/…`` series to the logs every backend receives (tests/ingest/test_tracker_series.py reads them back).
    Sentinels every 2 steps: scored at global steps 0 and 2, stored at steps 1 and 3. Only the starvation detector,
    with its warning bar at 0: a share of zero-std groups is always ≥ 0, so its rule holds at every step and an
    episode (warning) opens at step 3, the third step it held (confirm_steps). The W&B sink writes into the run
    TRL's ``WandbCallback`` opened; ``on_event`` collects the events (the list returned)."""
    from collapsewatch.detectors import DetectorConfig
    from collapsewatch.integrations.trl import watch

    seen: list = []
    watch(trainer, store, "tiny", sentinels=SENTINELS, sentinel_every=2, detectors=DetectorConfig.from_dict(RULES),
          sinks=["wandb"], on_event=seen.append)
    return seen


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
