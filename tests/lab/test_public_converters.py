"""The lab's converters of public sources (docs/lab/public_runs.md): lab/public/trinity_csv.py (Trinity-RFT's
tutorial curve exports), lab/public/dequeueing_metrics.py (dequeueing/assignment5-alignment's own JSONL logger),
lab/public/rlor_trl_logs.py (LakshyaChaudhry/rl-or-data's logger, TRL's dicts under trl_logs) and
lab/public/rfs_metrics.py (rasbt/reasoning-from-scratch's GRPO metric CSVs, committed under lab/public/raw/),
lab/public/asycn_swanlab.py (065536/Asycn_verl's SwanLab chart exports), lab/public/terrense_csv.py
(terrense/qwen3-8b-grpo-dapo-lab's flight-recorder CSVs), lab/public/minio3_csv.py (dddraxxx/Mini-o3's curve tables)
lab/public/trace_easyr1.py (maveryn/trace-internal's W&B snapshot of two EasyR1 runs), lab/public/shaider_metrics.py
(s-haider10/finetunned_coding_agent's Tinker loop logger) and lab/public/axiom_metrics.py (Prem01-cyber/AxiomForgeAI's
GRPO loop) and lab/public/drgrpo_csv.py (chaoheng666/DeepRetrieval-GRPO's analysis CSVs), lab/public/var_metrics.py
(esmaeil-abedi-dev/verifier-as-reward's harness log), lab/public/titan_console.py (torchtitan's RL step lines),
lab/public/beita_console.py (beita6969/colab-grpo's GRPO console blocks), lab/public/nb_table_csv.py (a notebook's
HF training-progress table), lab/public/arlca_csv.py (RainyFields/Agentic-RL-CA's per-run CSVs), lab/public/rpm_csv.py
(richardodliu/OpenRLHF's per-step exports), lab/public/rhd_metrics.py (Rohanjain2312/grpo-reward-hacking-demo's logger),
lab/public/wolleaf_csv.py (Wolleaf/Search-R1's step table of three runs), lab/public/akna_series.py
(AknA13/train-infer-mismatch's per-arm series), lab/public/shamanez_csv.py (shamanez/verl's W&B history pulls),
lab/public/sherry_csv.py (sherrywan717/ppo-vs-grpo-math-rlvr's per-update CSVs), lab/public/nik_metrics.py
(Nikhil-iitg27/FinetuneMathReasoning's logger), lab/public/wallace_concat.py (wallacexuhanxiao/search-r1's console
split by a resume), lab/public/rezero_console.py (womogenes/re-zero's prime-rl console), lab/public/slime_tb.py (a
slime run's two TensorBoard writers, THisisPX/slime), lab/public/omnilora_curve.py (SakaiXue6666/Omni-LoRA-RL's
reward curves), lab/public/rlvrexp_plots.py (halflearned/rlvr-experiments' plot data), lab/public/katop_csv.py
(katop1234/softmaxed_rewards' table of runs), lab/public/tlr_curves.py (redswimmer/turn-level-rewards' curves),
lab/public/tb_scalars_json.py (TensorBoard scalars dumped as JSON, sanjuhs/open-env-meta-final-hackathon) and
lab/public/skyrl_console.py (a SkyRL run's console, mert-cemri/CTU-Agent-v0), lab/public/figdata_pairs.py
(Chaoqi31/text2sql-agent-rl's figure data: per-step [reward, frac_reward_zero_std] pairs) and
lab/public/dschat_console.py (DeepSpeed-Chat's step-3 PPO console, microsoft/DeepSpeedExamples) and
lab/public/unorl_metrics.py (Quarkstar/unorl's per-run snapshots of SkyRL's tracker dicts).
Each test's input rows are copied from the sources' files as they are; the expected rows are written out by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

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
asycn_swanlab = _load("asycn_swanlab")
terrense_csv = _load("terrense_csv")
minio3_csv = _load("minio3_csv")
trace_easyr1 = _load("trace_easyr1")
shaider_metrics = _load("shaider_metrics")
axiom_metrics = _load("axiom_metrics")
drgrpo_csv = _load("drgrpo_csv")
var_metrics = _load("var_metrics")
titan_console = _load("titan_console")
beita_console = _load("beita_console")
nb_table_csv = _load("nb_table_csv")
arlca_csv = _load("arlca_csv")
rpm_csv = _load("rpm_csv")
rhd_metrics = _load("rhd_metrics")
wolleaf_csv = _load("wolleaf_csv")
akna_series = _load("akna_series")
figdata_pairs = _load("figdata_pairs")
dschat_console = _load("dschat_console")
shamanez_csv = _load("shamanez_csv")
sherry_csv = _load("sherry_csv")
nik_metrics = _load("nik_metrics")
wallace_concat = _load("wallace_concat")
rezero_console = _load("rezero_console")
slime_tb = _load("slime_tb")
omnilora_curve = _load("omnilora_curve")
tlr_curves = _load("tlr_curves")
rlvrexp_plots = _load("rlvrexp_plots")
katop_csv = _load("katop_csv")
ece405_metrics = _load("ece405_metrics")
cs336hw5_metrics = _load("cs336hw5_metrics")
json_rows = _load("json_rows")
tb_scalars_json = _load("tb_scalars_json")
unorl_metrics = _load("unorl_metrics")

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


# Asycn_verl exp_data/4.15: the first rows of two of its chart files, as downloaded (two runs' columns each)
ASYCN_LR = """step,deepseek1.5b_sync_8gpu_entadapt_initial_lr1e-5-actor/lr_step,deepseek1.5b_sync_8gpu_entadapt_lr1e-5-actor/lr_step
1,1.0000000000000002e-06,1.0000000000000002e-06
2,1.0000000000000002e-06,1.0000000000000002e-06
"""
ASYCN_GRAD = """step,deepseek1.5b_sync_8gpu_entadapt_initial_lr1e-5-actor/grad_norm_step,deepseek1.5b_sync_8gpu_entadapt_lr1e-5-actor/grad_norm_step
1,0.06464524567127228,0.06450425740331411
2,0.061858325731009245,0.06026553083211183
"""


def test_asycn_takes_one_runs_columns_from_every_chart(tmp_path, store):
    (tmp_path / "actor").mkdir()
    (tmp_path / "actor" / "lr.csv").write_text(ASYCN_LR)
    (tmp_path / "actor" / "grad.csv").write_text(ASYCN_GRAD)
    # a summary table beside the charts (exp_data/4.24/figures/summary_stats.csv's header and first row): no column of
    # the run, passed over — before, its "AIME24 peak" read as a step and the whole batch failed
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "summary_stats.csv").write_text("metric,M,A,B\nAIME24 peak,0.3375,0.33125,0.3416666666666667\n")
    out = tmp_path / "run.jsonl"
    # the corpus name asy415-entadapt-ema is experiment deepseek1.5b_sync_8gpu_entadapt_lr1e-5: its column of each
    # file (the second), its prefix and SwanLab's _step suffix removed — verl's keys as logged
    assert asycn_swanlab.main([str(tmp_path), "asy415-entadapt-ema", str(out)]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"step": 1, "actor/grad_norm": 0.06450425740331411, "actor/lr": 1.0000000000000002e-06},
        {"step": 2, "actor/grad_norm": 0.06026553083211183, "actor/lr": 1.0000000000000002e-06}]
    ingest_file(store, out, "asy")
    assert connect(store).execute("SELECT step, grad_norm FROM steps ORDER BY step").fetchall() == [
        (1, 0.06450425740331411), (2, 0.06026553083211183)]
    # a run with no column there: one line, exit 1
    assert asycn_swanlab.main([str(tmp_path), "no-such-run", str(tmp_path / "x.jsonl")]) == 1


# terrense/qwen3-8b-grpo-dapo-lab experiments/A_grpo/metrics/training_metrics.csv: its header and first row, as logged
TERRENSE = 'global_step,wall_iso,restart_epoch,validation_accuracy,dual_clip_fraction,response_width_hit_fraction,cap_hit_rate,t_testing,policy_loss,learning_rate,grad_norm,entropy,kl,clip_fraction,clip_fraction_low,clip_fraction_high,reward_mean,reward_std,reward_max,reward_min,advantage_mean,advantage_std,advantage_min,advantage_max,n_prompts,rollout_n,n_groups,all_correct_groups,all_wrong_groups,mixed_groups,zero_std_groups,all_correct_group_ratio,all_wrong_group_ratio,mixed_group_ratio,zero_std_group_ratio,effective_signal_groups,effective_signal_fraction,group_reward_std_mean,verifier_correct,verifier_incorrect,verifier_parse_failure,verifier_exception,verifier_truncated,response_length_mean,response_length_median,response_length_p95,response_length_max,truncation_rate,eos_rate,total_num_tokens,tokens_per_second,t_rollout,t_old_logprob,t_ref_logprob,t_adv,t_reward,t_actor_update,t_weight_sync,t_checkpoint,t_step,pct_rollout,pct_reward,pct_logprob,pct_actor_update,pct_weight_sync,pct_other,rollout_policy_step,consumer_update_step,policy_staleness_steps,policy_staleness_max,trajectory_span_mean,rollout_train_prob_corr,rollout_train_prob_diff_mean,rollout_train_prob_diff_max,rollout_train_kl,actor_peak_mem_gb,actor_reserved_mem_gb,mfu_actor,kl_loss,value_mean,value_max,value_min,returns_mean,returns_max,returns_min,explained_variance,value_loss,value_clip_fraction,t_critic_update,peak_vram_gpu0,peak_vram_gpu1,peak_vram_gpu2,peak_vram_gpu3' + "\n" + '1,2026-09-11T16:48:44,0,,0.0,0.0078125,,,0.024689029902219772,1e-06,0.20199108496308327,0.34275832772254944,-2.482418312865775e-05,9.249654931409168e-05,,,-0.375,0.9270248108869579,1.0,-1.0,-0.03846050426363945,,-2.474870204925537,1.6201833486557007,16,8.0,16,0,7,9,7,0.0,0.4375,0.5625,0.4375,9,0.5625,0.5186391340619118,,,,,,1713.6953125,,,4409.0,,,240409.0,532.5852021547336,32.352812923491,9.450046602636576,26.18945874646306,0.11695215106010437,,32.076281640678644,3.8416945673525333,,112.85001865774393,28.67,,31.58,28.42,3.4,7.92,1.0,1,0.0,0.0,1.0,0.9997207522392273,0.0027147557120770216,0.1531192660331726,0.0002779373317025602,49.14286422729492,61.287109375,0.6462137511513022,0.00013381729240791174,,,,-0.03846050426363945,1.6201833486557007,-2.474870204925537,,,,,87.374,92.597,92.489,92.489' + "\n"


def test_terrense_names_become_verl_keys_and_the_width_hit_is_not_truncation(tmp_path, store):
    src, out = tmp_path / "m.csv", tmp_path / "out.csv"
    src.write_text(TERRENSE)
    assert terrense_csv.main([str(src), str(out)]) == 0
    header = out.read_text().splitlines()[0].split(",")
    # entropy → actor/entropy, zero_std_group_ratio → zero_std_group_frac, wall_iso left out; the padded-width hit
    # (verl's response_length/clip_ratio) kept under its own name, not truncated_frac
    assert {"actor/entropy", "zero_std_group_frac", "response_width_hit_fraction", "truncated_frac"} <= set(header)
    assert "wall_iso" not in header and "entropy" not in header
    ingest_file(store, out, "terrense")
    # row 1: reward_mean −0.375, entropy 0.34275832772254944, grad_norm 0.20199108496308327, zero_std_group_ratio
    # 0.4375 (7 of 16 groups), cap_hit_rate empty (not logged before the lab's fix) → truncated_frac NULL
    assert connect(store).execute("SELECT step, reward_mean, entropy_mean, grad_norm, zero_std_group_frac, "
                                  "truncated_frac FROM steps").fetchall() == [
        (1, -0.375, 0.34275832772254944, 0.20199108496308327, 0.4375, None)]


# dddraxxx/Mini-o3 exps/train/qwen35_9b_official_tool_h200_rl_20260526_214535/train_reward_curve.csv: header, row 1
MINIO3 = """step,score_mean,reward_mean,step_s,gen_s,response_len_mean,response_len_max,exceed_sample_ratio,accepted_groups,rejected_groups
1,0.494140625,0.494140625,293.66404654458165,168.53202977403998,1032.662109375,6544.0,0.03125,64.0,46.0
"""


def test_minio3_short_names_become_verl_keys(tmp_path, store):
    src, out = tmp_path / "m.csv", tmp_path / "out.csv"
    src.write_text(MINIO3)
    assert minio3_csv.main([str(src), str(out)]) == 0
    header = out.read_text().splitlines()[0].split(",")
    # response_len_mean → verl's response_length/mean, exceed_sample_ratio kept under the fork's batch/ key
    assert "response_length/mean" in header and "batch/exceed_sample_ratio" in header
    assert "response_len_mean" not in header and "exceed_sample_ratio" not in header
    ingest_file(store, out, "minio3")
    # row 1: reward_mean 0.494140625, response_len_mean 1032.662109375 → response_length_mean
    assert connect(store).execute("SELECT step, reward_mean, response_length_mean FROM steps").fetchall() == [
        (1, 0.494140625, 1032.662109375)]


# maveryn/trace-internal paper/trace/data/training_dynamics_wandb.json: run 3B's first update, as stored
TRACE = {"runs": {"3B": {"history": [{
    "answer_accuracy": 0.1708984375, "mean_response_length": 183.234375, "response_clip_ratio": 0.0,
    "sampled_token_entropy_estimate": 0.9443828000618917, "training_reward": 0.20825195312499994, "update": 1}]}}}


def test_trace_snapshot_takes_one_runs_updates(tmp_path, store):
    src, out = tmp_path / "w.json", tmp_path / "out.jsonl"
    src.write_text(json.dumps(TRACE))
    assert trace_easyr1.main([str(src), "3B", str(out)]) == 0
    ingest_file(store, out, "trace")
    # update 1 → step 1; training_reward → reward_mean, answer_accuracy → correct_frac, the length pair through
    # verl's names → response_length_mean 183.234375 and truncated_frac 0.0, the entropy estimate → entropy_mean
    assert connect(store).execute("SELECT step, reward_mean, correct_frac, response_length_mean, truncated_frac, "
                                  "entropy_mean FROM steps").fetchall() == [
        (1, 0.20825195312499994, 0.1708984375, 183.234375, 0.0, 0.9443828000618917)]
    # a run the snapshot does not hold: one line, exit 1; a wrong command line: exit 2
    assert trace_easyr1.main([str(src), "7B", str(tmp_path / "x.jsonl")]) == 1
    assert trace_easyr1.main([str(src)]) == 2


def _converted(module, rows: list[str], tmp_path: Path) -> tuple[list[dict], Path]:
    """``module``'s command line on a JSONL file of ``rows``: exit 0, and the steps it wrote (with the output path)."""
    src, out = tmp_path / "metrics.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(rows) + "\n")
    assert module.main([str(src), str(out)]) == 0
    return [json.loads(x) for x in out.read_text().splitlines()], out


