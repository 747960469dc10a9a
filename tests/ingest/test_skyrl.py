"""SkyRL's tracker logs ingested: the keys its trainer builds land on the catalogue columns, and
``policy/policy_entropy`` — masked in current SkyRL, unmasked in older skyrl-train — fills ``entropy_mean`` only in a
step that also logs a key only the masked versions write (``Meaning.only_with``, collapsewatch/ingest/key_table.py).

SkyRL itself cannot be installed here (ray, vLLM, a GPU), so the lines that build its logs are transcribed from
NovaSky-AI/SkyRL at a9564572e (2026-08) and run through the real torch ``SummaryWriter`` and pandas:

- skyrl/train/utils/tracking.py ``_TensorboardAdapter.log`` (``add_scalar(key, data[key], step)`` per key);
- skyrl/backends/skyrl_train/workers/worker_utils.py ``reduce_metrics``, which ``Trainer._execute_training_step``
  applies to the worker statuses of the step's mini-batches (``sum_loss_metrics=False``: a mean), ``grad_norm``
  appended from each mini-batch's ``optim_step``; ``train_critic_and_policy`` logs each as ``policy/<key>``;
- skyrl/train/generators/utils.py ``get_metrics_from_generator_output`` (response-level rewards) and the token part
  of ``get_rollout_metrics``; trainer.py's ``reward/…`` and ``loss/…`` keys.

The older logs' keys are those of skyrl-train at its tag skyrl_train-v0.3.0 (2025-12: ``final_loss`` and the masked
entropy, still ``ppo_clip_ratio`` and ``raw_grad_norm``) and at skyrl_train-v0.2.0 (2025-10, as mert-cemri/CTU-Agent-v0
vendors it: no ``final_loss``, ``policy_entropy`` = ``entropy_BS.sum() / numel()`` over the whole response window).
Values are binary fractions, exact in TensorBoard's float32.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file
from collapsewatch.ingest.keys import catalogue_values, unmapped


# -- transcribed from SkyRL a9564572e --
def reduce_metrics(metrics, sum_loss_metrics=False):  # workers/worker_utils.py (MEAN_LOSS_METRICS left out)
    reduced_metrics = dict()
    for k, v in metrics.items():
        assert len(v) > 0, f"No metrics for key {k}"
        if k.endswith("_max"):
            reduced_metrics[k] = max(v)
        elif k.endswith("_min"):
            reduced_metrics[k] = min(v)
        elif sum_loss_metrics and (k == "loss" or k.endswith("_loss")):
            reduced_metrics[k] = sum(v)
        else:
            reduced_metrics[k] = sum(v) / len(v)
    return reduced_metrics


def get_metrics_from_generator_output(rewards, uids):  # generators/utils.py, response-level rewards
    uid_to_trajectory_rewards = defaultdict(list)
    mean_raw_reward = float(np.mean(rewards))
    mean_positive_reward = float(np.mean(np.maximum(rewards, 0.0)))
    for i, reward in enumerate(rewards):
        uid_to_trajectory_rewards[uids[i]].append(reward)
    pass_at_n = sum(1 for v in uid_to_trajectory_rewards.values() if any(r > 0 for r in v)) / len(
        uid_to_trajectory_rewards)
    return mean_raw_reward, pass_at_n, mean_positive_reward


def get_rollout_metrics(responses, loss_masks=None):  # generators/utils.py, its token statistics
    num_tokens_arr = np.array([len(response) for response in responses])
    out = {"generate/min_num_tokens": np.min(num_tokens_arr).item(),
           "generate/max_num_tokens": np.max(num_tokens_arr).item(),
           "generate/avg_num_tokens": np.mean(num_tokens_arr).item(),
           "generate/std_num_tokens": np.std(num_tokens_arr).item()}
    if loss_masks is not None:  # SkyRL ≥ 2026-05-08 (#1596)
        assistant_tokens_arr = np.array([sum(mask) for mask in loss_masks])
        out.update({"generate/avg_assistant_tokens": np.mean(assistant_tokens_arr).item(),
                    "generate/min_assistant_tokens": np.min(assistant_tokens_arr).item(),
                    "generate/max_assistant_tokens": np.max(assistant_tokens_arr).item(),
                    "generate/std_assistant_tokens": np.std(assistant_tokens_arr).item()})
    return out


def tensorboard_log(writer, data, step):  # utils/tracking.py, _TensorboardAdapter.log
    for key in data:
        writer.add_scalar(key, data[key], step)
# -- end of transcription --


def _batch(rewards, lengths, masks):
    """Four trajectories of two prompts (n_samples_per_prompt = 2): multi-turn, so a response's ids hold the tool
    observations (``lengths``) and its loss mask only the model's tokens (``masks`` ones)."""
    uids = ["p0", "p0", "p1", "p1"]
    responses = [[7] * n for n in lengths]
    loss_masks = [[1] * m + [0] * (n - m) for n, m in zip(lengths, masks, strict=True)]
    return uids, responses, loss_masks


