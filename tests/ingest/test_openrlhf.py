"""OpenRLHF's logs ingested: the per-step console line ``✨ Global step N: {…}`` and its TensorBoard logger's
``train/<key>`` scalars, the same statuses giving the same catalogue columns.

OpenRLHF itself cannot be installed here: its requirements.txt pins flash-attn 2.8.3 (built against CUDA),
deepspeed 0.19.5, ray 2.55.0 and transformers 5.15.0 (OpenRLHF/OpenRLHF at 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
v0.11.0). So the few lines that make its logs are transcribed from that commit and run through the real ``logging``,
``tqdm`` and torch ``SummaryWriter``:

- openrlhf/utils/logging_utils.py lines 10–25 (``_FORMAT``, ``_DATE_FORMAT``, ``NewLineFormatter``), 32–44 (a stdout
  handler at INFO, not propagated) and 122–130 (``TensorboardLogger.log_train``);
- openrlhf/trainer/ppo_trainer.py lines 540–547 (``timing/step_total`` summed over the ``timing/`` keys, ``log_status``
  without ``generated_samples``, ``logger.info(f"✨ Global step {global_step}: {log_status}")``) and 224 (the
  ``Sample:`` line); openrlhf/trainer/ppo_trainer_async.py line 244 (the same line without ✨);
- the status keys: ray/ppo_actor.py ``ppo_train`` / ``training_step`` and ppo_trainer.py ``_compute_rollout_stats``,
  values Python floats (``.item()``, sums and ratios of them).

Ray prefixes an actor's stdout with ``(PPOTrainer pid=…)``, as in the verl console logs of lab/public/raw.
"""

from __future__ import annotations

import io
import logging
import math

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

# -- transcribed from openrlhf/utils/logging_utils.py (3c3be62) --
_FORMAT = "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
_DATE_FORMAT = "%m-%d %H:%M:%S"


class NewLineFormatter(logging.Formatter):
    """Adds logging prefix to newlines to align multi-line messages."""

    def __init__(self, fmt, datefmt=None):
        logging.Formatter.__init__(self, fmt, datefmt)

    def format(self, record):
        msg = logging.Formatter.format(self, record)
        if record.message != "":
            parts = msg.split(record.message)
            msg = msg.replace("\n", "\r\n" + parts[0])
        return msg


def tensorboard_log_train(writer, global_step, logs_dict):  # TensorboardLogger.log_train
    generated_samples = logs_dict.get("generated_samples")
    for k, v in logs_dict.items():
        if k == "generated_samples" and v is not None:
            text, reward = generated_samples
            formatted_text = f"Sample:\\n{text}\\n\\nReward: {reward:.4f}"
            writer.add_text("train/generated_samples", formatted_text, global_step)
        elif v is not None:
            writer.add_scalar(f"train/{k}", v, global_step)
# -- end of transcription --

# One PPO step's status per step, as ppo_train + train_step hand it to fit (binary fractions: exact in float32 too).
# reward / response_length / truncated (the micro-batch means) are set apart from the rollout/* statistics of the
# same step to see which fills the column: rollout/* are listed first in KEY_MAP.
STATUS = {
    1: dict(policy_loss=0.0625, entropy_loss=1.5, actor_lr=2.0**-20, actor_grad_norm=0.75, ppo_clip_ratio=0.0,
            ppo_kl=0.0, kl=0.001953125, logprobs_diff=0.0, reward=0.375, response_length=48.0, truncated=0.125,
            total_length=112.0, group_reward_std=0.25, **{"return": 0.375}),
    2: dict(policy_loss=-0.03125, entropy_loss=1.25, actor_lr=2.0**-19, actor_grad_norm=1.5, ppo_clip_ratio=0.0625,
            ppo_kl=0.0078125, kl=0.00390625, logprobs_diff=0.015625, reward=0.5, response_length=56.0, truncated=0.25,
            total_length=120.0, group_reward_std=0.25, **{"return": 0.5}),
    3: dict(policy_loss=0.015625, entropy_loss=0.5, actor_lr=2.0**-19, actor_grad_norm=math.nan, ppo_clip_ratio=0.125,
            ppo_kl=0.015625, kl=0.0078125, logprobs_diff=0.03125, reward=0.625, response_length=96.0, truncated=0.5,
            total_length=160.0, group_reward_std=0.125, **{"return": 0.625}),
}
ROLLOUT = {1: (0.25, 0.5, 40.0, 0.0), 2: (0.5, 0.5, 64.0, 0.25), 3: (0.75, 0.25, 100.0, 0.5)}  # mean, std, len, trunc
TIMING = {"timing/make_experience": 2.0, "timing/ppo_train": 4.0, "timing/broadcast": 0.5}
GENERATION = 5.5


def _statuses() -> dict[int, dict]:
    out = {}
    for step, status in STATUS.items():
        status = {**status, **TIMING}  # train_step: timing, then _compute_rollout_stats, then generated_samples
        mean, std, length, trunc = ROLLOUT[step]
        status.update({"rollout/reward_mean": mean, "rollout/reward_std": std, "rollout/response_length_mean": length,
                       "rollout/truncated_rate": trunc, "rollout/num_samples": 16.0})
        status["generated_samples"] = ["What is 2 + 2?\nIt is 4.", mean]
        status["timing/generation"] = GENERATION  # fit, lines 540–541
        status["timing/step_total"] = sum(v for k, v in status.items() if k.startswith("timing/"))
        out[step] = status
    return out