# shaider-run1's step 0 and step 10's eval row (its train row shortened to a few keys), as logged
SHAIDER = ['{"step": 0, "mean_reward": 0.6125, "mean_correct": 0.6171875, "format_rate": 0.953125, "groups_skipped": 5, '
           '"groups_total": 8, "n_datums": 48, "loss:sum": 5847.345407485962}',
           '{"step": 10, "mean_reward": 0.5, "groups_skipped": 2, "groups_total": 8}',
           '{"step": 10, "eval/pass_at_1": 0.35, "eval/format_rate": 0.95, "eval/n_problems": 20}']


def test_shaider_rows_and_the_skipped_group_share(tmp_path, store):
    (first, tenth), out = _converted(shaider_metrics, SHAIDER, tmp_path)
    # 5 of 8 groups skipped (all 16 rewards equal) → 0.625; the eval row merges into step 10's object
    assert (first["reward_mean"], first["correct_frac"], first["zero_std_group_frac"], first["loss"]) == (
        0.6125, 0.6171875, 0.625, 5847.345407485962)
    assert first["train/format_rate"] == 0.953125 and first["train/n_datums"] == 48
    assert (tenth["step"], tenth["zero_std_group_frac"], tenth["eval/pass_at_1"]) == (10, 0.25, 0.35)
    ingest_file(store, out, "shaider")
    assert connect(store).execute("SELECT step, reward_mean, correct_frac, zero_std_group_frac FROM steps "
                                  "ORDER BY step").fetchall() == [(0, 0.6125, 0.6171875, 0.625), (10, 0.5, None, 0.25)]


# AxiomForgeAI's iteration 0 (the eval alone) and iteration 1 (shortened to a few keys), as logged
AXIOM = ['{"iteration": 0, "accuracy": 0.9162, "combined_score": 0.9162, "step_accuracy": 0.9111, "n_scored": 150}',
         '{"iteration": 1, "loss": 0.0006103356778718686, "mean_reward": 0.914308755129325, '
         '"std_reward": 0.1636050993381563, "batch_accuracy": 0.96, "n_groups": 12, "skipped_groups": 8, '
         '"learning_rate": 1.0625000000000002e-06, "training_phase": "GROUNDED_ONLY", "lccp": 0.8141111111111111}']


def test_axiom_iterations_and_the_skipped_group_share(tmp_path):
    (zero, one), out = _converted(axiom_metrics, AXIOM, tmp_path)
    # iteration 0: eval keys only (accuracy → eval/accuracy; step_accuracy is no eval key → train/)
    assert zero == {"step": 0, "eval/accuracy": 0.9162, "eval/combined_score": 0.9162, "train/step_accuracy": 0.9111,
                    "eval/n_scored": 150}
    # 8 skipped of 12 trained + 8 skipped = 20 groups → 0.4; the phase text is dropped
    assert (one["reward_mean"], one["reward_std"], one["correct_frac"], one["lr"], one["zero_std_group_frac"]) == (
        0.914308755129325, 0.1636050993381563, 0.96, 1.0625000000000002e-06, 0.4)
    assert "training_phase" not in one and "train/training_phase" not in one and one["train/lccp"] == 0.8141111111111111
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1}\n')
    assert axiom_metrics.main([str(bad), str(out)]) == 1  # no iteration: one line naming the file, exit 1


# combined_train_log.csv's layout, a few of its columns (values of its first rows, as logged): a stage-1 train row, a
# stage-1 eval row at the same step, a stage-2 train row
DRGRPO = ("reward_mean,flat_reward_group_ratio,loss,loss_pg,loss_kl,phase,stage,step,global_step,stage_step\n"
          "-0.12364100160478275,0.20833333333333334,-0.0959,-0.0959,-1.1e-05,train,Stage 1,1,1,1\n"
          "0.2415922691525325,,,,,eval,Stage 1,1,2,2\n"
          "-0.055032173160173156,0.16666666666666666,0.0082,0.0078,0.00046,train,Stage 2,1,3,1\n")


def test_drgrpo_keeps_one_stages_train_rows_and_names_the_flat_group_share(tmp_path, store):
    src, out = tmp_path / "combined_train_log.csv", tmp_path / "out.csv"
    src.write_text(DRGRPO)
    assert drgrpo_csv.main([str(src), str(out), "1"]) == 0
    # stage 1's train row only (the eval row's reward is a validation score); flat_reward_group_ratio →
    # zero_std_group_frac, loss_pg → loss_policy; the text columns and the row counters dropped
    assert out.read_text().splitlines() == ["reward_mean,zero_std_group_frac,loss,loss_policy,loss_kl,step",
                                            "-0.12364100160478275,0.20833333333333334,-0.0959,-0.0959,-1.1e-05,1"]
    ingest_file(store, out, "drgrpo")
    assert connect(store).execute("SELECT step, reward_mean, zero_std_group_frac FROM steps").fetchall() == [
        (1, -0.12364100160478275, 0.20833333333333334)]
    assert drgrpo_csv.main([str(src), str(out), "2"]) == 0 and out.read_text().splitlines()[1].startswith("-0.0550")
    assert drgrpo_csv.main([str(src), str(out), "3"]) == 1  # no train rows of Stage 3: one line naming the file


# var-cold-naive-s7's config row (shortened), its step-0 evaluation and its step 20, as logged
VAR = ['{"type": "config", "argv": ["train_verifier_reward.py"], "args": {"steps": 400}}',
       '{"step": 0, "cumulative_examples": 0, "mean_reward": null, "loss": null, "nan_steps_skipped": 0, '
       '"n_eval_actions": 80, "accuracy": 0.475, "heldout_violation_rate": 0.4090909090909091, '
       '"heldout_false_refuse_rate": 0.6666666666666666}',
       '{"step": 20, "cumulative_examples": 160, "mean_reward": 0.0, "loss": -0.0291, "nan_steps_skipped": 0, '
       '"n_eval_actions": 80, "accuracy": 0.55, "heldout_violation_rate": 0.0, "heldout_false_refuse_rate": 1.0}']