def _policy(minibatches):
    """The trainer's policy metrics of one step: each mini-batch's worker status (already reduced over micro-batches
    and DP ranks) and its optimizer step's grad norm, reduced as ``_execute_training_step`` does, as policy/<key>."""
    all_metrics = defaultdict(list)
    for status, grad_norm in minibatches:
        for k, v in status.items():
            all_metrics[k].append(v)
        if grad_norm is not None:
            all_metrics["grad_norm"].append(grad_norm)
    return {f"policy/{k}": v for k, v in reduce_metrics(all_metrics, sum_loss_metrics=False).items()}


def _current_payload(step, rewards, lengths, masks, minibatches):
    """One step's ``log_payload`` of SkyRL a9564572e (use_kl_loss, its default: no KL in the reward)."""
    uids, responses, loss_masks = _batch(rewards, lengths, masks)
    raw, pass_at_n, positive = get_metrics_from_generator_output(rewards, uids)
    payload = get_rollout_metrics(responses, loss_masks)
    payload.update({"generate/batch_num_seq": 4, "generate/batch_padded_seq_len": 256})
    payload.update({"reward/avg_pass_at_2": pass_at_n, "reward/avg_raw_reward": raw,
                    "reward/mean_positive_reward": positive})
    payload.update({"loss/avg_final_rewards": sum(rewards) / len(rewards), "loss/avg_raw_advantages": 0.0,
                    "loss/avg_raw_advantages_abs": 0.5})
    payload.update(_policy(minibatches))
    payload.update({"trainer/epoch": 0, "trainer/global_step": step})
    payload.update({"timing/step": 12.5, "timing/generate": 5.0, "timing/policy_train": 4.0})
    return payload


def _mb(final_loss, policy_loss, entropy, clip, kl, grad_norm):
    status = {"final_loss": final_loss, "policy_loss": policy_loss, "policy_entropy": entropy,
              "response_length": 256, "policy_lr": 2.0**-20, "loss_metrics/clip_ratio": clip, "policy_kl": kl}
    return status, grad_norm


# Steps 1–3 of a current SkyRL run: rewards, len(response_ids), Σ loss mask, and two mini-batches per step.
CURRENT = {
    1: ([1.0, 0.0, 1.0, 0.0], [96, 64, 128, 32], [64, 64, 96, 32],
        [_mb(0.25, 0.1875, 0.5, 0.0, 2.0**-10, 1.0), _mb(0.5, 0.4375, 0.75, 0.125, 2.0**-9, 2.0)]),
    2: ([1.0, 1.0, 1.0, 0.0], [80, 80, 112, 48], [48, 80, 80, 48],
        [_mb(0.125, 0.0625, 0.5, 0.0625, 2.0**-9, 0.5), _mb(0.125, 0.0625, 0.25, 0.0625, 2.0**-9, 1.5)]),
    3: ([1.0, 1.0, 1.0, 1.0], [64, 64, 64, 64], [32, 32, 32, 32],
        [_mb(-0.125, -0.25, 0.125, 0.25, 2.0**-8, 4.0), _mb(0.375, 0.25, 0.125, 0.0, 2.0**-8, 8.0)]),
}
COLUMNS = ("reward_mean", "entropy_mean", "clip_region_frac", "grad_norm", "lr", "loss", "loss_policy", "kl_ref_mean",
           "response_length_mean", "step_time", "rollout_time")


