"""One tiny TRL ``GRPOTrainer`` run that leaves its logs in every format users keep, written by the real loggers.

    python -m tests.ingest.trl_logs OUT    (run by tests/ingest/conftest.py in a subprocess, stdout → OUT/console.txt)

HF's own callbacks write them: ``PrinterCallback`` prints the log dicts (``disable_tqdm``: what ``tee`` saves),
``TensorBoardCallback`` writes ``OUT/tb``, ``MLflowCallback`` ``OUT/mlruns``, ``TrackioCallback`` ``OUT/trackio``,
and the checkpoint at the last step holds ``trainer_state.json``. A subprocess because trackio and MLflow read their
folders from the environment when imported, and ``PrinterCallback`` prints to the process's stdout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STEPS = 3


def main(out: Path) -> None:
    os.environ.update({"TRACKIO_DIR": str(out / "trackio"), "MLFLOW_TRACKING_URI": (out / "mlruns").as_uri(),
                       "MLFLOW_ALLOW_FILE_STORE": "true", "TENSORBOARD_LOGGING_DIR": str(out / "tb"), "HF_HUB_OFFLINE": "1", "TRACKIO_PROJECT": "cw"})
    from tests.integrations.trl_tiny import tiny_grpo_trainer

    trainer = tiny_grpo_trainer(str(out / "trl"), max_steps=STEPS, report_to=["tensorboard", "mlflow", "trackio"],
                                save_strategy="steps", save_steps=STEPS,
                                project="cw", run_name="tiny", steps_per_generation=2)
    trainer.train()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