def test_var_rows_skip_the_config_and_keep_the_evaluation_apart(tmp_path, store):
    (zero, twenty), out = _converted(var_metrics, VAR, tmp_path)
    # the config row has no step: skipped; step 0 has no reward or loss (null: left out), its evaluation kept
    assert zero == {"step": 0, "eval/accuracy": 0.475, "eval/false_authorize_rate": 0.4090909090909091,
                    "eval/false_refuse_rate": 0.6666666666666666, "eval/num_examples": 80}
    assert (twenty["reward"], twenty["loss"], twenty["eval/false_refuse_rate"]) == (0.0, -0.0291, 1.0)
    ingest_file(store, out, "var")
    # TRL's reward → reward_mean; the accuracy → eval_score, the 80 graded actions → eval_size
    assert connect(store).execute("SELECT step, reward_mean, loss, eval_score, eval_size FROM steps ORDER BY step"
                                  ).fetchall() == [(0, None, None, 0.475, 80.0), (20, 0.0, -0.0291, 0.55, 80.0)]


# titan-grpo-sumdigits-50's first lines: two step lines around a printed sample episode, as logged
TITAN = ("[actor=<root>] step   0  loss=0.0183  reward_mean=+0.062  dt=2.2s\n"
         "[actor=<root>]        Break each number into digits: 27 → 2, 7 23 → 2, 3 [ANSWER] 14\n"
         "[actor=<root>] step   1  loss=0.1118  reward_mean=-0.438  dt=1.0s\n")


def test_titan_step_lines_and_nothing_else(tmp_path):
    src, out = tmp_path / "run.log", tmp_path / "out.jsonl"
    src.write_text(TITAN)
    assert titan_console.main([str(src), str(out)]) == 0
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 0, "loss": 0.0183, "reward_mean": 0.062, "step_time": 2.2},
        {"step": 1, "loss": 0.1118, "reward_mean": -0.438, "step_time": 1.0}]
    src.write_text(TITAN + TITAN.splitlines()[0] + "\n")
    assert titan_console.main([str(src), str(out)]) == 1  # a step printed twice: one line naming the file


# beita-p30.beita.log: the lines of step 4 (an update) and step 5 (none; its Metrics block) the converter reads, with
# two of each step's six "DSL质量" lines and one line it does not read
BEITA = """📍 Step 4/500
  📊 DSL质量: fallback=False, ops=4, chain=True, DSL=Programmer -> Custom -> Review -> Revise *
  📊 DSL质量: fallback=False, ops=3, chain=True, DSL=Custom -> Review ? Revise : done
🔧 P27 简单GRPO诊断:
  零方差组: 2/3
  平均奖励: 0.600
🔄 更新策略...
🎯 准确率统计: 3/6 = 50.0% (平均正确性评分: 0.60/1.0)
📍 Step 5/500
  📊 DSL质量: fallback=True, ops=1, chain=False, DSL=Custom (default fallback)
  📊 DSL质量: fallback=True, ops=1, chain=False, DSL=Custom (default fallback)
  📊 P27简单奖励: 0.000
🔧 P27 简单GRPO诊断:
  零方差组: 3/3
  平均奖励: 0.200
⏭️  P28: 跳过更新 - 所有advantage为0，无学习信号
🎯 准确率统计: 0/6 = 0.0% (平均正确性评分: 0.20/1.0)
📊 Metrics:
  step: 5
  loss: 0.0000
  kl_div: 0.0000
  avg_reward: 0.0000
📍 Step 6/500
"""


def test_beita_blocks_become_steps_and_a_cut_off_block_is_left_out(tmp_path, store):
    src, out = tmp_path / "p30.log", tmp_path / "out.jsonl"
    src.write_text(BEITA)
    assert beita_console.main([str(src), str(out)]) == 0
    # step 4: 2 of 3 groups all-equal → 2/3; 3 of 6 right → 0.5; both DSL lines parsed → fallback 0; updated.
    # step 5: 3/3, 0 of 6, both fallbacks → 1.0, no update, its Metrics block (avg_reward, an advantage mean, left
    # out); step 6 has no rewards yet → left out
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows == [
        {"step": 4, "zero_std_group_frac": 2 / 3, "reward_mean": 0.6, "correct_frac": 0.5,
         "beita/correctness_mean": 0.6, "beita/dsl_fallback_frac": 0.0, "beita/policy_updated": 1},
        {"step": 5, "zero_std_group_frac": 1.0, "reward_mean": 0.2, "correct_frac": 0.0,
         "beita/correctness_mean": 0.2, "beita/dsl_fallback_frac": 1.0, "beita/policy_updated": 0,
         "loss": 0.0, "kl_loss": 0.0}]
    ingest_file(store, out, "beita")
    assert connect(store).execute("SELECT step, zero_std_group_frac, correct_frac FROM steps ORDER BY step").fetchall(
    ) == [(4, 2 / 3, 0.5), (5, 1.0, 0.0)]
    src.write_text(BEITA.replace("step: 5", "step: 4"))
    assert beita_console.main([str(src), str(out)]) == 1  # a Metrics block inside another step's: one line


# bsvaz-grpo-count.nbtable.ipynb, cell 35: the progress table's header and first row as the callback wrote them (6 of
# its 22 columns), in a notebook with a second, smaller table without a reward column
NB_TABLE = ("<table border=\"1\" class=\"dataframe\">\n  <thead>\n <tr style=\"text-align: left;\">\n"
            "      <th>Step</th>\n      <th>Training Loss</th>\n      <th>reward</th>\n      <th>reward_std</th>\n"
            "      <th>completions / mean_length</th>\n      <th>kl</th>\n    </tr>\n  </thead>\n  <tbody>\n"
            "    <tr>\n      <td>1</td>\n      <td>0.000000</td>\n      <td>3.123958</td>\n      <td>1.455831</td>\n"
            "      <td>93.375000</td>\n      <td>0.007944</td>\n    </tr>\n"
            "    <tr>\n      <td>2</td>\n      <td>No log</td>\n      <td>3.703125</td>\n      <td>0.969079</td>\n"
            "      <td>75.375000</td>\n      <td>0.009539</td>\n    </tr>\n  </tbody>\n</table><p>")


def test_a_notebook_progress_table_becomes_trls_keys(tmp_path, store):
    other = "<table><thead><tr><th>Step</th><th>Validation Loss</th></tr></thead><tbody><tr><td>1</td><td>0.5</td></tr></tbody></table>"
    notebook = {"cells": [{"cell_type": "code", "outputs": [{"data": {"text/html": other}}]},
                          {"cell_type": "code", "outputs": [{"data": {"text/html": NB_TABLE.splitlines(True)}}]}]}
    src, out = tmp_path / "run.ipynb", tmp_path / "out.csv"
    src.write_text(json.dumps(notebook))
    assert nb_table_csv.main([str(src), str(out)]) == 0
    # Step → step, Training Loss → loss, "completions / mean_length" → TRL's key; "No log" → empty
    assert out.read_text().splitlines() == ["step,loss,reward,reward_std,completions/mean_length,kl",
                                            "1,0.000000,3.123958,1.455831,93.375000,0.007944",
                                            "2,,3.703125,0.969079,75.375000,0.009539"]
    ingest_file(store, out, "nb")
    assert connect(store).execute("SELECT step, reward_mean, reward_std, response_length_mean FROM steps ORDER BY step"
                                  ).fetchall() == [(1, 3.123958, 1.455831, 93.375), (2, 3.703125, 0.969079, 75.375)]
    assert nb_table_csv.main([str(src), str(out), "--cell", "0"]) == 1  # cell 0's table has no reward column


# arlca-w1-gigpo-s0.arlca.csv: its header and first two rows, with the file's CRLF line ends
ARLCA = "step,val_macro_em,reward_mean,avg_turns,clip_ratio,success_rate\r\n0,0.234,,,,\r\n1,,0.266,1.659,0.009,0.266\r\n"


def test_arlca_short_names_become_verl_agent_keys(tmp_path, store):
    src, out = tmp_path / "run.csv", tmp_path / "out.csv"
    src.write_bytes(ARLCA.encode())
    assert arlca_csv.main([str(src), str(out)]) == 0
    assert out.read_text().splitlines()[0] == ("step,val-core/macro_em,reward_mean,episode/length/mean,"
                                               "response_length/clip_ratio,episode/success_rate")
    ingest_file(store, out, "arlca")
    # clip_ratio (the share of turn responses at the token cap) → truncated_frac
    assert connect(store).execute("SELECT step, reward_mean, truncated_frac FROM steps ORDER BY step").fetchall() == [
        (0, None, None), (1, 0.266, 0.009)]


# rpm-math15b-baseline's first two rows (the authors' export of OpenRLHF's console dicts), as committed
RPM = "step,training_avg_at_8,training_reward,prompts,responses\r\n1,0.06640625,-0.619140625,32,256\r\n2,0.0703125,-0.66796875,32,256\r\n"


def test_rpm_reward_and_share_correct_become_openrlhfs_reward_and_correct_frac(tmp_path, store):
    src, out = tmp_path / "training_avg8.csv", tmp_path / "out.csv"
    src.write_bytes(RPM.encode())
    assert rpm_csv.main([str(src), str(out)]) == 0
    ingest_file(store, out, "rpm")
    # training_reward → reward (OpenRLHF's key: reward_mean); training_avg_at_8 → correct_frac; the constants kept
    assert connect(store).execute("SELECT step, reward_mean, correct_frac FROM steps ORDER BY step").fetchall() == [
        (1, -0.619140625, 0.06640625), (2, -0.66796875, 0.0703125)]


# rhd-fixed-kl's step 0 (the pre-training eval) and step 1, as logged
RHD = ['{"step": 0, "eval_reward": 0.5561641454696655, "eval_perplexity": 4.470999240875244, "eval_distinct_2": '
       '0.9973373615713554, "eval_completion_tokens": 39.640625}',
       '{"step": 1, "train_reward": 0.6905238032341003, "train_reward_std": 0.3826591968536377, "kl": 0.0, "pg_loss": '
       '-0.33619541209527304, "grad_norm": 10.8125, "lr": 1.0000000000000002e-06, "completion_tokens": 38.953125, '
       '"elapsed_s": 6.6}']


def test_rhd_train_keys_become_catalogue_columns_and_the_eval_row_stays_apart(tmp_path, store):
    rows, out = _converted(rhd_metrics, RHD, tmp_path)
    # train_reward → reward_mean, train_reward_std → reward_std, completion_tokens → response_length_mean,
    # pg_loss → loss_policy; kl, grad_norm, lr and the eval keys keep their names
    assert rows[1] == {"step": 1, "reward_mean": 0.6905238032341003, "reward_std": 0.3826591968536377, "kl": 0.0,
                       "loss_policy": -0.33619541209527304, "grad_norm": 10.8125, "lr": 1.0000000000000002e-06,
                       "response_length_mean": 38.953125, "elapsed_s": 6.6}
    assert rows[0]["step"] == 0 and "reward_mean" not in rows[0]
    ingest_file(store, out, "rhd")
    assert connect(store).execute(
        "SELECT step, reward_mean, grad_norm, response_length_mean FROM steps ORDER BY step").fetchall() == [
        (0, None, None, None), (1, 0.6905238032341003, 10.8125, 38.953125)]