def test_a_current_skyrl_tensorboard_log_fills_the_catalogue_columns(tmp_path, store):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    log_dir = tmp_path / "tensorboard_log"  # $TENSORBOARD_DIR, "tensorboard_log" by default
    writer = SummaryWriter(str(log_dir))
    for step, (rewards, lengths, masks, minibatches) in CURRENT.items():
        tensorboard_log(writer, _current_payload(step, rewards, lengths, masks, minibatches), step)
    writer.close()
    done = ingest_file(store, log_dir, "skyrl-now")
    assert (done.format, done.steps) == ("tensorboard", 3)
    # step 1: reward/avg_raw_reward = mean(1, 0, 1, 0) = 0.5 (loss/avg_final_rewards, the same here, listed after it);
    # policy/policy_entropy = (0.5 + 0.75) / 2 = 0.625, read because the step logs policy/final_loss (and
    # policy/loss_metrics/clip_ratio); clip (0 + 0.125) / 2; grad_norm (1 + 2) / 2; lr 2⁻²⁰; final_loss (0.25 + 0.5) / 2
    # → loss; policy_loss (0.1875 + 0.4375) / 2 → loss_policy; policy_kl (2⁻¹⁰ + 2⁻⁹) / 2 = 3 · 2⁻¹¹;
    # response_length_mean = generate/avg_assistant_tokens = (64 + 64 + 96 + 32) / 4 = 64, not avg_num_tokens 80
    # (tool observations counted); timing/step 12.5 → step_time, timing/generate 5 → rollout_time
    want = {1: (0.5, 0.625, 0.0625, 1.5, 2.0**-20, 0.375, 0.3125, 3 * 2.0**-11, 64.0, 12.5, 5.0),
            # step 2: 3 of 4 rewarded; entropy (0.5 + 0.25) / 2; assistant tokens (48 + 80 + 80 + 48) / 4 = 64
            2: (0.75, 0.375, 0.0625, 1.0, 2.0**-20, 0.125, 0.0625, 2.0**-9, 64.0, 12.5, 5.0),
            # step 3: every trajectory rewarded; grad_norm (4 + 8) / 2 = 6; assistant tokens 32 (of 64 ids each)
            3: (1.0, 0.125, 0.125, 6.0, 2.0**-20, 0.125, 0.0, 2.0**-8, 32.0, 12.5, 5.0)}
    con = connect(store)
    rows = con.execute(f"SELECT step, {', '.join(COLUMNS)} FROM steps WHERE run = 'skyrl-now' ORDER BY step")
    assert {step: tuple(got) for step, *got in rows.fetchall()} == want
    # SkyRL's own keys are kept beside the columns; every policy/… key the table maps fills a column here
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM scalars WHERE run = 'skyrl-now'").fetchall()}
    assert {"policy/policy_entropy", "generate/avg_num_tokens", "reward/avg_pass_at_2"} <= keys
    assert "policy/policy_entropy" not in done.unmapped and "reward/avg_pass_at_2" in done.unmapped
    assert {"entropy_mean", "reward_mean", "grad_norm", "clip_region_frac"} <= set(done.filled)


