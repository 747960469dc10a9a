#!/usr/bin/env bash
# The public-runs corpus (docs/lab/public_runs.md): ingest every run of sources.csv whose raw file is under raw/, then
# score the detectors on them. Raw files not committed (no licence to redistribute) come from the repository, path and
# commit in sources.csv into raw/<file>: `python lab/public/from_mirror.py MIRRORS` takes them from git clones or
# snapshots of those repositories (MIRRORS/owner+name/), or fetch them by hand; their sha256 is checked. `lab score --all-kinds` scores
# every detector against each labelled kind (labels.csv: the collapse each public run's logs show, from its onset);
# `lab natural` scores the reward collapses (labels.csv's collapse column) by how early each detector warns.
# It ends with a summary line; `detect`'s episodes table goes to EPISODES_CSV (default: STORE.episodes.csv).
#   lab/public/score.sh STORE [EPISODES_CSV]        (STORE: a new store folder)
# COLLAPSEWATCH / PYTHON: the commands to use; by default the checkout's .venv/bin/collapsewatch and .venv/bin/python
# when they exist (no activated venv needed), else collapsewatch and python3 on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
store="${1:?usage: lab/public/score.sh STORE [EPISODES_CSV]}"
episodes="${2:-${store%/}.episodes.csv}"
venv="$here/../../.venv/bin"
if [ -x "$venv/collapsewatch" ]; then cw="${COLLAPSEWATCH:-$venv/collapsewatch}"; else cw="${COLLAPSEWATCH:-collapsewatch}"; fi
if [ -x "$venv/python" ]; then py="${PYTHON:-$venv/python}"; else py="${PYTHON:-python3}"; fi
command -v "$cw" > /dev/null || { echo "score.sh: '$cw' not found: make the checkout's .venv (README) or set COLLAPSEWATCH" >&2; exit 1; }
command -v "$py" > /dev/null || { echo "score.sh: '$py' not found: set PYTHON" >&2; exit 1; }
# the CSV's quoted fields hold commas: read it with Python's csv module, one tab-separated line per run
"$py" -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1], newline="")):
    print("\t".join(r[k] for k in ("run", "file", "repo", "path", "commit", "sha256")))' "$here/sources.csv" |