# the header, R's first row and C's first row of training_metrics.csv (CRLF, as committed)
WOLLEAF = ("stage,model,step,actor_pg_loss,actor_kl_loss,actor_entropy_loss,actor_grad_norm,actor_lr,em,reward,"
           "avg_searches,no_search_ratio,search_cost,posthoc_utility,response_length,response_clip_ratio,step_seconds,"
           "val_em,val_avg_searches,val_no_search_ratio,val_utility\r\n"
           "R,Reproduced,1,0.0,0.000646,1.059223,0.031477,0.0,0.0,0.0,1.0,0.5,0.0,-0.025,710.424988,0.025,407.374843,,,,"
           "\r\n"
           "C,Cost-aware,1,-0.01348,0.000894,1.109136,8.298151,0.0,0.05,0.02375,1.05,0.175,0.02625,0.02375,585.375,0.025,"
           "348.609319,,,,\r\n")


def test_wolleaf_keeps_one_stage_and_names_verls_keys(tmp_path, store):
    src, out = tmp_path / "training_metrics.csv", tmp_path / "out.csv"
    src.write_bytes(WOLLEAF.encode())
    assert wolleaf_csv.main([str(src), "C", str(out)]) == 0
    # stage, model and response_clip_ratio (a tensor-width figure, not truncation) left out; verl's keys restored
    assert out.read_text().splitlines()[0] == (
        "step,actor/pg_loss,actor/kl_loss,actor/entropy_loss,actor/grad_norm,actor/lr,em,critic/score/mean,"
        "tool_calls_mean,no_search_ratio,search_cost,posthoc_utility,response_length/mean,step_seconds,val_em,"
        "val_avg_searches,val_no_search_ratio,val_utility")
    ingest_file(store, out, "wolleaf-c")
    # only C's row: reward 0.02375 (EM 0.05 − 0.025 × 1.05 searches), grad norm 8.298151, length 585.375, 1.05
    # searches per trajectory
    assert connect(store).execute(
        "SELECT step, reward_mean, grad_norm, response_length_mean, tool_calls_mean FROM steps").fetchall() == [
        (1, 0.02375, 8.298151, 585.375, 1.05)]
    assert wolleaf_csv.main([str(src), "X", str(out)]) == 1  # no rows of that stage: refused, named


# two steps of arm nt_bi, every series cut to its first two values, as in rl_series.json
AKNA = {"arms": [{"arm": "nt_bi", "acc": [0.87109375, 0.80859375], "kl_k3": [0.0006062202737666667, 0.0006391328060999513],
                  "gap": [0.008656400255858898, 0.008300773799419403], "band": [0.004843631759285927, 0.004900483414530754],
                  "ess": [0.75942063331604, 0.7072933316230774], "entropy": [0.1423016952487734, 0.12664682378833775],
                  "grad_norm": [0.4019540250301361, 0.5281506776809692], "mean_len": [279.0390625, 298.12109375]}]}


def test_akna_series_become_steps_from_zero(tmp_path, store):
    src, out = tmp_path / "rl_series.json", tmp_path / "out.jsonl"
    src.write_text(json.dumps(AKNA))
    assert akna_series.main([str(src), "nt_bi", str(out)]) == 0
    ingest_file(store, out, "akna")
    # the list index is the step; acc is both the mean 0/1 reward and the share correct; gap → is_log_ratio_abs_mean
    assert connect(store).execute(
        "SELECT step, reward_mean, correct_frac, entropy_mean, grad_norm, response_length_mean, is_log_ratio_abs_mean "
        "FROM steps ORDER BY step").fetchall() == [
        (0, 0.87109375, 0.87109375, 0.1423016952487734, 0.4019540250301361, 279.0390625, 0.008656400255858898),
        (1, 0.80859375, 0.80859375, 0.12664682378833775, 0.5281506776809692, 298.12109375, 0.008300773799419403)]
    assert akna_series.main([str(src), "nt_none", str(out)]) == 1  # an arm the file lacks: refused, named


# shamanez-exp27-damped-ef's header and first row, as pulled (the method's own counters cut off)
SHAMANEZ = ("step,entropy,len_mean,len_max,len_min,len_clip_ratio,score_mean,rewards_mean,pg_loss,grad_norm,pg_clipfrac,"
            "pg_clipfrac_lower,ppo_kl,val_acc_mean1\n"
            "1,5.668811321258545,271.28515625,1080,4,0,0.1376953125,0.1376953125,0.10979854565266578,328.27970123291016,"
            "0.15232932750950567,0.06274748333453317,0.12489382518992898,\n")


def test_shamanez_short_names_become_verl_keys(tmp_path, store):
    src, out = tmp_path / "pull.csv", tmp_path / "out.csv"
    src.write_text(SHAMANEZ)
    assert shamanez_csv.main([str(src), str(out)]) == 0
    ingest_file(store, out, "shamanez")
    # entropy → actor/entropy → entropy_mean; len_mean → response_length/mean; len_clip_ratio → truncated_frac;
    # score_mean → critic/score/mean → reward_mean; grad_norm → actor/grad_norm; pg_clipfrac → clip_region_frac
    assert connect(store).execute(
        "SELECT step, entropy_mean, response_length_mean, truncated_frac, reward_mean, grad_norm FROM steps").fetchall() == [
        (1, 5.668811321258545, 271.28515625, 0.0, 0.1376953125, 328.27970123291016)]


# sherry-ppo-s42's first columns of its header and first row (the reason text columns cut to two)
SHERRY = ("update,reward_mean,reward_std,policy_loss,kl,ratio_mean,clip_fraction,policy_entropy_mean,"
          "policy_grad_norm_available,policy_grad_norm_reason,completion_length_mean,truncation_rate,"
          "zero_advantage_fraction\n"
          "1,0.215625,0.3101001602305294,0.025859501212835312,0.0004086608241777867,0.9955171942710876,"
          "0.00518252607434988,1.1066670417785645,False,reviewed TRL 0.24.0 per-update log row did not expose this "
          "metric,99.25,0.0,0.0\n")


def test_sherry_update_rows_name_trls_keys_and_drop_the_reason_columns(tmp_path, store):
    src, out = tmp_path / "ppo_training_metrics.csv", tmp_path / "out.csv"
    src.write_text(SHERRY)
    assert sherry_csv.main([str(src), str(out)]) == 0
    header = out.read_text().splitlines()[0]
    assert "_available" not in header and "_reason" not in header and header.startswith("step,")
    ingest_file(store, out, "sherry")
    # update → step; clip_fraction → clip_region_frac; policy_entropy_mean → entropy_mean; truncation_rate →
    # truncated_frac; zero_advantage_fraction → zero_std_group_frac
    assert connect(store).execute(
        "SELECT step, reward_mean, clip_region_frac, entropy_mean, response_length_mean, zero_std_group_frac "
        "FROM steps").fetchall() == [(1, 0.215625, 0.00518252607434988, 1.1066670417785645, 99.25, 0.0)]


# nik-run-a's step 25: its train row (shortened to a few keys) and the val row logged at the same step, as logged
NIK = ['{"loss": -3.7501220703125, "mean_reward": 0.48876953125, "mean_kl": 0.0, "zero_variance_fraction": 0.25, '
       '"mean_completion_length": 112.3125, "mean_accuracy_reward": 0.0625, "step": 25, "type": "train"}',
       '{"val_accuracy": 0.445, "val_format_rate": 0.975, "step": 25, "type": "val"}']


def test_nik_train_and_val_rows_merge_into_one_step(tmp_path, store):
    rows, out = _converted(nik_metrics, NIK, tmp_path)
    # train keys → catalogue columns (mean_kl kept as train/mean_kl: its scale is not documented); val → val/<key>
    assert rows == [{"step": 25, "loss": -3.7501220703125, "reward_mean": 0.48876953125, "train/mean_kl": 0.0,
                     "zero_std_group_frac": 0.25, "response_length_mean": 112.3125, "correct_frac": 0.0625,
                     "val/val_accuracy": 0.445, "val/val_format_rate": 0.975}]
    ingest_file(store, out, "nik")
    assert connect(store).execute("SELECT step, reward_mean, zero_std_group_frac, correct_frac FROM steps").fetchall() == [
        (25, 0.48876953125, 0.25, 0.0625)]


# wallace-grpo-bm25: steps 101 and 102 of each of its two files, Ray's colour prefix as committed, each step line cut
# to six of its keys
_WALLACE = "\x1b[36m(TaskRunner pid={pid})\x1b[0m step:{step} - actor/entropy_loss:{ent} - actor/kl_loss:{kl} - " \
           "actor/grad_norm:{g} - critic/score/mean:{r} - response_length/mean:{n} - episode/tool_call_count/mean:{t}\n"
WALLACE_PRE = (_WALLACE.format(pid=7283, step=101, ent="0.721", kl="0.012", g="0.184", r="0.107", n="127.214", t="0.750")
               + _WALLACE.format(pid=7283, step=102, ent="0.808", kl="0.014", g="0.001", r="0.194", n="164.250",
                                 t="1.250"))
WALLACE_RESUMED = (_WALLACE.format(pid=9323, step=101, ent="0.943", kl="0.005", g="0.002", r="0.172", n="185.517",
                                   t="0.812")
                   + _WALLACE.format(pid=9323, step=102, ent="0.642", kl="0.018", g="0.001", r="0.235", n="146.794",
                                     t="1.125"))


def test_wallace_pair_is_written_pre_resume_first_and_ingest_keeps_the_resumed_attempt(tmp_path, store):
    run, out = tmp_path / "wallace-grpo-bm25.wallace", tmp_path / "out.log"
    run.mkdir()
    (run / "train_v2_resume_from100.log").write_text(WALLACE_RESUMED)
    (run / "train_v2.pre_resume_step100.log").write_text(WALLACE_PRE)
    assert wallace_concat.main([str(run), str(out)]) == 0
    assert out.read_text() == WALLACE_PRE + WALLACE_RESUMED  # byte for byte, nothing parsed
    ingest_file(store, out, "wallace")
    # the steps rewind at the second file's 101: the first attempt's 101-102 are dropped, the resumed values kept;
    # critic/score/mean → reward_mean, actor/entropy_loss → entropy_mean, actor/kl_loss → kl_ref_mean
    con = connect(store)
    assert con.execute("SELECT step, reward_mean, entropy_mean, response_length_mean, grad_norm, kl_ref_mean FROM steps "
                       "ORDER BY step").fetchall() == [(101, 0.172, 0.943, 185.517, 0.002, 0.005),
                                                       (102, 0.235, 0.642, 146.794, 0.001, 0.018)]
    assert con.execute("SELECT step, value FROM scalars WHERE key = 'episode/tool_call_count/mean' ORDER BY step"
                       ).fetchall() == [(101, 0.812), (102, 1.125)]  # the searches per episode, kept as a scalar …
    assert con.execute("SELECT step, tool_calls_mean FROM steps ORDER BY step").fetchall() == [
        (101, 0.812), (102, 1.125)]  # … and verl-agent's key fills the catalogue's tool_calls_mean
    (run / "train_v2_resume_from100.log").unlink()
    assert wallace_concat.main([str(run), str(out)]) == 1  # one log, not a pair: one line naming the folder