def test_a_skyrl_train_0_3_log_with_kl_in_the_reward(tmp_path, store):
    # skyrl_train-v0.3.0 (2025-12), use_kl_in_reward (so no policy_kl): the worker status per micro-batch, averaged
    # (its reduce_metrics: a plain mean; raw_grad_norm only at each mini-batch's optimizer step), then policy/<key>.
    # Rows as W&B's history holds them (wandb.log(payload, step=global_step)), dumped as JSON lines.
    rows = [
        {"_step": 1, "policy/final_loss": 0.0625, "policy/policy_loss": 0.25, "policy/policy_lr": 2.0**-20,
         "policy/ppo_clip_ratio": 0.03125, "policy/policy_entropy": 0.75, "policy/raw_grad_norm": 0.5,
         "policy/policy_update_steps": 2.0, "reward/avg_pass_at_2": 1.0, "reward/avg_raw_reward": 0.5,
         "loss/avg_final_rewards": 0.4375, "loss/avg_raw_advantages": 0.0, "loss/avg_raw_advantages_abs": 0.5,
         "loss/avg_kl": 0.0625, "loss/avg_kl_max": 0.5, "loss/kl_loss_coef": 0.001, "generate/avg_num_tokens": 96.0,
         "generate/min_num_tokens": 32, "generate/max_num_tokens": 160, "timing/step": 20.0, "timing/generate": 8.0,
         "trainer/epoch": 0, "trainer/global_step": 1},
        {"_step": 2, "policy/final_loss": 0.03125, "policy/policy_loss": 0.125, "policy/policy_lr": 2.0**-20,
         "policy/ppo_clip_ratio": 0.0625, "policy/policy_entropy": 0.625, "policy/raw_grad_norm": 0.75,
         "policy/policy_update_steps": 2.0, "reward/avg_pass_at_2": 1.0, "reward/avg_raw_reward": 0.75,
         "loss/avg_final_rewards": 0.625, "loss/avg_raw_advantages": 0.0, "loss/avg_raw_advantages_abs": 0.5,
         "loss/avg_kl": 0.125, "loss/avg_kl_max": 1.0, "loss/kl_loss_coef": 0.001, "generate/avg_num_tokens": 88.0,
         "generate/min_num_tokens": 40, "generate/max_num_tokens": 136, "timing/step": 18.0, "timing/generate": 7.0,
         "trainer/epoch": 0, "trainer/global_step": 2},
    ]
    f = tmp_path / "skyrl-0.3-history.jsonl"
    f.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = ingest_file(store, f, "skyrl-0.3")
    assert (done.format, done.steps) == ("jsonl", 2)
    con = connect(store)
    got = con.execute(f"SELECT step, {', '.join(COLUMNS)} FROM steps WHERE run = 'skyrl-0.3' ORDER BY step").fetchall()
    # reward/avg_raw_reward 0.5 beats loss/avg_final_rewards 0.4375 (the reward less its KL penalty: listed after it);
    # policy/policy_entropy 0.75 is read (the masked one: the step logs policy/final_loss, which only masked versions
    # write); policy/ppo_clip_ratio → clip_region_frac, policy/raw_grad_norm → grad_norm, loss/avg_kl → kl_ref_mean
    # (no policy_kl without use_kl_loss); generate/avg_num_tokens 96 → response_length_mean (no assistant count yet)
    assert got == [(1, 0.5, 0.75, 0.03125, 0.5, 2.0**-20, 0.0625, 0.25, 0.0625, 96.0, 20.0, 8.0),
                   (2, 0.75, 0.625, 0.0625, 0.75, 2.0**-20, 0.03125, 0.125, 0.125, 88.0, 18.0, 7.0)]


