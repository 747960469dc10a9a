"""What a logged key means in the catalogue: the one home of the mapping from TRL / HF Trainer, verl, OpenRLHF,
tinker-cookbook and AReaL log keys onto catalogue metrics, each with the definition difference written beside it.

An ingested run has no per-token source, so its logged keys are the only source of reward, entropy and length:
a key whose meaning is a catalogue metric fills that catalogue column (``steps.entropy_mean`` …), and the original
key is always kept too (``scalars``). Where the framework's definition differs from the catalogue's (per generation
batch vs per optimizer step, averaged over micro-batches, a different KL estimator …) the difference is written in
the entry, and docs/ingest.md prints this table (a test keeps the two equal). When two keys of one step map onto
the same metric (verl's ``actor/entropy`` and ``actor/entropy_loss``), the one listed first here wins.

A key that is itself a catalogue step column (``entropy_mean``, ``grad_norm`` …) maps onto that column. HF's
TensorBoard / trackio / W&B callbacks write ``train/<key>``: a key not listed is looked up again without ``train/``.
A user's own aliases (``ingest --map KEY=COLUMN``, checked in :mod:`.maps`) are applied here too, before this table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ..catalogue import ALL_STEP_COLUMNS


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


_GEN = "averaged over the logging interval's generation batches (catalogue: the optimizer step's sequences)"
_MB = "mean over the step's micro-batches of per-micro-batch means (catalogue: one mean over the step's tokens)"

_ORLHF = "OpenRLHF's step: one rollout batch and every optimizer step trained on it"
_ORLHF_MB = ("weighted by tokens over the PPO step's micro-batches (before 0.9.8: the mean of per-micro-batch means); "
             "catalogue: one optimizer step's tokens")

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
}
"""Logged key → its catalogue meaning (order = precedence among keys of one step that fill the same metric)."""

TRL_ALIASES: dict[str, str] = {key: KEY_MAP[key].metric for key in ("learning_rate", "policy_loss")}
"""TRL / HF log keys the TRL adapter (:mod:`collapsewatch.integrations.trl`) stores a second time under their
catalogue name, as :data:`KEY_MAP` maps them (same definition). ``grad_norm``, ``loss`` and ``step_time`` already
carry catalogue names; ``kl`` becomes ``loss_kl`` = β · kl and, when TRL weights it by the ratio
(``use_bias_correction_kl``), ``kl_ref_ratio_weighted_mean`` (docs/trl.md, "Step values next to TRL's")."""

HF_PREFIX = "train/"
"""HF's TensorBoard / trackio / W&B callbacks (and OpenRLHF's loggers) write ``train/<key>``."""


def meaning(key: str) -> Meaning | None:
    """The catalogue meaning of a logged key: listed, a catalogue column itself, or listed without ``train/``."""
    if key in KEY_MAP:
        return KEY_MAP[key]
    if key in ALL_STEP_COLUMNS:
        return Meaning(key, "the catalogue's own name")
    if key.startswith(HF_PREFIX):
        return meaning(key[len(HF_PREFIX):])
    return None


EVAL_PREFIXES: tuple[str, ...] = ("eval/", "eval_", "eval-", "val/", "val_", "val-core/", "validation/",
                                  "validation_", "test/", "test_")
"""A key is an evaluation key when it starts (lower-cased) with one of these: W&B-style ``eval/…`` and ``val/…``,
HF Trainer's ``eval_<metric>``, ``eval-rollout/…``, verl's ``val-core/<data source>/<metric>/mean@N`` (not
``val-aux/``: verl's secondary statistics)."""
EVAL_NEVER = re.compile(r"(^|[/_])std|best@|worst@|maj@|length|len($|[/_])|second|loss"
                        r"|temperature|top_p|max_tokens|false|entropy|overlong|clip")
"""Evaluation keys that are no score of the task, by a part of the (lower-cased) rest of the key: spreads and
best/worst/majority-of-k variants, lengths, timings, losses, sampling settings, error rates, entropy, clipping; and
by a whole word (:func:`eval_never_word`): format compliance, timings, counts, KL."""
_NEVER_PARTS = frozenset({"kl", "format", "formats", "formatted", "formatting"})
_WORD_SEP = re.compile(r"[/_.\-@]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def key_words(rest: str) -> list[list[str]]:
    """The words of a key as logged (not lower-cased), each split into its camelCase parts, lower-cased:
    ``rewards/CountAccuracy/mean`` → ``[["rewards"], ["count", "accuracy"], ["mean"]]``; ``response_count`` →
    ``[["response"], ["count"]]``; ``HTTPCount`` → ``[["http", "count"]]``."""
    return [[p.lower() for p in _CAMEL_PART.findall(word)] or [word.lower()] for word in _WORD_SEP.split(rest) if word]


def eval_never_word(rest: str) -> bool:
    """Whether a word of the key says it is no score — matched as a whole word, not inside one, so a name that merely
    holds the letters is read (ms-swift's ``CountAccuracy``, ``accountability``, ``information``, ``sentiment``,
    NuminaMath's ``numina``): a count — ``count``/``counts`` as a word or a camelCase word's last part (a compound
    names its last part: ``responseCount`` is a count, ``CountAccuracy`` an accuracy of counting); ``num`` as a
    word's first part (``num_tokens``, ``numTokens``); format compliance — ``format`` (``formats``, ``formatted``)
    as any part (``format_reward``, ``CountFormat``); a time — a part ending in ``time``/``times`` or starting with
    ``time`` (``runtime``, ``time_s``, ``timestamp``); KL — ``kl`` as any part."""
    for parts in key_words(rest):
        if parts[-1] in ("count", "counts") or parts[0] == "num":
            return True
        if any(p in _NEVER_PARTS or p.endswith(("time", "times")) or p.startswith("time") for p in parts):
            return True
    return False


EVAL_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("accuracy", re.compile(r"(^|[/_])(acc|accuracy|success|success_rate|correct|pass@1|pass1|pass_at_1|exact_match"
                            r"|em|macro_em)($|[/_@])")),
    ("score", re.compile(r"(^|[/_])score($|[/_@])")),
    ("reward", re.compile(r"(^|[/_])rewards?($|[/_@])")),
)
"""An evaluation key's family, by the rest of the key after its prefix (lower-cased, a camelCase boundary read as
``_``: ms-swift's ``eval_rewards/CountAccuracy/mean`` is an accuracy, as ``accuracy_reward`` is); a step's ``eval_score`` is the mean over the
keys of the first family it logged (several data sources' accuracies average into one score; a reward is read only
where nothing scores accuracy)."""


EVAL_ALIASES = {"rewards/eval/score/mean": "eval/reward"}
"""Evaluation keys a framework logs outside :data:`EVAL_PREFIXES`, read as the key named: Tunix's mean summed reward
over its evaluation batches (its other ``rewards/eval/*`` keys — max, min, per-function rewards — are no score)."""


def eval_score(values: dict[str, float | None]) -> float | None:
    """The step's ``eval_score`` from its evaluation keys (:data:`EVAL_PREFIXES`, :data:`EVAL_FAMILIES`): the mean of
    the finite values of the first family whose keys the step holds — a key logged empty (NULL, NaN) still names what
    the evaluation measures, so a logger that writes its accuracy as null between evaluations and its mean reward as 0
    has no score there, not a reward of 0. None when that family has no finite value, or the step no evaluation key."""
    found: dict[str, list[float]] = {}
    for key, value in values.items():
        key = EVAL_ALIASES.get(key, key)
        prefix = next((p for p in EVAL_PREFIXES if key.lower().startswith(p)), None)
        if prefix is None:
            continue
        rest = _CAMEL_BOUNDARY.sub("_", key[len(prefix):]).lower()  # CountAccuracy → count_accuracy: an accuracy
        if EVAL_NEVER.search(rest) or eval_never_word(key[len(prefix):]):
            continue
        family = next((name for name, pattern in EVAL_FAMILIES if pattern.search(rest)), None)
        if family is not None:
            found.setdefault(family, []).extend([float(value)] if value is not None and math.isfinite(value) else [])
    first = next((found[name] for name, _ in EVAL_FAMILIES if name in found), [])
    return sum(first) / len(first) if first else None


EVAL_SIZE = re.compile(r"(^|/)(num_examples|n_examples|num_eval_examples|n_problems|num_problems|n_questions"
                       r"|num_questions|num_evaluated|n_evaluated|n_scored|num_scored|samples|total_episodes)$")
"""Evaluation keys (by the last part of the rest after an :data:`EVAL_PREFIXES` prefix) that log how many examples
the evaluation graded: ``eval/num_examples``, ``val/<data>/num_examples``, ``eval/n_problems``, tinker's
``test/env/all/total_episodes``, HF example scripts' ``eval_samples`` (``len(eval_dataset)``) …"""


def eval_size(values: dict[str, float | None]) -> float | None:
    """How many examples the step's evaluation graded: the smallest finite positive value of its :data:`EVAL_SIZE`
    keys (several data sources' scores average into one ``eval_score``; the smallest set's size bounds its noise
    from above), else HF Trainer's ``round(<prefix>samples_per_second × <prefix>runtime)`` — what its speed metrics
    divide by — where a prefix logs both. None when the step logs neither."""
    sizes: list[float] = []
    rates: dict[str, dict[str, float]] = {}
    for key, value in values.items():
        if value is None or not math.isfinite(value) or value <= 0:
            continue
        low = key.lower()
        prefix = next((p for p in EVAL_PREFIXES if low.startswith(p)), None)
        if prefix is None:
            continue
        rest = low[len(prefix):]
        if EVAL_SIZE.search(rest):
            sizes.append(float(value))
        elif rest in ("samples_per_second", "runtime"):
            rates.setdefault(prefix, {})[rest] = float(value)
    if sizes:
        return min(sizes)
    derived = [round(r["samples_per_second"] * r["runtime"]) for r in rates.values() if len(r) == 2]
    return float(min(derived)) if derived and min(derived) > 0 else None


_RANK = {k: i for i, k in enumerate(KEY_MAP)}


def _chosen(values: dict[str, float | None]) -> dict[str, tuple[int, str, float | None]]:
    """Each catalogue metric the step's keys fill → (rank, the key that fills it, its value): among keys filling one
    metric the one listed first in :data:`KEY_MAP` wins (a catalogue-named key before any listed one)."""
    best: dict[str, tuple[int, str, float | None]] = {}
    for key, value in values.items():
        m = meaning(key)
        if m is None:
            continue
        rank = _RANK.get(key.removeprefix(HF_PREFIX), -1)
        if m.metric not in best or rank < best[m.metric][0]:
            best[m.metric] = (rank, key, 1.0 - value if m.complement and value is not None else value)
    return best


def catalogue_values(values: dict[str, float | None],
                     maps: Mapping[str, str] | None = None) -> dict[str, float | None]:
    """One step's logged values under their catalogue names; among keys filling one metric the one listed first in
    :data:`KEY_MAP` wins (a catalogue-named key before any listed one). ``maps`` — the user's own aliases, logged key
    → catalogue column (``ingest --map``, :mod:`.maps`) — come first: a mapped key fills its column whatever the
    step's other keys give it, and means nothing else."""
    maps = maps or {}
    own = {k: v for k, v in values.items() if k not in maps}
    out = {metric: v for metric, (_, _, v) in _chosen(own).items()}
    out.update({column: values[key] for key, column in maps.items() if key in values})
    if "eval_score" not in out and (score := eval_score(own)) is not None:
        out["eval_score"] = score  # derived from the step's evaluation keys (a logged `eval_score` wins)
    if "eval_size" not in out and (size := eval_size(own)) is not None:
        out["eval_size"] = size  # how many examples that evaluation graded (a logged `eval_size` wins)
    return out


def mapped_over(values: dict[str, float | None], maps: Mapping[str, str]) -> dict[str, str]:
    """The catalogue columns the step's own keys give a value that one of the user's ``maps`` replaces: column → what
    gave it, for the summary (``'reward'``, or the evaluation keys ``eval_score`` / ``eval_size`` are derived from)."""
    own = {k: v for k, v in values.items() if k not in maps}
    given = {metric: repr(key) for metric, (_, key, v) in _chosen(own).items() if v is not None}
    derived = {"eval_score": eval_score(own), "eval_size": eval_size(own)}
    given.update({m: "the evaluation keys" for m, v in derived.items() if v is not None and m not in given})
    return {column: given[column] for key, column in maps.items() if key in values and column in given}


def unmapped(keys: Iterable[str], maps: Mapping[str, str] | None = None) -> list[str]:
    """The logged ``keys`` that fill no catalogue column on their own (:func:`catalogue_values` of the key alone is
    empty) and no ``maps`` entry names: kept in ``scalars`` under their names, read by no detector — what a user
    maps (``ingest --map``) to be judged."""
    return sorted(k for k in set(keys) if k not in (maps or {}) and not catalogue_values({k: 1.0}))


def in_catalogue_order(columns: Iterable[str]) -> list[str]:
    """Catalogue column names in the catalogue's order (``ALL_STEP_COLUMNS``; any other name last, by name)."""
    order = {c: i for i, c in enumerate(ALL_STEP_COLUMNS)}
    return sorted(set(columns), key=lambda c: (order.get(c, len(order)), c))


def second_rows(values: dict[str, float | None], columns: Collection[str],
                maps: Mapping[str, str] | None = None) -> dict[str, float | None]:
    """The scalars a step's logged ``values`` add under catalogue names: each of ``columns`` a logged key means
    (:func:`catalogue_values`, with the user's ``maps``) that is not itself a logged key (``reward`` →
    ``reward_mean``)."""
    return {name: v for name, v in catalogue_values(values, maps).items() if name in columns and name not in values}


def markdown_table() -> str:
    """:data:`KEY_MAP` as the Markdown table docs/ingest.md prints."""
    rows = ["| logged key | catalogue | logged by | how it differs |", "|---|---|---|---|"]
    for key, m in KEY_MAP.items():
        rows.append(f"| `{key}` | `{m.metric}` | {m.source} | {m.difference or 'the same'} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m collapsewatch.ingest.keys: the table docs/ingest.md prints
    print(markdown_table(), end="")
