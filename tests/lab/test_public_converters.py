"""The lab's converters of four public sources (docs/lab/public_runs.md): lab/public/trinity_csv.py (Trinity-RFT's
tutorial curve exports), lab/public/dequeueing_metrics.py (dequeueing/assignment5-alignment's own JSONL logger),
lab/public/rlor_trl_logs.py (LakshyaChaudhry/rl-or-data's logger, TRL's dicts under trl_logs) and
lab/public/rfs_metrics.py (rasbt/reasoning-from-scratch's GRPO metric CSVs, committed under lab/public/raw/).
Each test's input rows are copied from the sources' files as they are; the expected rows are written out by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, PUBLIC / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


trinity_csv = _load("trinity_csv")
dequeueing_metrics = _load("dequeueing_metrics")
rlor_trl_logs = _load("rlor_trl_logs")
rfs_metrics = _load("rfs_metrics")

# the first rows of lora32_speed_metrics.csv (an empty entropy cell: not logged at those steps)
TRINITY = """step,score,entropy,response_clip_ratio,prompt_length_mean,train_step_seconds,update_actor_seconds,tokens,runners
1,-0.0991406,,0.00182292,1429.35,493.867,404.275,11201075,16
2,-0.1,,0.000130208,1486.12,524.715,431.502,11663688,16
"""


def test_trinity_columns_become_the_trainer_keys_they_stand_for(tmp_path, store):
    src, out = tmp_path / "m.csv", tmp_path / "out.csv"
    src.write_text(TRINITY)
    assert trinity_csv.main([str(src), str(out)]) == 0
    header = out.read_text().splitlines()[0]
    # score → critic/score/mean, entropy → actor/entropy_loss, response_clip_ratio → response_length/clip_ratio, …;
    # runners (a configured concurrency) left out
    assert header == ("step,critic/score/mean,actor/entropy_loss,response_length/clip_ratio,prompt_length/mean,"
                      "time/train_step,time/update_actor,perf/total_num_tokens")
    ingest_file(store, out, "trinity")
    # critic/score/mean → reward_mean and response_length/clip_ratio → truncated_frac (verl's keys); the empty
    # entropy cells stay NULL
    assert connect(store).execute("SELECT step, reward_mean, truncated_frac, entropy_mean FROM steps ORDER BY step"
                                  ).fetchall() == [(1, -0.0991406, 0.00182292, None), (2, -0.1, 0.000130208, None)]


# grpo_clip_e1's step 1, as logged
DEQ1 = ('{"step": 1, "rollout_reward_mean": 0.03515625, "rollout_reward_std": 0.18453538417816162, '
        '"rollout_reward_max": 1.0, "rollout_reward_min": 0.0, "advantage_mean": 1.862645149230957e-09, '
        '"advantage_std": 0.43835580348968506, "train_loss_mean": -9.094947017729282e-12, "train_clip_fraction": 0.0, '
        '"gradient_norm": 0.208984375, "mean_response_length": 125.29296875, "val_accuracy": null, '
        '"val_mean_reward": 0.0, "val_format_ok_rate": 0.0, "step_elapsed_sec": 30.849824905395508, '
        '"total_elapsed_sec": 35.205987215042114}')


def test_dequeueing_rows_map_reward_std_and_grad_norm():
    (step,) = dequeueing_metrics.convert([json.loads(DEQ1)])
    # the three catalogue keys; the word count stays under its own name (not tokens); val_* → val/*, the rest train/*
    assert (step["step"], step["reward_mean"], step["reward_std"], step["grad_norm"]) == (
        1, 0.03515625, 0.18453538417816162, 0.208984375)
    assert step["train/mean_response_length"] == 125.29296875 and "response_length_mean" not in step
    assert step["val/accuracy"] is None and step["val/mean_reward"] == 0.0
    assert step["train/loss_mean"] == -9.094947017729282e-12 and step["train/clip_fraction"] == 0.0


# grpo_mixed_s1's step 1, shortened to a few of its keys (values as logged), and the logger's closing summary row
RLOR1 = ('{"step": 1, "summary": false, "reward_mean": 0.5625, "completions_mean_length": 559.53125, "trl_logs": '
         '{"loss": -0.005599377676844597, "grad_norm": 0.009273877367377281, "completions/mean_length": 559.53125, '
         '"reward": 0.5625, "reward_std": 0.5, "frac_reward_zero_std": 0.25, "entropy": 0.28193183382973075, '
         '"clip_ratio/region_mean": 0.0}}')
SUMMARY = '{"step": 1, "summary": true, "reward_mean": null, "trl_logs": {}}'


def test_rlor_rows_become_trls_dicts_and_the_summary_row_is_left_out(tmp_path, store):
    src, out = tmp_path / "train_log.jsonl", tmp_path / "out.jsonl"
    src.write_text(RLOR1 + "\n" + SUMMARY + "\n")
    assert rlor_trl_logs.main([str(src), str(out)]) == 0
    (step,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert step["step"] == 1 and "reward_mean" not in step and step["reward"] == 0.5625  # TRL's keys only
    ingest_file(store, out, "rlor")
    # TRL's keys fill the catalogue (collapsewatch/ingest/keys.py): reward → reward_mean, entropy → entropy_mean,
    # completions/mean_length → response_length_mean, frac_reward_zero_std → zero_std_group_frac
    assert connect(store).execute(
        "SELECT step, reward_mean, entropy_mean, response_length_mean, zero_std_group_frac FROM steps").fetchall() == [
        (1, 0.5625, 0.28193183382973075, 559.53125, 0.25)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 2, "reward_mean": 0.5}\n')
    assert rlor_trl_logs.main([str(bad), str(out)]) == 1  # no trl_logs: one line naming the file, exit 1


def test_rfs_columns_and_the_all_equal_share_from_the_advantage_std(tmp_path, store):
    # the committed raw file (Apache-2.0), read as score.sh reads it: its header is
    # step,total_steps,loss,kl_loss,policy_ratio,reward_avg,tokens_per_sec,avg_response_len,adv_avg,adv_std,entropy_avg,
    # eval_acc. Its rows 1 and 7, as logged:
    #   1,500,-0.787370,-0.096710,0.282757,0.125000,29.850303,38.375000,0.000000,0.999717,1.268579,15.6
    #   7,500,0.161173,0.161173,0.649954,0.000000,22.934336,942.875000,0.000000,0.000000,0.205846,
    # Step 1: one group of 8 answers, one correct (reward 0.125): advantages (r − mean) / (std + 1e-4) have std ≈ 1
    # (0.999717), so the group is not all-equal → 0.0. Step 7: all 8 wrong, advantages all 0 (std 0) → 1.0.
    out = tmp_path / "rfs.csv"
    assert rfs_metrics.main([str(PUBLIC / "raw" / "rfs-7_5-kl.rfs.csv.gz"), str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == ("step,rfs/total_steps,loss,loss_kl,rfs/policy_ratio,reward_mean,rfs/tokens_per_sec,"
                        "response_length_mean,rfs/adv_avg,rfs/adv_std,entropy_mean,rfs/eval_acc,zero_std_group_frac")
    assert len(lines) == 501  # 500 steps
    ingest_file(store, out, "rfs")
    rows = connect(store).execute("SELECT step, reward_mean, entropy_mean, response_length_mean, zero_std_group_frac "
                                  "FROM steps WHERE step IN (1, 7) ORDER BY step").fetchall()
    assert rows == [(1, 0.125, 1.268579, 38.375, 0.0), (7, 0.0, 0.205846, 942.875, 1.0)]
    bad = tmp_path / "bad.csv"
    bad.write_text("step,score\n1,0.5\n")
    assert rfs_metrics.main([str(bad), str(tmp_path / "x.csv")]) == 1  # not its header: one line on stderr, exit 1