def test_an_older_skyrl_train_log_keeps_its_unmasked_entropy_out_of_entropy_mean(tmp_path, store):
    pd = pytest.importorskip("pandas")
    # skyrl_train-v0.2.0 (2025-10), as CTU-Agent-v0 vendors it: policy_entropy = entropy_BS.sum() / numel() over the
    # whole response window — padding after EOS and tool outputs included, so it reads high (3.25, 3.5) where the
    # model's own tokens sit near 0.6 — and no final_loss: the entropy must not fill entropy_mean. A W&B history
    # exported with pandas (run.history().to_csv(): its index column first, `_step` the step).
    history = pd.DataFrame([
        {"_step": 1, "_runtime": 30.0, "policy/policy_loss": 0.25, "policy/policy_lr": 2.0**-20,
         "policy/ppo_clip_ratio": 0.0, "policy/policy_entropy": 3.25, "policy/policy_kl": 2.0**-10,
         "policy/raw_grad_norm": 0.25, "policy/policy_update_steps": 1.0, "reward/avg_pass_at_4": 0.5,
         "reward/avg_raw_reward": 0.25, "loss/avg_raw_rewards": 0.25, "loss/avg_raw_advantages": 0.0,
         "generate/avg_num_tokens": 640.0, "timing/step": 64.0, "timing/generate": 40.0},
        {"_step": 2, "_runtime": 94.0, "policy/policy_loss": 0.125, "policy/policy_lr": 2.0**-20,
         "policy/ppo_clip_ratio": 0.0625, "policy/policy_entropy": 3.5, "policy/policy_kl": 2.0**-9,
         "policy/raw_grad_norm": 0.5, "policy/policy_update_steps": 1.0, "reward/avg_pass_at_4": 0.75,
         "reward/avg_raw_reward": 0.375, "loss/avg_raw_rewards": 0.375, "loss/avg_raw_advantages": 0.0,
         "generate/avg_num_tokens": 512.0, "timing/step": 60.0, "timing/generate": 36.0},
    ])
    f = tmp_path / "skyrl-0.2-history.csv"
    history.to_csv(f)
    done = ingest_file(store, f, "skyrl-0.2")
    assert (done.format, done.steps) == ("csv", 2)
    con = connect(store)
    got = con.execute(f"SELECT step, {', '.join(COLUMNS)} FROM steps WHERE run = 'skyrl-0.2' ORDER BY step").fetchall()
    # entropy_mean NULL; loss NULL (no final_loss before 2025-11-17); policy/policy_loss → loss_policy,
    # policy/policy_kl → kl_ref_mean, reward/avg_raw_reward (= loss/avg_raw_rewards) → reward_mean
    assert got == [(1, 0.25, None, 0.0, 0.25, 2.0**-20, None, 0.25, 2.0**-10, 640.0, 64.0, 40.0),
                   (2, 0.375, None, 0.0625, 0.5, 2.0**-20, None, 0.125, 2.0**-9, 512.0, 60.0, 36.0)]
    # the entropy is kept under its own name, and the summary names it among the keys that fill no column
    assert con.execute("SELECT step, value FROM scalars WHERE run = 'skyrl-0.2' AND key = 'policy/policy_entropy' "
                       "ORDER BY step").fetchall() == [(1, 3.25), (2, 3.5)]
    assert "policy/policy_entropy" in done.unmapped and "entropy_mean" not in done.filled


def test_the_entropy_holds_beside_either_witness_and_nowhere_else():
    # a current SkyRL step: policy/final_loss (SkyRL ≥ 2025-11-17) or policy/loss_metrics/clip_ratio (≥ 2026-02-03)
    # beside the entropy → entropy_mean; an older one has neither → the entropy fills nothing
    assert catalogue_values({"policy/policy_entropy": 0.5, "policy/final_loss": 0.25}) == {
        "entropy_mean": 0.5, "loss": 0.25}
    assert catalogue_values({"policy/policy_entropy": 0.5, "policy/loss_metrics/clip_ratio": 0.0625}) == {
        "entropy_mean": 0.5, "clip_region_frac": 0.0625}
    assert catalogue_values({"policy/policy_entropy": 3.25, "policy/ppo_clip_ratio": 0.0625}) == {
        "clip_region_frac": 0.0625}
    assert catalogue_values({"policy/policy_entropy": 3.25}) == {}
    # unmapped() reads a run's keys: the entropy fills a column there only when one of its witnesses is among them
    assert unmapped(["policy/policy_entropy", "policy/policy_loss"]) == ["policy/policy_entropy"]
    assert unmapped(["policy/policy_entropy", "policy/final_loss"]) == []