# rezero-nemotron14b-v2.rezero.txt (logdump.txt), steps 64 and 65 as committed: the copy's timestamps, a tab before
# some lines, an INFO line, and the trainer's [rank_0] repeats (step 64's with the colour code's residue)
REZERO = """Feb 15  01:40:51.122
\t[orchestrator] 09:40:49 SUCCESS Step 64 | Time: 16.58s | Reward: 0.2009 | Throughput: 3904.1 tokens/s | Seq. Length: 1004.9 tokens/sample | Async Level: 0 | Max. Off-Policy Level: 0
[orchestrator] 09:40:49    INFO Starting orchestrator step 65
Feb 15  01:40:54.074
\t[default0]:09:40:53 SUCCESS Step 64 | Time: 15.46s | Loss: -0.0051 | Entropy: 0.3469 | Mismatch KL: 0.0007 | Grad. Norm: 0.0316 | LR: 1.00e-05 | Throughput: 3819 tokens/s | MFU: 4.2% | Peak Mem.: 44.7 GiB
Feb 15  01:40:54.130
\t[rank_0] [32mStep 64 | Time: 15.46s | Loss: -0.0051 | Entropy: 0.3469 | Mismatch KL: 0.0007 | Grad. Norm: 0.0316 | LR: 1.00e-05 | Throughput: 3819 tokens/s | MFU: 4.2% | Peak Mem.: 44.7 GiB
Feb 15  01:41:09.136
\t[orchestrator] 09:41:06 SUCCESS Step 65 | Time: 16.85s | Reward: 0.1492 | Throughput: 4068.6 tokens/s | Seq. Length: 1064.8 tokens/sample | Async Level: 0 | Max. Off-Policy Level: 0
[orchestrator] 09:41:06    INFO Starting orchestrator step 66
Feb 15  01:41:11.246
\t[default0]:09:41:11 SUCCESS Step 65 | Time: 16.49s | Loss: -0.0019 | Entropy: 0.3597 | Mismatch KL: 0.0008 | Grad. Norm: 0.0174 | LR: 1.00e-05 | Throughput: 3923 tokens/s | MFU: 4.4% | Peak Mem.: 44.7 GiB
Feb 15  01:41:12.139
\t[rank_0] 09:41:11 SUCCESS Step 65 | Time: 16.49s | Loss: -0.0019 | Entropy: 0.3597 | Mismatch KL: 0.0008 | Grad. Norm: 0.0174 | LR: 1.00e-05 | Throughput: 3923 tokens/s | MFU: 4.4% | Peak Mem.: 44.7 GiB
"""  # noqa: E501


def test_rezero_orchestrator_and_trainer_lines_of_a_step_merge(tmp_path, store):
    src, out = tmp_path / "logdump.txt", tmp_path / "out.jsonl"
    src.write_text(REZERO)
    assert rezero_console.main([str(src), str(out)]) == 0
    # orchestrator Reward → reward_mean, Seq. Length → prime/seq_len_mean, Async Level → prime/async_level; trainer
    # Loss, Entropy → entropy_mean, Grad. Norm → grad_norm, LR, Mismatch KL → prime/mismatch_kl; the equal [rank_0]
    # repeats add nothing
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 64, "reward_mean": 0.2009, "prime/seq_len_mean": 1004.9, "prime/async_level": 0, "loss": -0.0051,
         "entropy_mean": 0.3469, "grad_norm": 0.0316, "lr": 1e-05, "prime/mismatch_kl": 0.0007},
        {"step": 65, "reward_mean": 0.1492, "prime/seq_len_mean": 1064.8, "prime/async_level": 0, "loss": -0.0019,
         "entropy_mean": 0.3597, "grad_norm": 0.0174, "lr": 1e-05, "prime/mismatch_kl": 0.0008}]
    ingest_file(store, out, "rezero")
    con = connect(store)
    assert con.execute("SELECT step, reward_mean, entropy_mean, grad_norm FROM steps ORDER BY step").fetchall() == [
        (64, 0.2009, 0.3469, 0.0316), (65, 0.1492, 0.3597, 0.0174)]
    assert con.execute("SELECT value FROM scalars WHERE key = 'prime/seq_len_mean' ORDER BY step").fetchall() == [
        (1004.9,), (1064.8,)]
    src.write_text(REZERO.replace("[32mStep 64 | Time: 15.46s | Loss: -0.0051", "[32mStep 64 | Time: 15.46s | Loss: 0.0051"))
    assert rezero_console.main([str(src), str(out)]) == 1  # a repeat with other values: one line naming the file


# px-geo3k-v3 (THisisPX/slime), rollouts 4 and 5 as its two event files hold them: the RolloutManager logs no
# zero_std/count_1 at rollout 4 (no group all 1), the actor logs train/* at optimizer steps 8-11 (2 per rollout)
SLIME_MANAGER = {"rollout/response_len/mean": {4: 1988.4921875, 5: 1602.46875},
                 "rollout/zero_std/count_0": {4: 6.0, 5: 4.0}, "rollout/zero_std/count_1": {5: 4.0},
                 "perf/rollout_time": {4: 93.62744903564453, 5: 93.42491912841797}}
SLIME_ACTOR = {"rollout/raw_reward": {4: 0.328125, 5: 0.46875},
               "rollout/response_lengths": {4: 1988.4921875, 5: 1602.46875},
               "rollout/truncated": {4: 0.390625, 5: 0.328125},
               "train/entropy_loss": {8: 0.2642834484577179, 9: 0.3071088492870331, 10: 0.22137030959129333,
                                      11: 0.25015050172805786},
               "train/grad_norm": {8: 0.7452957630157471, 9: 0.7572104930877686, 10: 1.000025987625122,
                                   11: 0.5137260556221008}}


def test_slime_writers_join_per_rollout(tmp_path, store):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    run, out = tmp_path / "px-geo3k-v3.g16.slimetb", tmp_path / "out.jsonl"
    for stamp, tags in (("20260707_090614", SLIME_MANAGER), ("20260707_090856", SLIME_ACTOR)):
        w = SummaryWriter(log_dir=str(run / stamp))  # slime's tensorboard writer: add_scalar(tag, value, step)
        for tag, series in tags.items():
            for step, value in series.items():
                w.add_scalar(tag, value, step)
        w.close()
    assert slime_tb.main([str(run), "16", str(out)]) == 0
    # 4 optimizer steps for 2 rollouts → k = 2: steps 8, 9 → rollout 4, steps 10, 11 → rollout 5, averaged;
    # zero_std_group_frac: rollout 4 (6 + 0) / 16 = 0.375, rollout 5 (4 + 4) / 16 = 0.5 (the values are float32's, exact)
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 4, "slime/rollout/response_len/mean": 1988.4921875, "rollout_time": 93.62744903564453,
         "zero_std_group_frac": 0.375, "reward_mean": 0.328125, "response_length_mean": 1988.4921875,
         "truncated_frac": 0.390625, "entropy_mean": (0.2642834484577179 + 0.3071088492870331) / 2,
         "grad_norm": (0.7452957630157471 + 0.7572104930877686) / 2},
        {"step": 5, "slime/rollout/response_len/mean": 1602.46875, "rollout_time": 93.42491912841797,
         "zero_std_group_frac": 0.5, "reward_mean": 0.46875, "response_length_mean": 1602.46875,
         "truncated_frac": 0.328125, "entropy_mean": (0.22137030959129333 + 0.25015050172805786) / 2,
         "grad_norm": (1.000025987625122 + 0.5137260556221008) / 2}]
    ingest_file(store, out, "slime")
    assert connect(store).execute(
        "SELECT step, reward_mean, zero_std_group_frac, truncated_frac, response_length_mean FROM steps ORDER BY step"
    ).fetchall() == [(4, 0.328125, 0.375, 0.390625, 1988.4921875), (5, 0.46875, 0.5, 0.328125, 1602.46875)]
    assert slime_tb.main([str(run), "4", str(out)]) == 1  # 6 all-equal groups of 4: N_GROUPS too small, named
    assert slime_tb.main([str(run), "g16", str(out)]) == 2  # not a number: the usage line


# omnilora-simul-20.omnilora.json: its _meta (two of its seven keys) and four of its 20 steps, as committed
OMNILORA = """{
 "_meta": {
  "指标": "每步 rollout/raw_reward（整段拼接译文的 BLEU，batch 均值）",
  "步号": "1 起"
 },
 "steps": {
  "1": 0.11,
  "2": 0.064,
  "9": 0.22,
  "10": 0.24
 }
}
"""


def test_omnilora_curve_steps_in_numeric_order(tmp_path, store):
    src, out = tmp_path / "simul-20step-curve.json", tmp_path / "out.jsonl"
    src.write_text(OMNILORA, encoding="utf-8")
    assert omnilora_curve.main([str(src), str(out)]) == 0
    # each "steps" entry → step (numbered from 1, as the file numbers them) and reward_mean; "10" after "9"
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 1, "reward_mean": 0.11}, {"step": 2, "reward_mean": 0.064}, {"step": 9, "reward_mean": 0.22},
        {"step": 10, "reward_mean": 0.24}]
    ingest_file(store, out, "omnilora")
    assert connect(store).execute("SELECT step, reward_mean FROM steps ORDER BY step").fetchall() == [
        (1, 0.11), (2, 0.064), (9, 0.22), (10, 0.24)]
    src.write_text('{"_meta": {}}')
    assert omnilora_curve.main([str(src), str(out)]) == 1  # no steps object: one line naming the file


