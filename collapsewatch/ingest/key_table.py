"""The key table: what each framework's logged key means in the catalogue — :data:`KEY_MAP`, one :class:`Meaning` per
key of TRL / HF Trainer, verl, OpenRLHF, tinker-cookbook, AReaL, Tunix, prime-rl, ROLL and SkyRL, each with the
framework's version and how its definition differs from the catalogue's — and :func:`markdown_table`, the same table
as docs/ingest.md prints it (a test keeps the two equal).

The table is data only. How a step's keys are looked up in it — the one listed first winning among keys of one step
that fill the same column, HF's ``train/`` prefix, a key named as a catalogue column, an entry that holds only beside
its witness keys (:attr:`Meaning.only_with`), the user's ``--map`` aliases, the evaluation keys — is
:mod:`.keys`, which re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Meaning:
    metric: str
    """The catalogue step column the key fills."""
    source: str
    """Which framework logs the key, and from which version when that matters."""
    difference: str = ""
    """How the logged definition differs from the catalogue's (empty: the same)."""
    complement: bool = False
    """The key logs the complement of the metric's share: the value stored is 1 − the logged one."""
    only_with: tuple[str, ...] = ()
    """Witness keys: the key has this meaning only in a step that also logs one of them — a key whose meaning changed
    between versions of its framework, the witnesses being keys only the versions with this meaning write. Without one
    the key fills no column and is kept as a scalar under its name (:func:`.keys.catalogue_values`)."""


_GEN = "averaged over the logging interval's generation batches (catalogue: the optimizer step's sequences)"
_MB = "mean over the step's micro-batches of per-micro-batch means (catalogue: one mean over the step's tokens)"

_ORLHF = "OpenRLHF's step: one rollout batch and every optimizer step trained on it"
_ORLHF_MB = ("weighted by tokens over the PPO step's micro-batches (before 0.9.8: the mean of per-micro-batch means); "
             "catalogue: one optimizer step's tokens")

_SKY_MB = ("mean over the micro-batches, the DP ranks, then the step's mini-batches and update epochs of "
           "per-micro-batch means (catalogue: one mean over the step's tokens)")
_SKY_ALL = "SkyRL (skyrl-train 0.1.0 to SkyRL a9564572e)"
_SKY_LOSS = ("SkyRL ≥ 2026-03-31 (#1296): the mini-batch's (its pre-scaled micro-batch losses summed over micro-batches "
             "and DP ranks), mean over the step's mini-batches; before: the mean of per-micro-batch values")
SKYRL_CURRENT = ("policy/final_loss", "policy/loss_metrics/clip_ratio")
"""Keys of SkyRL's policy status that only versions taking the masked entropy write (``final_loss`` from 2025-11-17,
skyrl-train #622, the commit that masked the Megatron path's entropy, a month after the FSDP path's; ``loss_metrics/``
from 2026-02-03): logged in the same status dict as ``policy/policy_entropy``, so in the same tracker call."""