def _console(path) -> None:
    """What `python -m openrlhf.cli.train_ppo_ray … 2>&1 | tee path` leaves, steps 1–2 from the synchronous trainer,
    step 3 from the async one, with tqdm's bars (real tqdm, OpenRLHF's descriptions and postfix) between them."""
    from tqdm import tqdm

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.INFO)
    handler.setFormatter(NewLineFormatter(_FORMAT, datefmt=_DATE_FORMAT))
    logger = logging.getLogger("openrlhf.test_ingest")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    logger.propagate = False
    episode = tqdm(range(3), desc="Episode [1/1]", file=buf)
    try:
        for step, status in _statuses().items():
            logger.info(f"Sample: {status['generated_samples']}")
            bar = tqdm(range(2), desc="Train epoch [1/1]", file=buf)
            for _ in bar:
                bar.set_postfix({"act_loss": status["policy_loss"], "reward": status["reward"],
                                 "gen_len": status["response_length"], "grad_norm": status["actor_grad_norm"]})
            bar.close()
            log_status = {k: v for k, v in status.items() if k not in ["generated_samples"]}
            if step < 3:
                logger.info(f"✨ Global step {step}: {log_status}")
            else:
                logger.info(f"Global step {step}: {log_status}")
            if step == 2:
                logger.info(f"✨ Evaluation completed in 0:00:04, global_step {step}, eval_metrics: "
                            f"{ {'eval_math_pass1': 0.5} }")
            episode.update(1)
    finally:
        episode.close()
        logger.removeHandler(handler)
    path.write_text("".join(f"(PPOTrainer pid=4242) {line}\n" for line in buf.getvalue().split("\n") if line))


def _tensorboard(log_dir) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(log_dir))  # TensorboardLogger: tensorboard_dir / run_name
    for step, status in _statuses().items():
        tensorboard_log_train(writer, step, status)
    writer.close()


COLUMNS = ("reward_mean", "reward_std", "response_length_mean", "truncated_frac", "entropy_mean", "clip_region_frac",
           "ppo_kl", "kl_ref_mean", "grad_norm", "lr", "loss_policy", "step_time", "rollout_time")


@pytest.mark.parametrize("fmt", ["console", "tensorboard"])
def test_openrlhf_status_lands_on_the_catalogue_columns(tmp_path, store, fmt):
    if fmt == "console":
        path = tmp_path / "openrlhf.log"
        _console(path)
    else:
        path = tmp_path / "tb" / "grpo-run"
        _tensorboard(path)
    done = ingest_file(store, path, "orlhf", run_detectors=False)
    assert (done.format, done.steps) == (fmt, 3)
    rows = connect(store).execute(f"SELECT step, {', '.join(COLUMNS)} FROM steps ORDER BY step").fetchall()
    # step 1: rollout/reward_mean 0.25 (not reward 0.375), rollout/reward_std 0.5, rollout/response_length_mean 40
    # (not 48), rollout/truncated_rate 0 (not truncated 0.125); entropy_loss 1.5, ppo_clip_ratio 0, ppo_kl 0, kl 2⁻⁹,
    # actor_grad_norm 0.75, actor_lr 2⁻²⁰, policy_loss 1/16; step_total = 2 + 4 + 0.5 + 5.5 = 12, generation 5.5
    want = {1: (0.25, 0.5, 40.0, 0.0, 1.5, 0.0, 0.0, 0.001953125, 0.75, 2.0**-20, 0.0625, 12.0, 5.5),
            2: (0.5, 0.5, 64.0, 0.25, 1.25, 0.0625, 0.0078125, 0.00390625, 1.5, 2.0**-19, -0.03125, 12.0, 5.5),
            3: (0.75, 0.25, 100.0, 0.5, 0.5, 0.125, 0.015625, 0.0078125, math.nan, 2.0**-19, 0.015625, 12.0, 5.5)}
    assert [r[0] for r in rows] == [1, 2, 3]
    for step, *got in rows:
        for col, g, w in zip(COLUMNS, got, want[step], strict=True):
            assert (math.isnan(g) if math.isnan(w) else g == w), (fmt, step, col, g, w)  # exact: binary fractions
    # OpenRLHF's own keys are kept beside the columns (behind train/ in TensorBoard), eval and tqdm lines are not
    keys = {k for (k,) in connect(store).execute("SELECT DISTINCT key FROM scalars").fetchall()}
    prefix = "train/" if fmt == "tensorboard" else ""
    assert {f"{prefix}reward", f"{prefix}group_reward_std", f"{prefix}rollout/num_samples"} <= keys
    assert not any("eval" in k or "act_loss" in k for k in keys)
    if fmt == "console":  # the Sample:, evaluation and tqdm lines are counted as other lines, not read
        assert "other line(s) are not metrics" in done.summary