# halflearned/rlvr-experiments' writeup/interactive/gsm8k_plots.js: its head, one run cut to its first two steps (the
# file's values, its two eval points moved onto them) and the const that follows, as committed
RLVREXP = """// Auto-generated experiment comparison plots
// Generated by generate_staleness_plots.py
// Prefix: gsm8k

const gsm8kData = {
  "runs": [
    {
      "id": "grpo-lr5e6",
      "label": "GRPO lr=5e-6",
      "color": "#10b981",
      "steps": [1, 2],
      "reward_overall": [0.5191947565543071, 0.5912162162162162],
      "frac_all_correct": [0.0898876404494382, 0.11351351351351352],
      "frac_all_wrong": [0.11235955056179775, 0.04864864864864865],
      "completion_len": [108.3125, 85.25],
      "loss": [-0.0002765991957858205, -0.00012778968084603548],
      "kl_mean": [0.0005709240213036537, 0.0005926801241002977],
      "entropy_mean": [0.38709110021591187, 0.3434864282608032],
      "eval_gsm8k_steps": [2],
      "eval_gsm8k_accuracy": [0.7111],
      "passk_gsm8k_pass128_k": [1, 2],
      "passk_gsm8k_pass128_rate": [0.7, 0.8]
    }
  ],
  "exclude_benchmarks": ["ifeval"]
};
const gsm8kPresets = [];
"""


def test_rlvrexp_plots_one_run_of_the_plot_data(tmp_path, store):
    src, out = tmp_path / "gsm8k_plots.js", tmp_path / "out.jsonl"
    src.write_text(RLVREXP, encoding="utf-8")
    assert rlvrexp_plots.main([str(src), "grpo-lr5e6", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    # zero_std_group_frac = frac_all_correct + frac_all_wrong: 0.0898876… + 0.1123595… = 0.2022471… at step 1,
    # 0.1135135… + 0.0486486… = 0.1621621… at step 2; eval at its own step (2); the pass@k curve (no step) left out
    assert rows[0]["zero_std_group_frac"] == pytest.approx(0.20224719101123595)
    assert rows[1]["zero_std_group_frac"] == pytest.approx(0.16216216216216217)
    assert {k: v for k, v in rows[0].items() if k != "zero_std_group_frac"} == {
        "step": 1, "reward_mean": 0.5191947565543071, "entropy_mean": 0.38709110021591187,
        "kl_ref_mean": 0.0005709240213036537, "response_length_mean": 108.3125, "loss": -0.0002765991957858205}
    assert rows[1]["eval/gsm8k_accuracy"] == 0.7111 and "eval/gsm8k_accuracy" not in rows[0]
    assert not any(k.startswith("passk") for r in rows for k in r)
    ingest_file(store, out, "rlvrexp")
    assert connect(store).execute("SELECT step, reward_mean, response_length_mean FROM steps ORDER BY step"
                                  ).fetchall() == [(1, 0.5191947565543071, 108.3125), (2, 0.5912162162162162, 85.25)]
    assert rlvrexp_plots.main([str(src), "dapo-lr5e6", str(out)]) == 1  # a run the file lacks: one line naming it
    src.write_text("const x = 1;\n")
    assert rlvrexp_plots.main([str(src), "grpo-lr5e6", str(out)]) == 1  # no plot data


# katop1234/softmaxed_rewards' results/all_experiments.csv: its header and four of its rows, as committed
KATOP = """experiment,tau,step,train_success,mean_reward,entropy,grad_norm,response_len,eval_success
baseline,,11,0.08,0.18,0.87,2.11,159.33,0.12
softmax_tau1.0,1.0,9,0.0,0.01,0.79,2.69,120.5,
softmax_tau1.0,1.0,10,0.0,0.01,0.78,2.59,121.44,
baseline,,2,0.12,0.19,1.09,1.47,323.78,
"""


def test_katop_csv_takes_one_experiment(tmp_path, store):
    src, out = tmp_path / "all_experiments.csv", tmp_path / "out.jsonl"
    src.write_text(KATOP)
    assert katop_csv.main([str(src), "baseline", str(out)]) == 0
    # the baseline's two rows, steps ascending; eval_success only where the row has one; tau left out
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 2, "reward_mean": 0.19, "correct_frac": 0.12, "entropy_mean": 1.09, "grad_norm": 1.47,
         "response_length_mean": 323.78},
        {"step": 11, "reward_mean": 0.18, "correct_frac": 0.08, "entropy_mean": 0.87, "grad_norm": 2.11,
         "response_length_mean": 159.33, "eval/success": 0.12}]
    assert katop_csv.main([str(src), "softmax_tau1.0", str(out)]) == 0
    ingest_file(store, out, "tau1")
    assert connect(store).execute("SELECT step, correct_frac, response_length_mean FROM steps ORDER BY step"
                                  ).fetchall() == [(9, 0.0, 120.5), (10, 0.0, 121.44)]
    assert katop_csv.main([str(src), "softmax_tau9", str(out)]) == 1  # no rows of it: one line naming it


# redswimmer/turn-level-rewards' results/phase7c-curves.json: one GRPO arm (its first two [step, value] pairs of each
# metric) and one PPO arm (its first two entries of each list), in the file's two layouts, as committed
TLR = ('{"grpo_mr":{"reward":[[0,-0.1563],[2,0.1125]],"grad_norm":[[0,12.21],[1,10.95]],"zero_std":[[0,0.0],[2,0.0]]},'
       '"mt_ppo":{"reward":[-0.4,-0.4],"format_compliance":[0.5,0.5],"mean_tool_turns":[0.25,0.5],'
       '"retrieval_fraction":[0.25,0.125],"step":[0,1]}}')


def test_tlr_curves_take_one_arm_in_either_layout(tmp_path, store):
    src, out = tmp_path / "phase7c-curves.json", tmp_path / "out.jsonl"
    src.write_text(TLR)
    assert tlr_curves.main([str(src), "grpo_mr", str(out)]) == 0
    # pairs per metric: step 0 has all three, step 1 the gradient norm alone, step 2 the reward and the zero-std share
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 0, "reward_mean": -0.1563, "grad_norm": 12.21, "zero_std_group_frac": 0.0},
        {"step": 1, "grad_norm": 10.95},
        {"step": 2, "reward_mean": 0.1125, "zero_std_group_frac": 0.0}]
    assert tlr_curves.main([str(src), "mt_ppo", str(out)]) == 0
    # parallel lists: mean_tool_turns → tool_calls_mean; format_compliance, retrieval_fraction keep their names
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 0, "reward_mean": -0.4, "format_compliance": 0.5, "tool_calls_mean": 0.25, "retrieval_fraction": 0.25},
        {"step": 1, "reward_mean": -0.4, "format_compliance": 0.5, "tool_calls_mean": 0.5, "retrieval_fraction": 0.125}]
    ingest_file(store, out, "tlr")
    assert connect(store).execute("SELECT step, reward_mean, tool_calls_mean FROM steps ORDER BY step").fetchall() == [
        (0, -0.4, 0.25), (1, -0.4, 0.5)]
    assert tlr_curves.main([str(src), "ppo", str(out)]) == 1  # an arm the file lacks: one line naming it
    src.write_text('{"mt_ppo": {"reward": [1.0], "step": [0, 1]}}')
    assert tlr_curves.main([str(src), "mt_ppo", str(out)]) == 1  # lists of unequal length


# the first row of the learning-rate sweep's 1e-5 run (train_history.jsonl @ 81f8644, as logged) and a row of an
# unclipped run whose gradient overflowed (its values made up for the test, in the logger's key set and JSON form)
ECE1 = ('{"train_step": 1, "loss": 0.0024613960458736983, "grad_norm": 0.059814453125, "mean_token_entropy": '
        '0.07956372688931879, "mean_reward": 0.02734375, "mean_answer_reward": 0.02734375, "mean_format_reward": '
        '0.16796875, "response_tokens": 70890, "grpo_step": 1, "epoch_within_rollout_batch": 1, "elapsed_seconds": '
        '104.63836033199914}')
ECE_INF = ('{"train_step": 2, "loss": NaN, "grad_norm": Infinity, "mean_token_entropy": 0.5, "mean_reward": 0.0, '
           '"mean_answer_reward": 0.0, "mean_format_reward": 0.0, "response_tokens": 1024, "grpo_step": 1, '
           '"epoch_within_rollout_batch": 2, "elapsed_seconds": 1.0}')


def test_ece405_optimizer_steps_and_their_overflowing_gradients(tmp_path, store):
    src = tmp_path / "train_history.jsonl"
    src.write_text(ECE1 + "\n" + ECE_INF + "\n")
    out = tmp_path / "out.jsonl"
    assert ece405_metrics.main([str(src), str(out)]) == 0
    one, two = (json.loads(line) for line in out.read_text().splitlines())
    # train_step is the step; the five catalogue keys renamed, everything else kept under train/<key>
    assert (one["step"], one["reward_mean"], one["correct_frac"], one["entropy_mean"], one["grad_norm"]) == (
        1, 0.02734375, 0.02734375, 0.07956372688931879, 0.059814453125)
    assert one["loss"] == 0.0024613960458736983 and one["train/response_tokens"] == 70890
    assert "train_step" not in one and "response_length_mean" not in one  # Σ tokens is no mean length
    # the overflow is kept as the log has it (json writes NaN / Infinity back)
    assert two["step"] == 2 and two["grad_norm"] == float("inf") and two["loss"] != two["loss"]
    ingest_file(store, out, run="ece")
    got = connect(store).sql("SELECT step, reward_mean, correct_frac, grad_norm FROM steps WHERE run = 'ece' "
                             "ORDER BY step").fetchall()
    assert got[0] == (1, 0.02734375, 0.02734375, 0.059814453125) and got[1][0] == 2
    # a row without its step is one line naming it, nothing written
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"loss": 1.0}\n')
    assert ece405_metrics.main([str(bad), str(tmp_path / "none.jsonl")]) == 1 and not (tmp_path / "none.jsonl").exists()


# xuehaiwuya1214/CS336-hw5's first optimizer step and an evaluation row at the same optimizer step (keys and form as
# its loop writes them, grpo.py @ e2b82af; values of its first row)
HW5_TRAIN = ('{"grpo_step": 1.0, "rollout_epoch": 0.0, "optimizer_step": 1.0, "train/loss": 0.0, "train/grad_norm": '
             '0.15234375, "train/token_entropy": 0.76171875, "train/num_response_tokens": 1024.0, "rollout/reward": '
             '0.03515625, "rollout/reward_std": 0.18453538417816162, "rollout/format_reward": 0.203125, '
             '"rollout/answer_reward": 0.03515625, "train/clip_fraction": 0.0}')
HW5_EVAL = '{"grpo_step": 1.0, "optimizer_step": 1.0, "eval/reward": 0.5, "eval/num_examples": 64}'