while IFS=$'\t' read -r run file repo path commit sha; do
  raw="$here/raw/$file"
  if [ ! -e "$raw" ]; then
    echo "missing $run: fetch https://github.com/$repo/blob/$commit/$path to lab/public/raw/$file" >&2; continue
  fi
  if [ -d "$raw" ]; then  # a folder of the authors' files (file ends in /): the sha256 of its sorted sha256sum listing
    got="$(cd "$here/raw" && find "${file%/}" -type f | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)"
  else
    got="$( (case "$file" in *.gz) gzip -dc "$raw" ;; *) cat "$raw" ;; esac) | sha256sum | cut -d' ' -f1)"
  fi
  [ "$got" = "$sha" ] || { echo "$run: sha256 $got is not the recorded $sha" >&2; exit 1; }
  case "$file" in
    *.cs336.jsonl)  # one repository's own logger, no reader in ingest: lab/public/cs336_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/cs336_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.taoger.jsonl)  # another repository's own logger (CS336 assignment 5): lab/public/taoger_metrics.py says what its
                     # keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/taoger_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.runs.csv)  # a long-form table of several runs (run_name,metric,step,value): lab/public/runs_csv.py takes one,
                 # named in the table as the run's name after its source prefix (garg-lr_sweep_1e-4 → lr_sweep_1e-4)
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/runs_csv.py" "$raw" "${run#*-}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rft.md)  # a research log's hand-made per-step markdown tables: lab/public/rft_tables.py knows which table is
               # which run and what its columns mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/rft_tables.py" "$raw" "$run" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.minimind.log)  # MiniMind's GRPO console lines (Epoch:[e/E](i/N), Key: value, …): no reader in ingest;
                     # lab/public/minimind_console.py says what their keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/minimind_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.trinity.csv)  # Trinity-RFT's tutorial curve exports (short column names): lab/public/trinity_csv.py writes the
                    # trainer keys they stand for as the header, then ingest reads the CSV
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/trinity_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.dequeueing.jsonl)  # another CS336 assignment 5 logger: lab/public/dequeueing_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/dequeueing_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.shaider.jsonl)  # a course's Tinker loop logger (tinker_utils/log.py): lab/public/shaider_metrics.py says what its
                      # keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/shaider_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.axiom.jsonl)  # AxiomForgeAI's own GRPO loop, a row per iteration: lab/public/axiom_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/axiom_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.structlm.jsonl.gz)  # franalli/struct-lm's run logs (TRL dicts among config, check and backfilled records):
                          # lab/public/structlm_jsonl.py leaves those out and merges the rest by step
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/structlm_jsonl.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rlor.jsonl)  # a repository's own logger wrapping TRL's log dicts under trl_logs: lab/public/rlor_trl_logs.py
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/rlor_trl_logs.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rfs.csv.gz)  # reasoning-from-scratch's GRPO metric CSVs (one prompt × 8 answers a step): lab/public/rfs_metrics.py
                   # says what their columns mean and derives the all-equal group share
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/rfs_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    asycn-*/)  # 065536/Asycn_verl's SwanLab chart exports, a folder per batch, a column per run:
               # lab/public/asycn_swanlab.py takes the run's columns (verl's keys)
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/asycn_swanlab.py" "$raw" "$run" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    roll-*/)  # histmeisah/roll_dev's W&B panel exports (ROLL), a CSV per metric, a column per run: joined by step with
              # lab/public/csv_join.py, then ingest takes the run named after the prefix (roll-<W&B run name>) and
              # leaves W&B's __MIN/__MAX bands out
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/csv_join.py" "$conv" "$raw"*.csv >&2
      "$cw" ingest "$store" "$conv" --run "$run" --source-run "${run#roll-}"; rm -f "$conv" ;;
    *.ece405.jsonl)  # echung32/ece405-assignment3-alignment's own loop (one row per optimizer step):
                     # lab/public/ece405_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/ece405_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.sdpowb.csv)  # sameersegal/SDPO-Training-Loop's W&B history of TRL's SDPOTrainer: its self_distillation reward and
                   # flat-group share (groups whose binary rewards are all equal: docs/FINDINGS.md, "p⁸+(1−p)⁸")
      "$cw" ingest "$store" "$raw" --run "$run" --map train/self_distillation/reward_mean=reward_mean \
        --map train/self_distillation/flat_group_fraction=zero_std_group_frac ;;
    *.sdpotrace.json)  # the same authors' per-step trace of a run (a JSON list of dicts: rew, flat, length in tokens)
      "$cw" ingest "$store" "$raw" --run "$run" --map rew=reward_mean --map flat=zero_std_group_frac \
        --map length=response_length_mean ;;
    *.sdpometrics.csv)  # the same authors' per-step metrics CSV (reward_mean, mean_length in tokens)
      "$cw" ingest "$store" "$raw" --run "$run" --map reward_mean=reward_mean --map mean_length=response_length_mean ;;
    *.cs224r.json)  # cfw20/cs224r-project-e3's results JSON: each run's W&B history rows (verl's keys) under
                    # training.<run>.rows, the run named after the prefix (cs224r-<run>); lab/public/json_rows.py
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/json_rows.py" "$raw" "training.${run#cs224r-}.rows" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.cs336hw5.jsonl)  # xuehaiwuya1214/CS336-hw5's own loop: lab/public/cs336hw5_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/cs336hw5_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.tonywang.json)  # tonywang1990/gsm8k-grpo's step_stat_history.json (gsm8k_grpo.py): reward_mean is the batch's mean
                      # reward; seq_len_mean counts every completion token, the non-model ones too, so it is not mapped
      "$cw" ingest "$store" "$raw" --run "$run" --map reward_mean=reward_mean ;;
    *.vince.jsonl)  # Vincethevince/grpo-qwen0.5's train_metrics.jsonl (src/grpo.py): the batch's mean reward, the share of
                    # groups whose rewards are all equal (group std < 1e-8), completion tokens per response
      "$cw" ingest "$store" "$raw" --run "$run" --map reward_mean=reward_mean --map zero_adv_fraction=zero_std_group_frac \
        --map mean_completion_len=response_length_mean ;;
    *.terrense.csv)  # terrense/qwen3-8b-grpo-dapo-lab's flight-recorder CSVs: lab/public/terrense_csv.py renames their
                     # short names to the verl keys the authors' metric dictionary gives
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/terrense_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.minio3.csv.gz)  # dddraxxx/Mini-o3's per-step curve tables: lab/public/minio3_csv.py renames their short names to the
                   # verl keys they stand for
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/minio3_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.trace.json)  # maveryn/trace-internal's W&B snapshot of two EasyR1 runs: lab/public/trace_easyr1.py takes the one
                   # the run's name ends with (trace-easyr1-3b → 3B)
      conv="$(mktemp --suffix=.jsonl)"; scale="${run##*-}"
      "$py" "$here/trace_easyr1.py" "$raw" "${scale^^}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.var.jsonl)  # esmaeil-abedi-dev/verifier-as-reward's own harness log: lab/public/var_metrics.py says what its keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/var_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.titan.log)  # torchtitan's RL example scripts' step lines (QIU023/torchtitan_attention_residual):
                  # lab/public/titan_console.py says what their keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/titan_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.dschat.log)  # DeepSpeed-Chat's step-3 PPO console (epoch|step|act_loss|cri_loss lines, their losses printed
                   # summed): lab/public/dschat_console.py says what they mean and undoes the sums
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/dschat_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.drgrpo.csv)  # chaoheng666/DeepRetrieval-GRPO's analysis CSVs: lab/public/drgrpo_csv.py (the stage of a two-stage
                   # file from the run name's -stage1 / -stage2)
      conv="$(mktemp --suffix=.csv)"; stage=""; case "$run" in *-stage[12]) stage="${run##*-stage}" ;; esac
      "$py" "$here/drgrpo_csv.py" "$raw" "$conv" $stage >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.beita.log)  # beita6969/colab-grpo's own GRPO console blocks: lab/public/beita_console.py says what they mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/beita_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.nbtable.ipynb)  # a notebook's HF training-progress table: lab/public/nb_table_csv.py writes it as a CSV
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/nb_table_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.tbscalars.json)  # a run's TensorBoard scalars dumped as JSON ({tag: [{step, value, wall_time}]}):
                       # lab/public/tb_scalars_json.py writes the long CSV (step, tag, value) ingest pivots
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/tb_scalars_json.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.skyrl.log)  # a SkyRL (skyrl-train) run's console: lab/public/skyrl_console.py reads each step's status dict and
                  # reward line (mert-cemri/CTU-Agent-v0's W&B output.log)
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/skyrl_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.unorl.json.gz)  # Quarkstar/unorl's per-run snapshot of SkyRL's tracker dicts (research/data/<run>.json):
                      # lab/public/unorl_metrics.py flattens them, one dict a step; ingest reads SkyRL's keys
      conv="$(mktemp --suffix=.jsonl)"; json="$(mktemp --suffix=.json)"; gzip -dc "$raw" > "$json"
      "$py" "$here/unorl_metrics.py" "$json" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" "$json" ;;
    *.rhd.jsonl)  # Rohanjain2312/grpo-reward-hacking-demo's own per-step logger: lab/public/rhd_metrics.py says what its
                  # keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/rhd_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rpm.csv | *.rpm.csv.gz)  # richardodliu/OpenRLHF's per-step export of its console dicts: lab/public/rpm_csv.py
                               # names the columns
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/rpm_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.wolleaf.csv)  # Wolleaf/Search-R1's step table of three runs (a stage column): lab/public/wolleaf_csv.py takes the
                    # run's stage from its name (wolleaf-small-r60 → R)
      conv="$(mktemp --suffix=.csv)"; stage="${run##*-}"; stage="${stage:0:1}"
      "$py" "$here/wolleaf_csv.py" "$raw" "${stage^^}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.akna.json)  # AknA13/train-infer-mismatch's per-arm GRPO series (one JSON of 16 arms): lab/public/akna_series.py
                  # takes the arm, the run's name after "akna-"
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/akna_series.py" "$raw" "${run#*-}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.figdata.json)  # a figure-data JSON of per-step [reward, frac_reward_zero_std] pairs (Chaoqi31/text2sql-agent-rl):
                     # lab/public/figdata_pairs.py takes the key, the run's name after "chaoqi-"
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/figdata_pairs.py" "$raw" "${run#*-}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.shamanez.csv | *.shamanez.csv.gz)  # shamanez/verl's W&B history pulls (short names): lab/public/shamanez_csv.py
                                         # gives verl's keys back
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/shamanez_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.sherry.csv)  # sherrywan717/ppo-vs-grpo-math-rlvr's per-update CSVs: lab/public/sherry_csv.py names TRL's keys
      conv="$(mktemp --suffix=.csv)"; "$py" "$here/sherry_csv.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.nik.jsonl)  # Nikhil-iitg27/FinetuneMathReasoning's own per-step logger: lab/public/nik_metrics.py says what its
                  # keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/nik_metrics.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.wallace/)  # wallacexuhanxiao/search-r1's verl-agent console, split in two files by a resume: lab/public/wallace_concat.py
                 # writes them one after the other, then ingest reads the console (keeping the resumed attempt)
      conv="$(mktemp --suffix=.log)"; "$py" "$here/wallace_concat.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rezero.txt)  # womogenes/re-zero's copy of a prime-rl run's console (orchestrator + trainer step lines):
                   # lab/public/rezero_console.py says what their keys mean
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/rezero_console.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.slimetb/)  # a slime run's two TensorBoard writers (RolloutManager + actor): lab/public/slime_tb.py joins them per
                 # rollout; its N_GROUPS (the run's --rollout-batch-size, which the event files do not hold) is written
                 # in the raw folder's name as .g<N> (px-geo3k-v2.g16.slimetb/ → 16)
      conv="$(mktemp --suffix=.jsonl)"; groups="${file%.slimetb/}"; groups="${groups##*.g}"
      "$py" "$here/slime_tb.py" "$raw" "$groups" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.katop.csv)  # katop1234/softmaxed_rewards' table of every run (an experiment column): lab/public/katop_csv.py takes
                  # the run's experiment, named after the prefix with _ for - (katop-softmax-tau1.0 → softmax_tau1.0)
      exp="${run#katop-}"; exp="${exp//-/_}"
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/katop_csv.py" "$raw" "$exp" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.rlvrexp.js)  # halflearned/rlvr-experiments' plot data (one JavaScript file of many runs): lab/public/rlvrexp_plots.py
                   # takes the one named as the run's name after its prefix (rlvrexp-grpo-lr5e6 → grpo-lr5e6)
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/rlvrexp_plots.py" "$raw" "${run#rlvrexp-}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.omnilora.json)  # SakaiXue6666/Omni-LoRA-RL's per-step reward curves: lab/public/omnilora_curve.py
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/omnilora_curve.py" "$raw" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.tlr.json)  # redswimmer/turn-level-rewards' curves of five arms (one JSON object): lab/public/tlr_curves.py takes the
                 # arm named as the run's name after its prefix (tlr-grpo_or → grpo_or)
      conv="$(mktemp --suffix=.jsonl)"; "$py" "$here/tlr_curves.py" "$raw" "${run#tlr-}" "$conv" >&2
      "$cw" ingest "$store" "$conv" --run "$run"; rm -f "$conv" ;;
    *.justtinker.json.gz)  # Guanghan/JustTinker's own history (a JSON object of per-step lists: ingest's json_columns);
                           # its script (scripts/tinker/justrl_math_reasoning.py) logs mean_reward = the mean of the
                           # step's rewards and accuracy = the share verified correct; avg_response_length counts the
                           # prompt's tokens too, so it is not mapped
      "$cw" ingest "$store" "$raw" --run "$run" --map mean_reward=reward_mean --map accuracy=correct_frac ;;
    *.tpu2026cw.csv)  # Sanssssssssssssssss/TPU-2026-cw's own pivot of its instrumented Tunix run's scalars (train_*):
                      # the mean and std of the step's rewards and the share of groups whose rewards are all equal are
                      # named as such; completion length (unit not stated) and KL are not mapped
      "$cw" ingest "$store" "$raw" --run "$run" --map train_reward_mean=reward_mean --map train_reward_std=reward_std \
        --map train_frac_reward_zero_std=zero_std_group_frac ;;
    *.tunixreward.csv)  # a Tunix run's exported reward curve alone (rewards/train/mean: the mean over reward functions,
                        # so 1/k of the summed reward the advantages use — a scale the reward rule does not depend on)
      "$cw" ingest "$store" "$raw" --run "$run" --map rewards/train/mean=reward_mean ;;
    *.cs285.jsonl)  # the CS285 (Berkeley, spring 2026) HW4 trainer's own logger (hw4/hw4/rl/grpo.py, reinforce.py,
                    # rollout/rollout_buffer.py): one {"metrics": {…}, "step": N} line per iteration (ingest flattens
                    # it to metrics/<key>); a file holding two sessions keeps the last (ingest drops a rewound log's
                    # earlier attempt). Its "gradient_global_norm_after_clipping" is what torch's clip_grad_norm_
                    # returns, the norm before clipping; the entropy is −mean log-prob of the sampled tokens (the
                    # on-policy estimate of the catalogue's entropy); the KL is the student's sampled-token proxy
      m=metrics/train/; r=metrics/rollout/; e=metrics/eval/math_hard_test_subset_split_
      "$cw" ingest "$store" "$raw" --run "$run" \
        --map "${r}mean_total_reward_across_all_completions_in_batch_and_groups=reward_mean" \
        --map "${r}std_total_reward_across_all_completions_in_batch_and_groups=reward_std" \
        --map "${r}mean_generated_completion_token_count_per_completion=response_length_mean" \
        --map "${r}fraction_of_completions_that_hit_max_new_tokens_limit=truncated_frac" \
        --map "${m}policy_token_entropy_mean_over_minibatches=entropy_mean" \
        --map "${m}gradient_global_norm_after_clipping_mean_over_optimizer_steps=grad_norm" \
        --map "${m}approximate_kl_divergence_policy_vs_reference_mean_over_minibatches=kl_ref_mean" \
        --map "${m}fraction_of_completion_tokens_where_ppo_ratio_was_clipped_mean_over_minibatches=clip_region_frac" \
        --map "${e}fraction_exact_match_using_boxed_answer_parser=eval_score" \
        --map "${e}number_of_evaluation_examples=eval_size" ;;
    *.desire.jsonl)  # desirepathh/assignment5-alignment's own GRPO loop (cs336_alignment/train_grpo.py): mean_reward
                     # and std_reward are the batch's reward mean and std, clip_fraction the last micro-batch's share
                     # of clipped tokens, grad_norm torch's pre-clip norm; its kl_loss is beta × the last micro-batch's
                     # KL (not the KL): not mapped
      "$cw" ingest "$store" "$raw" --run "$run" --map mean_reward=reward_mean --map std_reward=reward_std \
        --map clip_fraction=clip_region_frac ;;
    *) "$cw" ingest "$store" "$raw" --run "$run" ;;
  esac
