"""The one key map: every target is a catalogue step column, precedence among keys of one step, HF's train/ prefix,
and docs/ingest.md printing the same table."""

from pathlib import Path

import pytest

from collapsewatch.catalogue import ALL_STEP_COLUMNS
from collapsewatch.ingest.keys import (
    KEY_MAP,
    catalogue_values,
    eval_never_word,
    eval_score,
    eval_size,
    markdown_table,
    meaning,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ingest.md"


def test_every_mapping_names_a_catalogue_step_column_and_a_source():
    assert all(m.metric in ALL_STEP_COLUMNS and m.source for m in KEY_MAP.values())


def test_old_and_new_names_fill_one_column_and_the_listed_first_wins():
    # verl ≥ 0.5 logs actor/entropy (π_old, before the update) and, with an entropy bonus, actor/entropy_loss too:
    # actor/entropy is listed first, so 0.5 wins over 0.9 whatever order the log holds them in
    assert catalogue_values({"actor/entropy_loss": 0.9, "actor/entropy": 0.5}) == {"entropy_mean": 0.5}
    # verl < 0.5 logged only actor/entropy_loss: it fills the column
    assert catalogue_values({"actor/entropy_loss": 0.9}) == {"entropy_mean": 0.9}
    # TRL < 0.17 completion_length and TRL ≥ 0.17 completions/mean_length: one column
    assert catalogue_values({"completion_length": 53.0}) == {"response_length_mean": 53.0}
    assert catalogue_values({"completion_length": 5.0, "completions/mean_length": 2.0}) == {
        "response_length_mean": 2.0}
    # a key already named as the catalogue column beats any listed alias
    assert catalogue_values({"actor/grad_norm": 2.0, "grad_norm": 3.0}) == {"grad_norm": 3.0}


def test_hf_train_prefix_and_unknown_keys():
    # HF's TensorBoard / trackio callbacks write train/<key>; OpenRLHF's loggers too
    assert catalogue_values({"train/reward": 0.25, "train/entropy": 1.5, "train/actor_grad_norm": 4.0}) == {
        "reward_mean": 0.25, "entropy_mean": 1.5, "grad_norm": 4.0}
    assert meaning("rewards/format/mean") is None and meaning("eval/reward") is None  # eval keys never fill train
    assert catalogue_values({"rollout_corr/rollout_is_eff_sample_size": 0.9}) == {}  # truncated-weight ESS: not is_ess
    assert catalogue_values({"kl": None}) == {"kl_ref_mean": None}  # TRL logs None when nothing was valid: NULL


def test_docs_print_the_key_map():
    assert markdown_table() in DOCS.read_text(), "docs/ingest.md: python -m collapsewatch.ingest.keys"


def test_openrlhf_rollout_statistics_beat_its_micro_batch_means():
    # OpenRLHF ≥ 0.9.8 logs both in one step (behind train/ in TensorBoard / wandb): rollout/* (over the whole rollout
    # batch) are listed first, so 0.25, 40 and 0 fill the columns, not the micro-batch means 0.375, 48 and 0.125
    assert catalogue_values({"train/reward": 0.375, "train/rollout/reward_mean": 0.25, "train/response_length": 48.0,
                             "train/rollout/response_length_mean": 40.0, "train/truncated": 0.125,
                             "train/rollout/truncated_rate": 0.0}) == {
        "reward_mean": 0.25, "response_length_mean": 40.0, "truncated_frac": 0.0}
    # before 0.9.8 only the micro-batch means were logged: they fill the columns
    assert catalogue_values({"reward": 0.375, "response_length": 48.0}) == {"reward_mean": 0.375,
                                                                            "response_length_mean": 48.0}
    # its group_reward_std (the mean of the groups' stds) and vllm_kl are kept as scalars only
    assert meaning("group_reward_std") is None and meaning("train/vllm_kl") is None


def test_tinker_cookbook_mixed_groups_fill_the_zero_std_share_as_its_complement():
    # dphuang2/tinker-cookbook iter05, step 6: frac_mixed 0.125 (frac_all_good 0.0 + frac_all_bad 0.875 = 0.875):
    # 1 − 0.125 = 0.875 of the 16 groups had equal rewards for every response
    assert catalogue_values({"env/all/by_group/frac_mixed": 0.125, "env/all/correct": 0.0625}) == {
        "zero_std_group_frac": 0.875, "correct_frac": 0.0625}
    assert catalogue_values({"env/all/by_group/frac_mixed": None}) == {"zero_std_group_frac": None}
    # the two mixed-group shares (tinker-cookbook's, ROLL's) are the only complements
    assert {k for k, m in KEY_MAP.items() if m.complement} == {"env/all/by_group/frac_mixed", "group/mixed_groups_ratio"}


def test_eval_score_is_the_mean_of_the_first_family_logged():
    # verl: two data sources' mean@16 accuracies → (0.2 + 0.6) / 2 = 0.4; best@16, std, format and val-aux are no
    # scores; the reward family is read only where nothing scores accuracy
    assert eval_score({"val-core/aime/acc/mean@16": 0.2, "val-core/math/acc/mean@16": 0.6,
                       "val-core/math/acc/best@16/mean": 0.9, "val-core/math/acc/std@16": 0.1,
                       "val-aux/aime/acc/mean@16": 0.0, "val/format_reward": 1.0, "val-core/math/reward/mean@16": -1.0,
                       }) == pytest.approx(0.4)
    # HF Trainer's eval_<metric>: eval_loss and the length are not scores; eval_reward is the reward family
    assert eval_score({"eval_loss": 2.0, "eval_completions/mean_length": 300.0, "eval_reward": 0.75}) == 0.75
    # a reward function named after accuracy is an accuracy: 0.5, over the total reward 1.5
    assert eval_score({"eval_rewards/accuracy_reward/mean": 0.5, "eval_reward": 1.5}) == 0.5
    # old verl's val/test_score/<source> (score family); error rates, sample counts and timings never count
    assert eval_score({"val/test_score/openai/gsm8k": 0.7, "eval/false_refuse_rate": 0.2, "eval/num_examples": 500.0,
                       "timing_s/testing": 3.0}) == 0.7
    # non-finite and missing values are skipped; a step with no evaluation key has no score
    assert eval_score({"eval/accuracy": float("nan"), "val/accuracy": 0.3, "eval/gsm8k_accuracy": None}) == 0.3
    # a family is chosen by the keys a step holds, empty ones too: a logger that writes its accuracy as null between
    # evaluations and its mean reward as 0 there (dequeueing/assignment5-alignment's) has no score at those steps
    assert eval_score({"val/accuracy": None, "val/mean_reward": 0.0}) is None
    assert eval_score({"val/accuracy": float("nan"), "val/mean_reward": 0.0}) is None
    assert eval_score({"val/mean_reward": 0.25}) == 0.25
    assert eval_score({"reward": 0.5, "train/accuracy": 0.9}) is None
    # other names of an accuracy: exact match (a search agent's val_em), success, pass@1 spelled out; eval-<name>/
    assert eval_score({"val_em": 0.4, "val_macro_em": 0.2, "val_utility": 9.0}) == pytest.approx(0.3)
    assert eval_score({"eval/success": 0.25, "eval/pass_at_1": 0.75, "eval/n_problems": 500.0,
                       "eval/success_count": 120.0}) == 0.5  # a count is no score
    assert eval_score({"eval-rollout/reward": 0.6}) == 0.6


def test_eval_never_matches_whole_words_not_letters_inside_one():
    # counts: "count" as a word or a camelCase word's last part, "num" as a word's first part — no score
    for rest in ("count", "num_count", "response_count", "responseCount", "rewards/HTTPCount/mean", "num_tokens",
                 "numTokens", "success_counts"):
        assert eval_never_word(rest), rest
    # the letters inside a word are no count / num / format / time / KL: ms-swift's CountAccuracy (an accuracy of
    # counting), accountability, NuminaMath, information, sentiment, weekly
    for rest in ("rewards/CountAccuracy/mean", "accountability", "NuminaMath-CoT/acc/mean@4", "information_acc",
                 "sentiment_acc", "weekly_acc"):
        assert not eval_never_word(rest), rest
    # format compliance, times and KL as whole words or camelCase parts
    for rest in ("rewards/CountFormat/mean", "format_eos", "runtime", "env/all/time/check_answer_s", "timestamp",
                 "kl", "klDiv"):
        assert eval_never_word(rest), rest
    # through eval_score: eval/count 40 and eval_num_count 3 are counts; eval/CountAccuracy 0.5 and
    # eval/accountability_acc 0.25 are the accuracy family → (0.5 + 0.25) / 2 = 0.375
    assert eval_score({"eval/count": 40.0, "eval_num_count": 3.0, "eval/response_count": 7.0,
                       "eval/CountAccuracy": 0.5, "eval/accountability_acc": 0.25}) == 0.375
    # ms-swift's evaluation row (tests/ingest/data/swift-logging.jsonl, step 50): CountAccuracy is the one accuracy,
    # so its 0.98639456 and not the total reward 1.28630961 (reward family, read only where nothing scores accuracy)
    assert eval_score({"eval_reward": 1.28630961, "eval_rewards/CountAccuracy/mean": 0.98639456,
                       "eval_rewards/CountAccuracy/std": 0.04583375, "eval_rewards/CountFormat/mean": 0.49957483,
                       "eval_rewards/CountBrevity/mean": 1.0}) == 0.98639456
    # a key of counts only has no score: eval/response_count alone → None
    assert eval_score({"eval/response_count": 7.0, "eval/num_correct": 3.0}) is None


def test_eval_score_fills_its_column_unless_the_run_logs_it():
    assert catalogue_values({"eval/accuracy": 0.3, "reward": 0.5}) == {"eval_score": 0.3, "reward_mean": 0.5}
    assert catalogue_values({"eval/accuracy": 0.3, "eval_score": 0.8}) == {"eval_score": 0.8}


def test_eval_size_is_the_examples_the_evaluation_graded():
    # the log's own count, under any evaluation prefix (CS336 forks' eval/num_examples, eval/n_problems, tinker's
    # test/env/all/total_episodes, HF example scripts' eval_samples = len(eval_dataset))
    assert eval_size({"eval/num_examples": 500.0, "eval/accuracy": 0.4}) == 500.0
    assert eval_size({"eval/n_problems": 20.0}) == eval_size({"test/env/all/total_episodes": 20.0}) == 20.0
    assert eval_size({"eval_samples": 1319.0}) == 1319.0
    # two data sources' sets: the smaller bounds the averaged score's noise from above → 30
    assert eval_size({"val/gsm8k/num_examples": 1319.0, "val/aime/num_examples": 30.0}) == 30.0
    # HF Trainer's speed metrics divide the samples by the runtime: 12.3456 s × 16.203 samples/s = 200.03… → 200;
    # the logged count wins over the derived one
    assert eval_size({"eval_runtime": 12.3456, "eval_samples_per_second": 16.203, "eval_loss": 1.0}) == 200.0
    assert eval_size({"eval_runtime": 12.3456, "eval_samples_per_second": 16.203, "eval_samples": 64.0}) == 64.0
    # the rate alone, a training key, a count of successes, a zero or a non-finite value: no size
    assert eval_size({"eval_samples_per_second": 16.203}) is None
    assert eval_size({"train_samples_per_second": 3.0, "train_runtime": 100.0, "num_examples": 7.0}) is None
    assert eval_size({"eval/success_count": 120.0, "eval/num_examples": 0.0, "eval/n_scored": float("nan")}) is None
    # it fills its column beside the score, unless the run logs eval_size itself
    assert catalogue_values({"eval/accuracy": 0.3, "eval/num_examples": 32.0}) == {"eval_score": 0.3, "eval_size": 32.0}
    assert catalogue_values({"eval/num_examples": 32.0, "eval_size": 8.0}) == {"eval_size": 8.0}


def test_tunix_keys_fill_their_columns_and_only_its_score_mean_is_an_evaluation_score():
    step = {"rewards/train/mean": 0.5, "rewards/train/score/mean": 2.0, "completions/train/mean_length": 120.0,
            "completions/train/max_length": 300.0, "actor/train/grad_norm": 1.5, "actor/train/kl": 0.01,
            "actor/train/pg_clipfrac": 0.0}
    out = catalogue_values(step)
    assert out == {"reward_mean": 2.0, "response_length_mean": 120.0, "grad_norm": 1.5, "kl_ref_mean": 0.01,
                   "clip_region_frac": 0.0}  # rewards/train/mean: the mean over reward functions, not mapped
    assert catalogue_values({"rewards/train/sum": 3.0}) == {"reward_mean": 3.0}
    assert catalogue_values({"rewards/train/sum": 3.0, "rewards/train/score/mean": 2.9})["reward_mean"] == 2.9
    evals = {"rewards/eval/score/mean": 1.25, "rewards/eval/score/max": 4.0, "rewards/eval/mean": 0.3,
             "rewards/eval/check_answer": 2.0, "actor/eval/kl": 0.2}
    assert catalogue_values(evals) == {"eval_score": 1.25}


def test_prime_rl_keys_fill_their_columns_and_the_solve_shares_do_not():
    step = {"reward/mean": 0.25, "completion_len/mean": 80.0, "is_truncated/mean": 0.125, "entropy/mean": 0.9,
            "optim/grad_norm": 0.5, "batch/solve_none": 0.5, "batch/solve_all": 0.0, "mismatch_kl/mean": 0.001}
    assert catalogue_values(step) == {"reward_mean": 0.25, "response_length_mean": 80.0, "truncated_frac": 0.125,
                                      "entropy_mean": 0.9, "grad_norm": 0.5}


def test_roll_policy_grad_norm_fills_its_column_and_the_unmasked_clip_shares_do_not():
    # ROLL's agentic pipeline (W&B export of a FrozenLake run): the train score (critic/score/mean, verl's name) and
    # the policy worker's grad norm fill reward_mean and grad_norm; actor/ppo_ratio_clipfrac averages over padding
    # too (not the catalogue's masked share) and actor/ratio_mean has no catalogue column (ratio_mean_pos is over A > 0
    # tokens only): both stay scalars under their own names.
    step = {"critic/score/mean": 0.25, "actor_train/grad_norm": 3.5, "actor/ppo_ratio_clipfrac": 0.01,
            "actor/ratio_mean": 0.98, "critic/entropy/mean": 0.7, "critic/correct/mean": 0.25,
            "group/mixed_groups_ratio": 0.375}
    # the all-equal groups' share is the complement of the mixed one: 1 − 0.375 = 0.625
    assert catalogue_values(step) == {"reward_mean": 0.25, "grad_norm": 3.5, "entropy_mean": 0.7,
                                      "correct_frac": 0.25, "zero_std_group_frac": 0.625}