def test_cs336hw5_optimizer_steps_and_the_evaluation_row_merge(tmp_path, store):
    (step,) = cs336hw5_metrics.convert([json.loads(HW5_TRAIN), json.loads(HW5_EVAL)])
    # optimizer_step is the step and no value; the five catalogue keys renamed; the rest and the evaluation's keys kept
    assert (step["step"], step["reward_mean"], step["reward_std"], step["correct_frac"], step["entropy_mean"],
            step["grad_norm"]) == (1, 0.03515625, 0.18453538417816162, 0.03515625, 0.76171875, 0.15234375)
    assert "optimizer_step" not in step and step["train/num_response_tokens"] == 1024.0
    assert (step["eval/reward"], step["eval/num_examples"]) == (0.5, 64)
    with pytest.raises(ValueError, match=r"line 1: no .optimizer_step. \(the step\) in the row"):
        cs336hw5_metrics.convert([{"grpo_step": 1.0}])


def test_json_rows_writes_the_list_at_a_key_path_and_names_a_missing_key(tmp_path, store):
    # a results file holding two runs' W&B rows (verl keys) under training.<run>.rows, and other sections beside them
    doc = {"training": {"a": {"run_id": "x1", "rows": [{"_step": 1, "critic/score/mean": 0.25},
                                                       {"_step": 2, "critic/score/mean": 0.5}]},
                        "b": {"rows": []}}, "aime": {}}
    src = tmp_path / "results.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "a.jsonl"
    assert json_rows.main([str(src), "training.a.rows", str(out)]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == doc["training"]["a"]["rows"]
    ingest_file(store, out, run="a")
    # verl's score is the reward: 0.25 and 0.5 at steps 1 and 2
    assert connect(store).sql("SELECT step, reward_mean FROM steps WHERE run = 'a' ORDER BY step").fetchall() == [
        (1, 0.25), (2, 0.5)]
    with pytest.raises(KeyError, match="no key 'c' at training"):
        json_rows.rows_at(doc, "training.c.rows")
    with pytest.raises(ValueError, match="training.a.run_id is not a list of objects"):
        json_rows.rows_at(doc, "training.a.run_id")
    assert json_rows.main([str(src), "nope", str(tmp_path / "none.jsonl")]) == 1
    assert not (tmp_path / "none.jsonl").exists()


# cadforge-2b-dense-grpo.tbscalars.json: the first two points of two of its tags, and its one tag logged twice at a step
# (train/epoch at the last step, 40), as the file holds them
TB_SCALARS = {
    "train/reward": [{"step": 1.0, "value": 0.33250001072883606, "wall_time": 1777145749.1654227},
                     {"step": 2.0, "value": 0.3700000047683716, "wall_time": 1777145841.5365279}],
    "train/frac_reward_zero_std": [{"step": 1.0, "value": 0.5, "wall_time": 1777145749.167907},
                                   {"step": 2.0, "value": 1.0, "wall_time": 1777145841.5393407}],
    "train/epoch": [{"step": 40.0, "value": 4.0, "wall_time": 1777149343.0652668},
                    {"step": 40.0, "value": 4.0, "wall_time": 1777149344.2916083}],
}


def test_tb_scalars_json_becomes_the_long_table_ingest_pivots(tmp_path, store):
    src, out = tmp_path / "export.json", tmp_path / "out.csv"
    src.write_text(json.dumps(TB_SCALARS))
    assert tb_scalars_json.main([str(src), str(out)]) == 0
    # one row per point, tag by tag in the file's order, steps as integers, values and wall times as given
    assert out.read_text().splitlines() == [
        "step,tag,value,wall_time",
        "1,train/reward,0.33250001072883606,1777145749.1654227", "2,train/reward,0.3700000047683716,1777145841.5365279",
        "1,train/frac_reward_zero_std,0.5,1777145749.167907", "2,train/frac_reward_zero_std,1.0,1777145841.5393407",
        "40,train/epoch,4.0,1777149343.0652668", "40,train/epoch,4.0,1777149344.2916083"]
    ingest_file(store, out, run="tb")
    # train/ stripped, TRL's keys mapped: reward → reward_mean, frac_reward_zero_std → zero_std_group_frac; step 40
    # holds only the epoch (no catalogue column): a row of its own
    rows = connect(store).sql("SELECT step, reward_mean, zero_std_group_frac FROM steps WHERE run = 'tb' ORDER BY step"
                              ).fetchall()
    assert rows[:2] == [(1, pytest.approx(0.3325), 0.5), (2, pytest.approx(0.37), 1.0)]
    # not an export: one line naming the file and what it found, nothing written
    for bad, why in [([1, 2], "the top level is a list"), ({"train/reward": 3}, "holds a int"),
                     ({"train/reward": [{"value": 1}]}, "point 0: not an object with step and value")]:
        src.write_text(json.dumps(bad))
        target = tmp_path / "none.csv"
        assert tb_scalars_json.main([str(src), str(target)]) == 1 and not target.exists()
        with pytest.raises(ValueError, match=why):
            list(tb_scalars_json.long_rows(bad))


# ctu-skyrl-taubench-3b-grpo.skyrl.log (mert-cemri/CTU-Agent-v0's SkyRL console), lines 320, 355, 363, 364, 407, 415
# and 450 as logged: the progress bar at 0 (sharing its line with a W&B warning), then each step's reward line, status
# dict and progress bar, steps 1 and 2
SKYRL = [
    "Training Step Progress:   0%|          | 0/1150 [00:00<?, ?it/s]wandb: WARNING Tried to log to "
    "step 0 that is less than the current step 9. Steps must be monotonically increasing, so this da"
    "ta will be ignored. See https://wandb.me/define-metric to log data out of order.",
    "2025-08-05 00:28:37.487 | INFO     | skyrl_train.trainer:compute_advantages_and_returns:962 - a"
    "vg_raw_rewards: 0.40625, avg_response_length: 640.9609375",
    "2025-08-05 00:30:18.327 | INFO     | skyrl_train.trainer:train:390 - {'policy_loss': 0.00070250"
    "43790539106, 'policy_lr': 7.91666714405892e-08, 'ppo_clip_ratio': 0.003758988498399655, 'policy"
    "_entropy': 1.2624313086271286, 'policy_kl': 0.0026074589259224012, 'raw_grad_norm': 0.637273654"
    "3416977, 'policy_update_steps': 4.0}",
    "Training Step Progress:   0%|          | 1/1150 [16:48<321:56:36, 1008.70s/it]2025-08-05 00:30:"
    "18.353 | INFO     | skyrl_train.trainer:train:304 - Started: 'step'",
    "2025-08-05 00:47:02.182 | INFO     | skyrl_train.trainer:compute_advantages_and_returns:962 - a"
    "vg_raw_rewards: 0.4375, avg_response_length: 652.4817708333334",
    "2025-08-05 00:49:59.540 | INFO     | skyrl_train.trainer:train:390 - {'policy_loss': 0.00126452"
    "20073560874, 'policy_lr': 2.791666648960245e-07, 'ppo_clip_ratio': 0.007767399947624654, 'polic"
    "y_entropy': 1.379147404183944, 'policy_kl': 0.0048147334552292404, 'raw_grad_norm': 0.762420997"
    "0235825, 'policy_update_steps': 4.0}",
    "Training Step Progress:   0%|          | 2/1150 [54:48<560:07:39, 1756.50s/it]2025-08-05 01:08:"
    "18.317 | INFO     | skyrl_train.trainer:train:304 - Started: 'step'",
]


def test_skyrl_status_dicts_and_reward_lines(tmp_path):
    skyrl_console = _load("skyrl_console")
    src, out, store = tmp_path / "run.log", tmp_path / "out.jsonl", tmp_path / "store"
    src.write_text("\n".join(SKYRL) + "\n")
    assert skyrl_console.main([str(src), str(out)]) == 0
    # the k-th status dict is step k, its reward line the one before it; policy_update_steps is not read;
    # policy_entropy (unmasked over the response window) keeps a name of its own
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 1, "reward_mean": 0.40625, "response_length_mean": 640.9609375, "loss": 0.0007025043790539106,
         "lr": 7.91666714405892e-08, "clip_region_frac": 0.003758988498399655,
         "skyrl/policy_entropy_unmasked": 1.2624313086271286,
         "kl_ref_mean": 0.0026074589259224012, "grad_norm": 0.6372736543416977},
        {"step": 2, "reward_mean": 0.4375, "response_length_mean": 652.4817708333334, "loss": 0.0012645220073560874,
         "lr": 2.791666648960245e-07, "clip_region_frac": 0.007767399947624654,
         "skyrl/policy_entropy_unmasked": 1.379147404183944,
         "kl_ref_mean": 0.0048147334552292404, "grad_norm": 0.7624209970235825}]
    ingest_file(store, out, "skyrl")
    # the catalogue's columns are filled; the unmasked entropy (its own name) leaves entropy_mean empty
    assert connect(store).execute("SELECT step, reward_mean, grad_norm, clip_region_frac, entropy_mean FROM steps "
                                  "ORDER BY step").fetchall() == [
        (1, 0.40625, 0.6372736543416977, 0.003758988498399655, None),
        (2, 0.4375, 0.7624209970235825, 0.007767399947624654, None)]
    # step 2's status dict missing: its progress bar (2/1150) is ahead of the dicts read — refused, one line, exit 1
    src.write_text("\n".join(SKYRL[:5] + SKYRL[6:]) + "\n")
    assert skyrl_console.main([str(src), str(out)]) == 1
    src.write_text(SKYRL[0] + "\n")
    assert skyrl_console.main([str(src), str(out)]) == 1  # no status dict at all


# the file's first three pairs of each arm, as committed (assets/figdata/figdata.json @ 5633028), and one of its
# final evaluations (not a series: left alone)
FIGDATA = {"r1_v2": [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]], "r2_v2": [[0.0, 1.0], [0.0, 1.0], [0.03285, 0.875]],
           "evals": {"base": {"n": 1534, "ex": 0.4498}}}


def test_figdata_pairs_are_trl_reward_and_zero_std_share(tmp_path, store):
    src, out = tmp_path / "figdata.json", tmp_path / "out.jsonl"
    src.write_text(json.dumps(FIGDATA))
    assert figdata_pairs.main([str(src), "r2_v2", str(out)]) == 0
    ingest_file(store, out, "chaoqi")
    # the pair's rank from 1 is the step; TRL's reward → reward_mean, frac_reward_zero_std → zero_std_group_frac
    assert connect(store).execute(
        "SELECT step, reward_mean, zero_std_group_frac FROM steps ORDER BY step").fetchall() == [
        (1, 0.0, 1.0), (2, 0.0, 1.0), (3, 0.03285, 0.875)]
    assert figdata_pairs.main([str(src), "r3_v2", str(out)]) == 1  # a key the file lacks: refused, named
    src.write_text(json.dumps({"r1_v2": [[0.0, 1.0], [0.5]]}))
    assert figdata_pairs.main([str(src), "r1_v2", str(out)]) == 1  # not a pair of numbers: refused, named