KEY_MAP: dict[str, Meaning] = {
    # -- OpenRLHF ≥ 0.9.8's rollout statistics (openrlhf/trainer/ppo_trainer.py _compute_rollout_stats), listed first:
    #    the same step also logs `reward`, `response_length`, `truncated`, which these beat --
    "rollout/reward_mean": Meaning("reward_mean", "OpenRLHF ≥ 0.9.8", "mean over the rollout batch's samples "
                                   "(length penalties included); " + _ORLHF),
    "rollout/reward_std": Meaning("reward_std", "OpenRLHF ≥ 0.9.8", "sample std over the rollout batch, as the "
                                  "catalogue; " + _ORLHF),
    "rollout/response_length_mean": Meaning("response_length_mean", "OpenRLHF ≥ 0.9.8", "span of each sample's "
                                            "action mask (tool observations inside it counted, in agent runs), "
                                            "mean over the rollout batch"),
    "rollout/truncated_rate": Meaning("truncated_frac", "OpenRLHF ≥ 0.9.8", "share of the rollout batch's samples "
                                      "that stopped at the length limit"),
    # -- HF Trainer (every TRL trainer logs these too) --
    "learning_rate": Meaning("lr", "HF Trainer"),
    "grad_norm": Meaning("grad_norm", "HF Trainer", "last optimizer step of the logging interval"),
    "loss": Meaning("loss", "HF Trainer", "averaged over the logging interval"),
    # -- TRL GRPOTrainer (trl/trainer/grpo_trainer.py) --
    "reward": Meaning("reward_mean", "TRL, OpenRLHF", "TRL: " + _GEN + "; OpenRLHF: per-sample reward, mean "
                      "over the PPO step's micro-batches (before 0.9.8: of per-micro-batch means)"),
    "reward_std": Meaning("reward_std", "TRL", "TRL ≥ 0.27: sample std over the generation batch, as the catalogue; "
                          "TRL < 0.27: the mean of the groups' stds (smaller when groups differ)"),
    "frac_reward_zero_std": Meaning("zero_std_group_frac", "TRL ≥ 0.18", "share of *responses* whose group has "
                                    "zero reward std: the share of groups, groups being of equal size; " + _GEN),
    "entropy": Meaning("entropy_mean", "TRL ≥ 0.20", "token mean under π_θ during the update; " + _MB),
    "completions/mean_length": Meaning("response_length_mean", "TRL ≥ 0.17", "completion tokens up to EOS (tool "
                                       "tokens included in multi-turn); " + _GEN),
    "completion_length": Meaning("response_length_mean", "TRL < 0.17", "as completions/mean_length"),
    "completions/clipped_ratio": Meaning("truncated_frac", "TRL ≥ 0.17", "share of completions not ending in EOS "
                                         "or pad; " + _GEN),
    "tools/call_frequency": Meaning("tool_calls_mean", "TRL GRPO with tools (checked in 1.16)", "tool calls per "
                                    "completion, failed calls included (catalogue: valid calls); " + _GEN),
    "clip_ratio/low_mean": Meaning("clip_low_frac", "TRL ≥ 0.17", "TRL's flags, the catalogue's; logged as 0 on "
                                   "on-policy steps where the catalogue has NULL; " + _MB),
    "clip_ratio/high_mean": Meaning("clip_high_frac", "TRL ≥ 0.17", "as clip_ratio/low_mean"),
    "clip_ratio/region_mean": Meaning("clip_region_frac", "TRL ≥ 0.17", "as clip_ratio/low_mean"),
    "policy_loss": Meaning("loss_policy", "TRL, OpenRLHF"),
    "kl": Meaning("kl_ref_mean", "TRL, OpenRLHF", "TRL: k3 to the reference, weighted by r when "
                  "use_bias_correction_kl (TRL 1.x default; equal on-policy, where r ≡ 1); only logged with beta ≠ 0. "
                  "OpenRLHF: --algo.kl.estimator (k1 by default, k2, k3: other estimators of the same KL), "
                  "token-weighted with --algo.kl.use_loss, else per-sample means (the KL in the reward)"),
    # -- verl (verl/workers/actor, verl/trainer/ppo/metric_utils.py, core_algos) --
    "actor/entropy": Meaning("entropy_mean", "verl ≥ 0.5", "agg_loss of π_old's entropy over the rollout batch, "
                             "before the update (token mean under loss_agg_mode=token-mean)"),
    "actor/entropy_loss": Meaning("entropy_mean", "verl < 0.5; later with entropy_coeff ≠ 0", "π_θ's entropy "
                                  "during the update; " + _MB),
    "actor/pg_clipfrac": Meaning("clip_region_frac", "verl", "masked mean of [clipped branch active] = "
                                 "clip_low ∨ clip_high; 0 on-policy where the catalogue has NULL; " + _MB),
    "actor/pg_clipfrac_lower": Meaning("dual_clip_frac", "verl ≥ 0.3", "A < 0 ∧ r > c (verl's dual clip, c = 3); "
                                       + _MB),
    "actor/ppo_kl": Meaning("ppo_kl", "verl", "masked mean of −clamp(logp − logp_old, ±20); " + _MB),
    "actor/grad_norm": Meaning("grad_norm", "verl", "mean over the step's mini-batches"),
    "actor/lr": Meaning("lr", "verl"),
    "actor/pg_loss": Meaning("loss_policy", "verl"),
    "actor/kl_loss": Meaning("kl_ref_mean", "verl", "kl_loss_type: low_var_kl (k3 clamped to ±10, verl's GRPO "
                             "default) is the catalogue's up to the clamp; kl (k1) and mse (k2) are other "
                             "estimators"),
    "critic/score/mean": Meaning("reward_mean", "verl", "mean over sequences of Σ token_level_scores (aborted, "
                                 "empty responses left out)"),
    "response_length/mean": Meaning("response_length_mean", "verl", "Σ attention over the response: tool "
                                    "observations counted in multi-turn runs (the catalogue counts model tokens)"),
    "response_length/clip_ratio": Meaning("truncated_frac", "verl", "share of responses that filled the length "
                                          "budget"),
    "env/number_of_valid_search": Meaning("tool_calls_mean", "Search-R1 (a verl fork) and its descendants",
                                          "mean over the batch's samples of valid search actions"),
    "tool_call_counts/mean": Meaning("tool_calls_mean", "verl (agent loop)", "mean over the batch's samples "
                                     "of the agent loop's tool calls"),
    "episode/tool_call_count/mean": Meaning("tool_calls_mean", "verl-agent (GiGPO)", "mean over the batch's "
                                            "trajectories of the environment's tool-call count"),
    "rollout_corr/chi2_token": Meaning("is_chi2", "verl ≥ 0.7", "mean over mask of ρ² − 1, ρ = π_old / π_rollout"),
    "rollout_corr/rollout_is_mean": Meaning("is_weight_mean", "verl 0.9"),  # masked mean of the applied IS weight
    "rollout_corr/rollout_is_ratio_fraction_high": Meaning("is_truncated_frac", "verl 0.9"),  # ρ > C, token / seq
    "rollout_corr/rollout_rs_masked_fraction": Meaning("rs_masked_frac", "verl 0.9"),  # mask tokens rejected
    "timing_s/step": Meaning("step_time", "verl", "the whole PPO step, rollout included"),
    "timing_s/gen": Meaning("rollout_time", "verl"),
    # -- OpenRLHF (openrlhf/trainer/ray/ppo_actor.py, models/loss.py; checked at v0.11.0, 3c3be62; its TensorBoard /
    #    wandb loggers add train/, its console prints `✨ Global step N: {…}` from 0.8.1) --
    "response_length": Meaning("response_length_mean", "OpenRLHF", "span of the action mask (tool tokens "
                               "included); per sample, mean over the PPO step's micro-batches"),
    "truncated": Meaning("truncated_frac", "OpenRLHF ≥ 0.9.7", "share of samples stopped at the length limit, "
                         "over the PPO step's micro-batches"),
    "entropy_loss": Meaning("entropy_mean", "OpenRLHF ≥ 0.8 (--actor.entropy_coef set, 0 included)", "π_θ's "
                            "entropy during the update, " + _ORLHF_MB),
    "ppo_clip_ratio": Meaning("clip_region_frac", "OpenRLHF ≥ 0.8.3", "masked mean of [clipped surrogate < "
                              "unclipped] = (A > 0 ∧ r > 1+ε) ∨ (A < 0 ∧ r < 1−ε), the catalogue's region (GSPO: "
                              "of the sequence ratio); 0 on-policy where the catalogue has NULL; " + _ORLHF_MB),
    "ppo_kl": Meaning("ppo_kl", "OpenRLHF ≥ 0.8.3", "masked mean of −(logp − logp_old), unclamped; " + _ORLHF_MB),
    "actor_grad_norm": Meaning("grad_norm", "OpenRLHF ≥ 0.9.6", "DeepSpeed's global norm before clipping, at the "
                               "last optimizer step of the PPO step"),
    "actor_lr": Meaning("lr", "OpenRLHF", "at the last optimizer step of the PPO step"),
    "timing/step_total": Meaning("step_time", "OpenRLHF ≥ 0.9.6", "the whole PPO step: generation, experience "
                                 "making, training and the weight broadcast summed (async trainer: its wall time)"),
    "timing/generation": Meaning("rollout_time", "OpenRLHF ≥ 0.9.6", "async trainer: overlapped with training"),
    # -- tinker-cookbook's metrics.jsonl (tinker_cookbook/rl/metric_util.py, rl/metrics.py; checked at 9dfcc3a2):
    #    one row per step, `env/all/…` over the step's trajectory groups --
    "env/all/reward/total": Meaning("reward_mean", "tinker-cookbook", "mean over the batch's trajectories of each "
                                    "one's total reward (every turn's summed)"),
    "env/all/correct": Meaning("correct_frac", "tinker-cookbook (math environments)", "mean over the batch's turns "
                               "of the environment's `correct` metric"),
    "env/all/ac_tokens_per_turn": Meaning("response_length_mean", "tinker-cookbook", "action tokens per turn over "
                                          "the batch (the response length where an episode is one turn)"),
    "env/all/by_group/frac_mixed": Meaning("zero_std_group_frac", "tinker-cookbook", "1 − the logged share of the "
                                           "step's groups whose rewards are not all equal (= frac_all_good + "
                                           "frac_all_bad): a share of groups, as TRL's", complement=True),
    "optim/entropy": Meaning("entropy_mean", "tinker-cookbook", "−mean over action tokens of the sampler's "
                             "log-prob of the sampled token: a one-sample estimate of the sampler's entropy"),
    "optim/lr": Meaning("lr", "tinker-cookbook"),
    # -- AReaL's StatsLogger (areal/engine/ppo/actor.py: PPOActor.ppo_update under the scope `ppo_actor`, its loss
    #    statistics under `ppo_actor/update`; a stat is exported as `<name>/avg`, `/min`, `/max`) --
    "ppo_actor/task_reward/avg": Meaning("reward_mean", "AReaL", "mean over the step's sequences of the task "
                                         "reward, before reward scaling and the KL penalty"),
    "ppo_actor/update/entropy/avg": Meaning("entropy_mean", "AReaL", "mean over valid tokens of the training "
                                            "forward pass's entropy, over the step's micro-batches (catalogue: "
                                            "the rollout policy's)"),
    "ppo_actor/update/grad_norm": Meaning("grad_norm", "AReaL", "the engine's norm at the step's optimizer "
                                          "steps, averaged by the stats tracker"),
    "ppo_actor/update/clip_ratio/avg": Meaning("clip_region_frac", "AReaL", "share of valid tokens whose PPO "
                                               "ratio was clipped (either side)"),
    # -- Google Tunix GRPOLearner (tunix/rl/reward_manager.py, rl/grpo/grpo_learner.py, rl/algo_core.py,
    #    sft/peft_trainer.py; checked at c7d8950f): its logger writes `<group>/<mode>/<rest>` --
    "rewards/train/score/mean": Meaning("reward_mean", "Tunix", "mean over the batch of each completion's reward "
                                        "summed over the reward functions (the one advantages use)"),
    "rewards/train/sum": Meaning("reward_mean", "Tunix", "as rewards/train/score/mean"),
    "completions/train/mean_length": Meaning("response_length_mean", "Tunix", "non-pad completion tokens, mean over "
                                             "the batch"),
    "actor/train/grad_norm": Meaning("grad_norm", "Tunix", "global norm before the optimizer (its clipping); mean "
                                     "over micro-steps: with gradient accumulation g, the norm / g"),
    "actor/train/kl": Meaning("kl_ref_mean", "Tunix", "token mean of kl_loss_mode's estimator (GRPOConfig "
                              "default kl = k1; low_var_kl = k3, the catalogue's); 0 with no reference model"),
    "actor/train/pg_clipfrac": Meaning("clip_region_frac", "Tunix", "token mean of [clipped branch active]; 0 "
                                       "on-policy where the catalogue has NULL"),
    # -- prime-rl (src/prime_rl/orchestrator/orchestrator.py, trainer/rl/train.py; checked at c28eaf87) --
    "reward/mean": Meaning("reward_mean", "prime-rl orchestrator", "mean over the step's rollouts"),
    "completion_len/mean": Meaning("response_length_mean", "prime-rl orchestrator", "seq_len − prompt_len (env "
                                   "tokens of multi-turn rollouts counted), mean per example, then over examples"),
    "is_truncated/mean": Meaning("truncated_frac", "prime-rl orchestrator", "share per example, mean over examples"),
    "entropy/mean": Meaning("entropy_mean", "prime-rl trainer", "π_θ's entropy (temperature-scaled logits) over the "
                            "step's loss-mask tokens, during the update"),
    "optim/grad_norm": Meaning("grad_norm", "prime-rl trainer", "clip_grad_norm_'s total norm, before clipping"),
    # -- ROLL (roll/distributed/strategy/, pipeline/agentic/agentic_pipeline.py, utils/metrics/metrics_manager.py;
    #    checked at 8eb27cc2; `actor/ppo_ratio_*clipfrac` average padding too, not the catalogue's share: not mapped) --
    "actor_train/grad_norm": Meaning("grad_norm", "ROLL", "the policy worker's (`actor_train`) total norm before "
                                     "clipping, mean over the step's optimizer steps"),
    "critic/entropy/mean": Meaning("entropy_mean", "ROLL", "token mean over the response mask of the entropy the "
                                   "training engine computes with the old log-probs, before the update"),
    "critic/correct/mean": Meaning("correct_frac", "ROLL", "share of responses whose score is its maximum (1)"),
    "group/mixed_groups_ratio": Meaning("zero_std_group_frac", "ROLL", "1 − the logged share of prompts whose "
                                        "responses are neither all correct (score 1) nor all wrong (0): with a 0/1 "
                                        "score, the groups whose scores are all equal", complement=True),
    # -- SkyRL (NovaSky-AI/SkyRL, read at a9564572e, 2026-08: skyrl/train/trainer.py builds the tracker's keys — the
    #    policy worker's status as policy/<key>, reduced by worker_utils.reduce_metrics — and the older skyrl-train
    #    at its tags skyrl_train-v0.1.0 … v0.4.0 and as mert-cemri/CTU-Agent-v0 vendors it); dates: the commit that
    #    renamed or changed the key --
    "reward/avg_raw_reward": Meaning("reward_mean", _SKY_ALL, "mean over the step's trajectories of each one's "
                                     "reward (token-level rewards summed; step-wise training: the last turns'), "
                                     "before any KL penalty"),
    "loss/avg_final_rewards": Meaning("reward_mean", "SkyRL ≥ 2025-10-23 (#544)", "mean over the trained batch's "
                                      "sequences of Σ token rewards, after the KL penalty with use_kl_in_reward; "
                                      "reward/avg_raw_reward, logged beside it, comes first"),
    "loss/avg_raw_rewards": Meaning("reward_mean", "skyrl-train < 2025-10-23 (0.1.0, 0.2.0)", "as "
                                    "loss/avg_final_rewards"),
    "policy/policy_entropy": Meaning("entropy_mean", "SkyRL ≥ 2025-11-17 (#622; skyrl_train-v0.3.0 on)", "π_θ's "
                                     "entropy during the update, masked mean over the micro-batch's loss-mask tokens "
                                     "(the model's own: padding, tool outputs and sequences the mask drops left "
                                     "out); " + _SKY_MB + ". Older skyrl-train averaged it over the whole response "
                                     "window, padding and tool outputs included (entropy_BS.sum() / numel())",
                                     only_with=SKYRL_CURRENT),
    "policy/loss_metrics/clip_ratio": Meaning("clip_region_frac", "SkyRL ≥ 2026-02-03 (#849; skyrl_train-v0.4.0 "
                                              "on)", "masked mean of [−surr2 > −surr1] = (A > 0 ∧ r > 1+ε_high) ∨ "
                                              "(A < 0 ∧ r < 1−ε_low) under policy_loss_type regular or dual_clip "
                                              "(gspo: of the sequence ratio; cispo: the cap's hits; sapo, kl_cov: "
                                              "0; other loss types: their own share); 0 on-policy where the "
                                              "catalogue has NULL; " + _SKY_MB),
    "policy/ppo_clip_ratio": Meaning("clip_region_frac", "skyrl-train < 2026-02-03 (0.1.0–0.3.0)", "as "
                                     "policy/loss_metrics/clip_ratio"),
    "policy/grad_norm": Meaning("grad_norm", "SkyRL ≥ 2026-01-19 (#859; skyrl_train-v0.4.0 on)", "FSDP: "
                                "clip_grad_norm_'s total norm before clipping (no key with max_grad_norm ≤ 0); "
                                "Megatron: the norm its optimizer step returns; mean over the step's optimizer steps "
                                "(mini-batches × update epochs)"),
    "policy/raw_grad_norm": Meaning("grad_norm", "skyrl-train < 2026-01-19 (0.1.0–0.3.0)", "FSDP: the norm before "
                                    "clipping; Megatron: the norm its optimizer step returns; DeepSpeed: not logged; "
                                    "mean over the step's optimizer steps"),
    "policy/policy_lr": Meaning("lr", _SKY_ALL, "the scheduler's rate as each micro-batch saw it, mean over the "
                                "step's micro-batches"),
    "policy/final_loss": Meaning("loss", "SkyRL ≥ 2025-11-17 (#622)", "policy loss + kl_loss_coef · KL (use_kl_loss) "
                                 "− entropy_loss_coef · entropy (use_entropy_loss); " + _SKY_LOSS + " "
                                 "(skyrl_train-v0.3.0: each ÷ the gradient-accumulation steps)"),
    "policy/policy_loss": Meaning("loss_policy", _SKY_ALL, "the surrogate term alone; " + _SKY_LOSS),
    "policy/policy_kl": Meaning("kl_ref_mean", _SKY_ALL + ", use_kl_loss (its default)", "kl_estimator_type of π_θ "
                                "to the reference (k3 by default, clamped to ±10: the catalogue's up to the clamp; "
                                "k1, k2, abs: other estimators), each sequence's mean over its loss-mask tokens, then "
                                "the mean over sequences (catalogue: one token mean); " + _SKY_MB),
    "loss/avg_kl": Meaning("kl_ref_mean", _SKY_ALL + ", use_kl_in_reward", "the reward penalty's kl_estimator_type "
                           "of π_old (the rollout batch, before the update) to the reference, each sequence's mean "
                           "over its loss-mask tokens, then the mean over sequences"),
    "generate/avg_assistant_tokens": Meaning("response_length_mean", "SkyRL ≥ 2026-05-08 (#1596), its gym "
                                             "generator", "mean over the batch's trajectories (step-wise training: "
                                             "turns) of Σ loss mask: the model's tokens, tool observations left "
                                             "out; counted before overlong filtering"),
    "generate/avg_num_tokens": Meaning("response_length_mean", _SKY_ALL, "mean over the batch's trajectories "
                                       "(step-wise training: turns) of len(response_ids): tool observations counted "
                                       "in multi-turn runs (the catalogue counts model tokens)"),
    "timing/step": Meaning("step_time", _SKY_ALL, "the trainer's step from generation (every dynamic-sampling "
                           "round) through training; at a9564572e also its checkpoint saves and the weight sync "
                           "(skyrl_train-v0.1.0: not); evaluation not included"),
    "timing/generate": Meaning("rollout_time", _SKY_ALL, "dynamic sampling's rounds summed"),
}
"""Logged key → its catalogue meaning (order = precedence among keys of one step that fill the same metric)."""


def markdown_table() -> str:
    """:data:`KEY_MAP` as the Markdown table docs/ingest.md prints (an entry's witness keys said in its last cell)."""
    rows = ["| logged key | catalogue | logged by | how it differs |", "|---|---|---|---|"]
    for key, m in KEY_MAP.items():
        when = "; read only in a step that also logs " + " or ".join(f"`{k}`" for k in m.only_with)
        rows.append(f"| `{key}` | `{m.metric}` | {m.source} | {m.difference or 'the same'}"
                    f"{when if m.only_with else ''} |")
    return "\n".join(rows) + "\n"
