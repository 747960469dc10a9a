"""ROLL's console log ingested: its ``StdoutTracker`` writes one ``metrics_tag: {json}`` line per step.

ROLL itself is not installed here (Megatron-Core, Ray and CUDA builds); the lines that make its console log are
transcribed from alibaba/ROLL at 8eb27cc2 and run through the real ``logging`` and ``json``:

- roll/utils/logging.py lines 12–17 (``CustomFormatter``: RANK, WORLD_SIZE, WORKER_NAME from the environment) and
  58–63 (the format string);
- roll/utils/tracking.py lines 15–25 (``_strip_metric_tag``: ``key@tag`` → ``key``) and 158–161
  (``StdoutTracker.log``);
- the metric keys and what they hold: roll/utils/metrics/metrics_manager.py (``critic/entropy/mean``,
  ``critic/correct/mean``, ``group/mixed_groups_ratio``), the fsdp2 / megatron strategies (``actor_train/grad_norm``),
  roll/pipeline/agentic/agentic_pipeline.py (``critic/score/mean``).
"""

from __future__ import annotations

import io
import json
import logging
import os

from collapsewatch import connect
from collapsewatch.ingest import ingest_file


# -- transcribed from roll/utils/logging.py and roll/utils/tracking.py (8eb27cc2) --
class CustomFormatter(logging.Formatter):
    def format(self, record):
        record.__dict__["RANK"] = os.environ.get("RANK", "0")
        record.__dict__["WORLD_SIZE"] = os.environ.get("WORLD_SIZE", "1")
        record.__dict__["WORKER_NAME"] = os.environ.get("WORKER_NAME", "DRIVER")
        return super(CustomFormatter, self).format(record)  # noqa: UP008 (as ROLL writes it)


FORMATTER = CustomFormatter(
    fmt=f"[%(asctime)s] [%(filename)s (%(lineno)d)] [%(levelname)s] "
    f"[%(WORKER_NAME)s %(RANK)s / %(WORLD_SIZE)s]"
    f"[PID {os.getpid()}] %(message)s",
    datefmt="%Y-%m-%d %H:%M:%S",
)


def _strip_metric_tag(values):
    return {k.rsplit("@", 1)[0]: v for k, v in values.items()}


def stdout_tracker_log(logger, values, step):  # StdoutTracker.log under @strip_at_tag_in_log
    values = _strip_metric_tag(values)
    logger.info(f"metrics_tag: {json.dumps({'step': step, 'metrics': values})}")
# -- end of transcription --


def test_roll_metrics_tag_lines_become_steps(tmp_path, store):
    out = io.StringIO()
    logger = logging.getLogger("roll-test")
    logger.handlers, logger.propagate, logger.level = [], False, logging.INFO
    handler = logging.StreamHandler(out)
    handler.setFormatter(FORMATTER)
    logger.addHandler(handler)
    logger.info("create tracker stdout, kwargs: {}")  # a message line: not metrics
    # two steps; step 1's grad norm overflowed (json.dumps writes Infinity, a JSON extension Python reads back)
    for step, score, mixed, gnorm in ((0, 0.25, 0.75, 1.5), (1, 0.5, 0.5, float("inf"))):
        stdout_tracker_log(logger, {"critic/score/mean": score, "critic/entropy/mean": 0.8,
                                    "critic/correct/mean": score, "group/mixed_groups_ratio": mixed,
                                    "actor_train/grad_norm": gnorm, "actor/pg_loss@sum": -0.1}, step)
    log = tmp_path / "train.log"
    log.write_text(out.getvalue())
    assert "[DRIVER 0 / 1]" in log.read_text() and "metrics_tag: {\"step\": 0" in log.read_text()
    ingest_file(store, log, run="roll")
    got = connect(store).sql("SELECT step, reward_mean, entropy_mean, correct_frac, zero_std_group_frac, grad_norm "
                             "FROM steps WHERE run = 'roll' ORDER BY step").fetchall()
    # the score is the reward; the all-equal groups' share is 1 − the mixed share (1 − 0.75 = 0.25, 1 − 0.5 = 0.5);
    # the overflowing grad norm is kept as +inf
    assert got == [(0, 0.25, 0.8, 0.25, 0.25, 1.5), (1, 0.5, 0.8, 0.5, 0.5, float("inf"))]
    # the reducer tag was stripped before logging: pg_loss is kept as a scalar under its clean name
    assert connect(store).sql("SELECT count(*) FROM scalars WHERE run = 'roll' AND key = 'actor/pg_loss'"
                              ).fetchall() == [(2,)]