done
# score the labelled runs this store holds (a run whose raw file is not here is listed above as missing; the lab
# commands refuse labels of runs a store lacks)
present="$("$cw" sql "$store" "SELECT DISTINCT run FROM steps" --csv | tail -n +2)"
labels="$(mktemp --suffix=.csv)"; trap 'rm -f "$labels"' EXIT
PRESENT="$present" "$py" -c 'import csv, os, sys
keep = set(os.environ["PRESENT"].split())
rows = list(csv.reader(open(sys.argv[1], newline="")))
csv.writer(sys.stdout, lineterminator="\n").writerows([rows[0]] + [r for r in rows[1:] if r and r[0] in keep])' \
  "$here/labels.csv" > "$labels"
echo "scoring the $(($(wc -l < "$labels") - 1)) labelled runs of lab/public/labels.csv this store holds" >&2
"$cw" lab score "$store" --labels "$labels" --all-kinds
"$cw" lab natural "$store" --labels "$labels"           # the reward collapses: flagged ≥ 20 steps before?
"$cw" lab natural "$store" --labels "$labels" --runs    # what fired where
"$cw" detect "$store" --csv > "$episodes"
# the summary: what was ingested, and the episodes in a line (the table is in the file)
"$py" -c 'import collections, csv, sys
runs = {r["run"] for r in csv.DictReader(open(sys.argv[1], newline=""))}
have = set(sys.argv[3].split()) & runs
eps = list(csv.DictReader(open(sys.argv[2], newline="")))
sev = collections.Counter(e["severity"] for e in eps)
on = len({e["run"] for e in eps})
print("ingested %d of the %d runs of lab/public/sources.csv (%d missing: listed above); %d episode(s) on %d run(s) "
      "(%d critical, %d warning, %d info): %s" % (len(have), len(runs), len(runs) - len(have), len(eps), on,
                                                  sev["critical"], sev["warning"], sev["info"], sys.argv[2]))' \
  "$here/sources.csv" "$episodes" "$present"