# the shared DeepSpeed-Chat step-3 log's (training_log_output/actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log
# @ 3a77097) first line and its lines 2 and 18-30 — steps 2 and 3, step 2 after two fp16 overflow lines — as committed
DSCHAT_CMD = ("cmd = deepspeed main.py --data_path Dahoas/rm-static --data_split 2,4,4 --actor_model_name_or_path "
              "~/DeepSpeedExamples/applications/DeepSpeed-Chat/training/step1_supervised_finetuning/output "
              "--critic_model_name_or_path ~/DeepSpeedExamples/applications/DeepSpeed-Chat/training/"
              "step2_reward_model_finetuning/output --num_padding_at_beginning 1 --per_device_train_batch_size 4 "
              "--per_device_mini_train_batch_size 4 --generation_batch_numbers 1 --ppo_epochs 1 --max_answer_seq_len "
              "256 --max_prompt_seq_len 256 --actor_learning_rate 9.65e-6 --critic_learning_rate 5e-6 "
              "--actor_weight_decay 0. --critic_weight_decay 0. --num_train_epochs 1 --lr_scheduler_type cosine "
              "--gradient_accumulation_steps 1 --num_warmup_steps 100 --deepspeed --seed 1234 --enable_hybrid_engine "
              "--actor_zero_stage 2 --critic_zero_stage 2 --enable_ema --output_dir "
              "./output_fourDatasets_NoWeightDecay_withDropout_mixed")
DSCHAT = [
    DSCHAT_CMD,
    "***** Running training *****",
    "[2023-04-18 08:48:09,105] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384",
    "[2023-04-18 08:48:09,378] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384",
    "epoch: 0|step: 2|ppo_ep: 1|act_loss: 0.22314453125|cri_loss: 0.1396484375|unsuper_loss: 0.0",
    "average reward score: 0.195556640625",
    "-------------------------------------------------------------------------------------",
    "|E2E latency=3.91s |Gather latency=0.00s (0.00%) |Generate time=2.79s (71.38%) |Training time=0.82s (20.99%) "
    "|Others=0.30 (7.63%)|CurSamplesPerSec=16.35 |AvgSamplesPerSec=12.28",
    "epoch: 0|step: 3|ppo_ep: 1|act_loss: 0.31298828125|cri_loss: 0.2052001953125|unsuper_loss: 0.0",
    "average reward score: 0.0030517578125",
]


def test_dschat_losses_undo_the_summed_printout(tmp_path, store):
    src, out = tmp_path / "run.dschat.log", tmp_path / "out.jsonl"
    src.write_text("\n".join(DSCHAT) + "\n")
    assert dschat_console.main([str(src), str(out)]) == 0
    # printed cri = actor + critic, act = 2 actor + critic: actor = act - cri, critic = 2 cri - act
    # step 2: 0.22314453125 - 0.1396484375 = 0.08349609375; 0.279296875 - 0.22314453125 = 0.05615234375
    # step 3: 0.31298828125 - 0.2052001953125 = 0.1077880859375; 0.410400390625 - 0.31298828125 = 0.097412109375
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"step": 2, "reward_mean": 0.195556640625, "loss_policy": 0.08349609375, "dschat/critic_loss": 0.05615234375,
         "dschat/fp16_overflows": 2},
        {"step": 3, "reward_mean": 0.0030517578125, "loss_policy": 0.1077880859375,
         "dschat/critic_loss": 0.097412109375, "dschat/fp16_overflows": 0}]
    ingest_file(store, out, "dschat")
    assert connect(store).execute("SELECT step, reward_mean, loss_policy FROM steps ORDER BY step").fetchall() == [
        (2, 0.195556640625, 0.08349609375), (3, 0.0030517578125, 0.1077880859375)]
    # two PPO epochs a step: the printed sums no longer undo — refused, one line naming the file, exit 1
    src.write_text("\n".join([DSCHAT_CMD.replace("--ppo_epochs 1", "--ppo_epochs 2")] + DSCHAT[1:]) + "\n")
    assert dschat_console.main([str(src), str(out)]) == 1
    src.write_text("\n".join(DSCHAT[:5]) + "\n")
    assert dschat_console.main([str(src), str(out)]) == 1  # a step line without its reward line


# unorl-grpo-full.unorl.json.gz (Quarkstar/unorl, research/data/qwen3-4b-base-grpo-20260916-01.json): its first two
# entries of `metrics` as the file holds them — step 0, the evaluation before training alone; step 1, SkyRL's dict
UNORL_STEP0 = ("{\"step\": 0, \"metrics\": {\"eval/aime25/avg_score\": -0.9583333333333334, \"eval/aime25/pass_at_8\": 0.1333333"
    "3333333333, \"eval/aime25/mean_positive_reward\": 0.020833333333333332, \"eval/aime25/pass@8\": 0.1333333333"
    "3333333, \"eval/aime26/avg_score\": -0.975, \"eval/aime26/pass_at_8\": 0.1, \"eval/aime26/mean_positive_rewar"
    "d\": 0.0125, \"eval/aime26/pass@8\": 0.1}}")
UNORL_STEP1 = ("{\"step\": 1, \"metrics\": {\"generate/min_num_tokens\": 5, \"generate/max_num_tokens\": 8192, \"generate/avg_num"
    "_tokens\": 1125.39453125, \"generate/std_num_tokens\": 1510.222393019102, \"generate/avg_tokens_non_zero_rew"
    "ards\": 983.6666666666666, \"generate/avg_tokens_zero_rewards\": 0.0, \"generate/avg_assistant_tokens\": 1125"
    ".39453125, \"generate/min_assistant_tokens\": 5, \"generate/max_assistant_tokens\": 8192, \"generate/std_assi"
    "stant_tokens\": 1510.222393019102, \"generate/tokens_per_turn_mean\": 1125.39453125, \"generate/tokens_per_t"
    "urn_std\": 1510.222393019102, \"generate/tokens_per_turn_max\": 8192, \"reward/avg_pass_at_8\": 0.46875, \"rew"
    "ard/avg_raw_reward\": -0.859375, \"reward/mean_positive_reward\": 0.0703125, \"generate/batch_num_seq\": 256,"
    " \"generate/batch_padded_seq_len\": 8387, \"policy/rollout_train_logprobs_abs_diff_max\": 1.2476967573165894"
    ", \"policy/rollout_train_logprobs_abs_diff_min\": 0.0, \"policy/rollout_train_logprobs_abs_diff_mean\": 0.01"
    "5627598389983177, \"policy/rollout_train_logprobs_abs_diff_std\": 0.03632015734910965, \"loss/avg_final_rew"
    "ards\": -0.859375, \"loss/avg_raw_advantages\": -0.00411199452355504, \"loss/avg_raw_advantages_abs\": 0.2735"
    "661566257477, \"policy/policy_entropy\": 0.9277220964431763, \"policy/response_length\": 8192.0, \"policy/pol"
    "icy_lr\": 0.0, \"policy/loss_metrics/clip_ratio\": 0.0, \"policy/minibatch_rollout_logprobs_abs_diff_mean\": "
    "0.016179751604795456, \"policy/minibatch_rollout_logprobs_abs_diff_min\": 0.0, \"policy/minibatch_rollout_l"
    "ogprobs_abs_diff_max\": 1.2476967573165894, \"policy/final_loss\": 0.004957843571901321, \"policy/policy_los"
    "s\": 0.004957843571901321, \"policy/grad_norm\": 0.19419708847999573, \"policy/minibatch_rollout_logprobs_ab"
    "s_diff_std\": 0.037536713287228976, \"trainer/tokens_per_second_per_gpu\": 1350.6773423827358, \"trainer/epo"
    "ch\": 0, \"trainer/global_step\": 1, \"timing/eval\": 416.1048867702484, \"timing/generate\": 208.8474199771881"
    ", \"timing/postprocess_generator_output\": 0.0013756752014160156, \"timing/convert_to_training_input\": 0.06"
    "224656105041504, \"timing/fwd_logprobs_values_reward\": 9.155986547470093, \"timing/compute_advantages_and_"
    "returns\": 0.024335145950317383, \"timing/policy_train\": 30.141873836517334, \"timing/train_critic_and_poli"
    "cy\": 30.611770629882812, \"timing/sync_weights\": 3.716122627258301, \"timing/sync_weights_only_transfer\": "
    "1.916322983801365, \"timing/step\": 252.90968203544617}}")


def test_unorl_snapshot_flattens_to_one_dict_a_step(tmp_path, store):
    doc = {"run_id": "qwen3-4b-base-grpo-20260916-01", "analysis": "…",
           "metrics": [json.loads(UNORL_STEP1), json.loads(UNORL_STEP0)]}  # out of order: sorted by step
    rows = unorl_metrics.convert(doc)
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[1] == {"step": 1, **json.loads(UNORL_STEP1)["metrics"]}
    src, out = tmp_path / "run.json", tmp_path / "run.jsonl"
    src.write_text(json.dumps(doc))
    assert unorl_metrics.main([str(src), str(out)]) == 0
    ingest_file(store, out, run="u")
    got = connect(store).sql("SELECT step, reward_mean, entropy_mean, grad_norm, response_length_mean, eval_score "
                             "FROM steps WHERE run = 'u' ORDER BY step").fetchall()
    # step 0: no accuracy key, so the evaluation score is the mean of the score keys eval/aime25/avg_score and
    # eval/aime26/avg_score: (−0.9583333 − 0.975) / 2 = −0.9666667; no training column.
    # step 1: reward/avg_raw_reward −0.859375 (loss/avg_final_rewards, the same value, comes second);
    # policy/policy_entropy 0.92772 (read: policy/final_loss, a key of the SkyRL versions that mask it, is logged
    # beside it); policy/grad_norm 0.19420; generate/avg_num_tokens 1125.39 (policy/response_length, 8192, is the
    # padded length and maps to nothing)
    assert got[0][:5] == (0, None, None, None, None) and got[0][5] == pytest.approx(-0.9666667)
    assert got[1][:5] == pytest.approx((1, -0.859375, 0.9277221, 0.1941971, 1125.3945313)) and got[1][5] is None
    for bad, why in (({"runs": []}, "no list 'metrics'"), ({"metrics": [{"step": 1}]}, r"metrics\[0\] is not an object"),
                     ({"metrics": [json.loads(UNORL_STEP1)] * 2}, "step 1 appears twice")):
        with pytest.raises(ValueError, match=why):
            unorl_metrics.convert(bad)
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert unorl_metrics.main([str(tmp_path / "bad.json"), str(tmp_path / "none.jsonl")]) == 1
    assert not (tmp_path / "none.jsonl").exists()
