"""The metric catalogue: every metric collapsewatch records, defined once.

Probe, store schema (tested against this list), detectors, dashboard and docs all read these
definitions. Each entry gives the metric's column name, level (token / sequence / step), the
formula in words, the population it is computed over, and its unit. A metric that does not apply
to a step (on-policy, no rollout log-probs, no reference model) is stored as NULL, never 0.

Glossary (see the package docstring): ``r = exp(logp − logp_old)``; A = advantage; mask = loss mask;
"A>0 tokens" = tokens with mask = 1 of sequences whose advantage is > 0.

Conventions: ``CONVENTIONS`` below (printed into docs/metrics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["token", "sequence", "step"]


@dataclass(frozen=True)
class Metric:
    name: str
    level: Level
    formula: str
    population: str
    unit: str = ""
    dtype: str = "DOUBLE"


def _m(name: str, level: Level, formula: str, population: str, unit: str = "", dtype: str = "DOUBLE") -> Metric:
    return Metric(name, level, formula, population, unit, dtype)


CONVENTIONS = """\
Each convention is decided once; the formulas live in `collapsewatch/policy_math.py` and the probe.

* **on-policy is told**: `TokenBatch.on_policy` (the built-in trainer: the first mini-batch of the first epoch
  after a rollout; the TRL tap: TRL's own rule). On such a step every ratio-derived metric is NULL (token
  ratios, quantiles, clip fractions, `seq_ratio`, displacement, `ppo_kl`, `log_ratio_clamped`,
  `llds_gate_rate`), and the likelihood signals use `logp` as `logp_old` when the trainer has none
  (π_old = π_θ), so `logp_old_mean_*` exist on every step. Never inferred from float equality.
* **displacement sign**: `d = logp − logp_old`; negative = the likelihood went down (LLDS penalises max(0, −d)).
* **LLDS gate without turn ids**: a turn is a maximal run of mask = 1 tokens (docs/architecture.md, *Glossary*; the authors'
  chunk rule), for the objective and `llds_gate_rate` alike.
* **clip level**: clip flags are computed on what the objective clips — the token ratio, Turn-PPO's turn ratio,
  or GSPO's sequence ratio.
* **per-turn ratio metrics** (`turn_*_pos`) need `turn_ids`: without them they are NULL (one "turn" per response
  would only repeat `seq_ratio`); a turn's advantage is the mean A over its mask = 1 tokens, so per-token
  advantages (GiGPO) give each turn its own sign.
* **NaN reward = unknown**: `correct` is NULL; the sequence is left out of `correct_frac`, `reward_mean`,
  `reward_std` and of both `*_correct` and `*_incorrect`.
* **a logged value stands in** for a reward, length or entropy step metric the observed batches leave NULL
  (`LOGGED_STANDINS`: batches without rewards, a step only logged): `Monitor.log(step, {"reward_mean": r})`, or a
  key the ingest alias table maps onto it (`reward` …), fills the `steps` view's column and the online detectors'
  row. An observed value always wins, column by column.
* **repeat_frac_max** is NULL for responses with fewer than `REPEAT_MIN_TOKENS` model tokens (a 1-token answer
  is not degeneration).
"""

REPEAT_MIN_TOKENS = 8
"""Responses shorter than this (model tokens) get repeat_frac_max NULL: too short to call a repeat degeneration."""
NONFINITE_TENSORS: tuple[str, ...] = ("logp", "logp_old", "logp_rollout", "logp_ref", "entropy", "advantages",
                                      "rewards")
"""TokenBatch tensors checked for NaN / ±Inf, in the order ``first_nonfinite`` reports (step columns nonfinite_*)."""

MODEL = "mask = 1"
POS = "mask = 1, A > 0"
NEG = "mask = 1, A < 0"
TURN_POS = "turns (turn_ids) with a mask = 1 token, mean A over them > 0"

TOKEN_METRICS: tuple[Metric, ...] = (
    _m("logp", "token", "log π_θ(y_t) at the latest forward", MODEL, "nats"),
    _m("logp_old", "token", "log π_old(y_t) recomputed by the trainer", MODEL, "nats"),
    _m("logp_rollout", "token", "log-prob reported by the inference engine", MODEL, "nats"),
    _m("log_ratio", "token", "logp − logp_old, clamped to ±20", MODEL, "nats"),
    _m("ratio", "token", "exp(log_ratio)", MODEL),
    _m("entropy", "token", "entropy of softmax(logits / temperature)", MODEL, "nats"),
    _m("clip_low", "token", "r < 1−ε_low ∧ A < 0 (TRL semantics)", MODEL, dtype="BOOLEAN"),
    _m("clip_high", "token", "r > 1+ε_high ∧ A > 0 (TRL semantics)", MODEL, dtype="BOOLEAN"),
    _m("is_log_ratio", "token", "logp_old − logp_rollout (train/inference mismatch)", MODEL, "nats"),
    _m("kl_ref_k3", "token", "exp(logp_ref − logp) − (logp_ref − logp) − 1", MODEL, "nats"),
)

SEQUENCE_METRICS: tuple[Metric, ...] = (
    _m("reward", "sequence", "scalar reward of the response", "all sequences"),
    _m("advantage", "sequence", "advantage (mean over mask if given per token)", "all sequences"),
    _m("correct", "sequence", "reward ≥ success threshold; NULL when the reward is NaN (unknown)", "all sequences",
       dtype="BOOLEAN"),
    _m("n_tokens", "sequence", "response tokens of the row: mask = 1 or turn_ids ≥ 0 (model and observation "
       "tokens; prompt and padding excluded)", "all sequences", "tokens", "INTEGER"),
    _m("n_model_tokens", "sequence", "Σ mask", "all sequences", "tokens", "INTEGER"),
    _m("n_turns", "sequence", "distinct turn ids among mask = 1 tokens", "all sequences", "turns", "INTEGER"),
    _m("truncated", "sequence", "response hit the length budget", "all sequences", dtype="BOOLEAN"),
    _m("tool_calls", "sequence", "valid tool calls the response made (the built-in agent's searches); NULL where the "
       "task has no tool", "all sequences", "calls", "INTEGER"),
    _m("logp_old_sum", "sequence", "Σ logp_old", MODEL, "nats"),
    _m("logp_old_mean", "sequence", "mean logp_old (likelihood under π_old)", MODEL, "nats"),
    _m("displacement_sum", "sequence", "Σ (logp − logp_old); negative = likelihood went down; NULL on-policy",
       MODEL, "nats"),
    _m("displacement_mean", "sequence", "mean (logp − logp_old); NULL on-policy", MODEL, "nats"),
    _m("seq_ratio", "sequence", "GSPO sequence ratio exp(mean log_ratio); NULL on-policy", MODEL),
    _m("clip_low_frac", "sequence", "mean clip_low (flags of the clipped ratio: token, or GSPO's sequence ratio); "
       "NULL on-policy", MODEL),
    _m("clip_high_frac", "sequence", "mean clip_high; NULL on-policy", MODEL),
    _m("clip_region_frac", "sequence", "mean (clip_low ∨ clip_high); NULL on-policy", MODEL),
    _m("entropy_mean", "sequence", "mean entropy", MODEL, "nats"),
    _m("entropy_max", "sequence", "max entropy", MODEL, "nats"),
    _m("repeat_frac_max", "sequence", "largest share of one token id among model tokens (degeneration); NULL "
       "below REPEAT_MIN_TOKENS = 8 model tokens", MODEL),
    _m("is_log_ratio_mean", "sequence", "mean is_log_ratio", MODEL, "nats"),
)

_Q = ("p01", "p05", "p50", "p95", "p99", "min", "max")


def _ratio_quantiles() -> tuple[Metric, ...]:
    out = []
    for sign, pop in (("pos", POS), ("neg", NEG)):
        for q in _Q:
            out.append(_m(f"ratio_{q}_{sign}", "step", f"{q} of ratio (exact, linear interpolation)", pop))
    return tuple(out)


STEP_METRICS: tuple[Metric, ...] = (
    _m("n_seqs", "step", "sequences observed in the step", "all sequences", "sequences", "INTEGER"),
    _m("n_model_tokens", "step", "Σ mask", MODEL, "tokens", "BIGINT"),
    _m("on_policy", "step", "told by the trainer (TokenBatch.on_policy): true when every part of the step is "
       "on-policy; false when any part has ratios; NULL when not told and no logp_old", MODEL, dtype="BOOLEAN"),
    *_ratio_quantiles(),
    _m("ratio_mean_pos", "step", "mean ratio", POS),
    _m("ratio_mean_neg", "step", "mean ratio", NEG),
    _m("ratio_lt_0_5_frac_pos", "step", "share of tokens with r < 0.5", POS),
    _m("ratio_lt_0_1_frac_pos", "step", "share of tokens with r < 0.1", POS),
    _m("clip_low_frac", "step", "mean clip_low", MODEL),
    _m("clip_high_frac", "step", "mean clip_high", MODEL),
    _m("clip_region_frac", "step", "mean (clip_low ∨ clip_high)", MODEL),
    _m("clip_low_frac_pos", "step", "share of A>0 tokens with r < 1−ε_low (the clip that never fires)", POS),
    _m("turn_ratio_mean_pos", "step", "mean turn ratio w_k = exp(mean log_ratio over the turn's tokens), "
       "Turn-PPO's ratio; NULL without turn ids or on-policy", TURN_POS),
    _m("turn_ratio_p05_pos", "step", "p05 of w_k (exact, linear interpolation)", TURN_POS),
    _m("turn_ratio_p50_pos", "step", "p50 of w_k", TURN_POS),
    _m("turn_clip_low_frac_pos", "step", "share of A>0 turns with w_k < 1−ε_low (below the clip: never clipped "
       "with A > 0, the ISDD signature read per turn)", TURN_POS),
    _m("turn_clip_high_frac_pos", "step", "share of A>0 turns with w_k > 1+ε_high (the turn_ppo clip that fires on "
       "A > 0; other objectives: the same threshold on the turn ratio); NULL when the objective does not clip",
       TURN_POS),
    _m("dual_clip_frac", "step", "mean (r > c ∧ A < 0), NULL when dual clip is off", MODEL),
    _m("log_ratio_clamped", "step", "tokens whose |log_ratio| exceeded 20 before exp", MODEL, "tokens", "BIGINT"),
    _m("ppo_kl", "step", "mean(−log_ratio)", MODEL, "nats"),
    _m("entropy_mean", "step", "mean entropy", MODEL, "nats"),
    _m("entropy_p05", "step", "p05 entropy", MODEL, "nats"),
    _m("entropy_p50", "step", "p50 entropy", MODEL, "nats"),
    _m("entropy_p95", "step", "p95 entropy", MODEL, "nats"),
    _m("logp_old_mean_correct", "step", "mean over correct sequences of logp_old_mean", "correct sequences", "nats"),
    _m("logp_old_mean_incorrect", "step", "mean over incorrect sequences of logp_old_mean", "incorrect sequences",
       "nats"),
    _m("displacement_mean_correct", "step", "mean over correct sequences of displacement_mean",
       "correct sequences", "nats"),
    _m("displacement_mean_incorrect", "step", "mean over incorrect sequences of displacement_mean",
       "incorrect sequences", "nats"),
    _m("entropy_mean_correct", "step", "mean over correct sequences of entropy_mean (correct answers staying sharp "
       "while wrong ones go diffuse is exploration, not collapse)", "correct sequences", "nats"),
    _m("entropy_mean_incorrect", "step", "mean over incorrect sequences of entropy_mean", "incorrect sequences",
       "nats"),
    _m("logp_old_token_mean_correct", "step", "Σ logp_old / Σ mask over correct sequences (token-weighted L; "
       "with model_tokens_correct the per-step statistics of the pooled L)", "correct sequences", "nats"),
    _m("logp_old_token_mean_incorrect", "step", "Σ logp_old / Σ mask over incorrect sequences",
       "incorrect sequences", "nats"),
    _m("model_tokens_correct", "step", "Σ mask over correct sequences (0 when none is correct)", "correct sequences",
       "tokens"),
    _m("model_tokens_incorrect", "step", "Σ mask over incorrect sequences", "incorrect sequences", "tokens"),
    _m("llds_gate_rate", "step", "share of A ≥ 0 turns whose Σ(logp − logp_old) < 0", "turns of A ≥ 0 sequences"),
    _m("is_log_ratio_abs_mean", "step", "mean |logp_old − logp_rollout|", MODEL, "nats"),
    _m("is_ess", "step", "1 / mean((w / mean w)²), w = exp(is_log_ratio)", MODEL),
    _m("is_chi2", "step", "mean(w²) − 1, w = exp(is_log_ratio)", MODEL),
    _m("kl_ref_mean", "step", "mean kl_ref_k3 (plain, not ratio-weighted: TRL's default `kl` is mean r · k3, stored "
       "as the scalar kl_ref_ratio_weighted_mean)", MODEL, "nats"),
    _m("reward_mean", "step", "mean reward over the step's sequences (TRL's `reward`: over a generation batch)",
       "sequences with a finite reward"),
    _m("reward_std", "step", "sample std (n − 1) of reward, as TRL's reward_std", "sequences with a finite reward"),
    _m("correct_frac", "step", "share of correct sequences", "sequences with a finite reward"),
    _m("zero_std_group_frac", "step",
       "share of the step's groups whose G responses all got equal rewards (no signal), judged on the whole "
       "group (TokenBatch.group_zero_std), else on the members in the step; NaN (unscored) rewards are left out, "
       "and a group with < 2 scored rewards has no signal", "groups"),
    _m("response_length_mean", "step", "mean n_model_tokens over the step's sequences (TRL's "
       "completions/mean_length: over a generation batch)", "all sequences", "tokens"),
    _m("truncated_frac", "step", "share of truncated sequences", "all sequences"),
    _m("tool_calls_mean", "step", "mean tool_calls over the step's sequences (Search-R1's "
       "env/number_of_valid_search, TRL's tools/call_frequency)", "all sequences", "calls"),
    _m("repeat_frac_max", "step", "max over sequences of repeat_frac_max", f"sequences with ≥ {REPEAT_MIN_TOKENS} "
       "model tokens"),
    *(_m(f"nonfinite_{t}", "step", f"non-finite values in {t}", "all values" if t in ("advantages", "rewards")
         else "all tokens", "values", "BIGINT") for t in NONFINITE_TENSORS),
    _m("first_nonfinite", "step", "first tensor (in the order above) holding a non-finite value", "", dtype="VARCHAR"),
)

# Step scalars a trainer passes to Monitor.log; stored in the long `scalars` table under any key and
# pivoted into the `steps` view under these names (TRL / verl keys map onto them in the integrations).
LOGGED_SCALARS: tuple[Metric, ...] = (
    _m("grad_norm", "step", "global grad norm before clipping", "parameters"),
    _m("lr", "step", "learning rate", ""),
    _m("loss", "step", "total loss (the built-in trainer: Σ of the loss_* terms, each aggregated like the loss)", ""),
    _m("loss_policy", "step", "policy (surrogate) loss term", ""),
    _m("loss_penalty", "step", "objective's extra penalty term (SAPO KL / LLDS)", ""),
    _m("loss_kl", "step", "β · KL-to-reference term", ""),
    _m("loss_entropy", "step", "−c_H · entropy bonus term", ""),
    _m("pos_neg_balance", "step", "BAPO's balance Σ_{A≥0} r̃·A / Σ_{A<0} r̃·|A|, r̃ = the objective's clipped ratio "
       "(min(r, c_high) for A ≥ 0, max(r, c_low) for A < 0; unclipped without a clip); NULL without A < 0 tokens",
       "mask = 1"),
    _m("bapo_clip_low", "step", "lower ratio bound BAPO chose (the step's last micro-batch); NULL for other objectives",
       ""),
    _m("bapo_clip_high", "step", "upper ratio bound BAPO chose (the step's last micro-batch); NULL for others", ""),
    _m("resampled_groups", "step", "groups rolled out again by dynamic sampling for the rollout this step trains on: "
       "(rollouts − 1) × groups per rollout; NULL when dynamic sampling is off", "groups", "groups"),
    _m("filtered_groups", "step", "all-equal-reward groups dynamic sampling left out of that rollout's batch; NULL "
       "when it is off", "groups", "groups"),
    _m("eval_score", "step", "the run's evaluation score at a step it evaluated: the mean of that step's evaluation "
       "keys of the first family present — accuracy, then score, then reward (collapsewatch.ingest.keys.eval_score: "
       "verl's val-core/<data>/acc/mean@N, HF's eval_<metric>, eval/accuracy …); NULL between evaluations",
       "the evaluation set"),
    _m("eval_size", "step", "how many examples the step's evaluation graded (collapsewatch.ingest.keys.eval_size: "
       "eval/num_examples, eval/n_problems …, else HF's round(eval_samples_per_second × eval_runtime)); the "
       "evaluation detector's noise floor for a score in [0, 1]; NULL where the log does not say",
       "the evaluation set", "examples"),
    _m("sentinel_logp_correct_mean", "step", "mean over the known-correct sentinels of each one's mean log-prob per "
       "model token under the current policy (no grad; every sentinel_every steps, NULL between): the LLD paper's "
       "L, independent of what a rollout contains", "known-correct sentinels", "nats"),
    _m("sentinel_logp_incorrect_mean", "step", "the same over the known-incorrect sentinels", "known-incorrect "
       "sentinels", "nats"),
    _m("sentinel_logp_correct_token_mean", "step", "Σ logp / Σ model tokens over the known-correct sentinels",
       "known-correct sentinels", "nats"),
    _m("sentinel_logp_incorrect_token_mean", "step", "Σ logp / Σ model tokens over the known-incorrect sentinels",
       "known-incorrect sentinels", "nats"),
    _m("sentinel_time", "step", "wall time of scoring the sentinels at this step", "", "s"),
    _m("is_weight_mean", "step", "mean of the rollout correction's applied IS weight w (TIS: min(ρ, C), ρ = "
       "exp(logp_old − logp_rollout) per token or per sequence; objectives/correction.py); NULL without IS "
       "correction", "mask = 1, the rollout's"),
    _m("is_truncated_frac", "step", "share of tokens (token level) or sequences (sequence level) whose ρ > C", "mask = 1 "
       "tokens or sequences, the rollout's"),
    _m("rs_masked_frac", "step", "share of model tokens the rollout correction's rejection (MIS) masked out; NULL "
       "without rejection", "mask = 1, the rollout's"),
    _m("weight_sync_time", "step", "wall time of copying the trainer's weights into the rollout engine before the "
       "rollout that fed this step; NULL for an engine that samples from the training module itself (hf)", "", "s"),
    _m("step_time", "step", "wall time of the optimizer step", "", "s"),
    _m("rollout_time", "step", "wall time of the rollout that fed this step", "", "s"),
)

LOGGED_REPEAT = "max"
"""A scalar logged more than once in one step keeps its largest value (NaN above every number, NULL ignored):
the rule of DuckDB's ``max``, which the ``steps`` view applies offline; :func:`merge_logged` applies it
online (the recorder), so the detectors see the same row either way."""


def merge_logged(old: float | None, new: float | None) -> float | None:
    """The value of a step scalar after logging ``new`` over ``old`` (see :data:`LOGGED_REPEAT`)."""
    if new is None or old is None:
        return old if new is None else new
    if math.isnan(old) or math.isnan(new):
        return math.nan
    return max(old, new)


LOGGED_STANDINS: tuple[str, ...] = ("reward_mean", "reward_std", "correct_frac", "zero_std_group_frac",
                                    "response_length_mean", "truncated_frac", "entropy_mean", "tool_calls_mean")
"""Step metrics a scalar given to ``Monitor.log`` stands in for where the step's observed sequences leave them NULL
(batches without rewards, truncation flags or entropy; a step with no observed batch): the value logged under the
metric's name — a key the alias table maps onto it (``collapsewatch.ingest.keys``: ``reward``,
``critic/score/mean`` …) is logged a second time under it — fills the metric in the ``steps`` view and in the row
the online detectors read (:func:`with_logged`). An observed value always wins. Ratio-derived metrics are not
here: NULL on an on-policy step is a convention, not a missing input."""


def with_logged(observed: dict[str, Any], logged: dict[str, float | None]) -> dict[str, Any]:
    """A step's ``observed`` metrics with each :data:`LOGGED_STANDINS` metric NULL there taken from the step's
    ``logged`` scalars (by step column); the ``steps`` view's ``coalesce(observed, logged)`` (store/views.py)."""
    out = dict(observed)
    for name in LOGGED_STANDINS:
        if out.get(name) is None and logged.get(name) is not None:
            out[name] = logged[name]
    return out


ALL_STEP_COLUMNS: tuple[str, ...] = tuple(m.name for m in STEP_METRICS + LOGGED_SCALARS)

_KEY_SEP = ("/", "_")
"""A logged key's ``/`` reads as ``_`` in its step column (``clip_ratio/region_mean`` → ``clip_ratio_region_mean``)."""


def scalar_column(key: str) -> str:
    """The step column a logged scalar key fills (online, the recorder)."""
    return key.replace(*_KEY_SEP)


def scalar_column_sql(key_expr: str) -> str:
    """:func:`scalar_column` as a SQL expression over the key column ``key_expr`` (offline, the ``steps`` view)."""
    return f"replace({key_expr}, '{_KEY_SEP[0]}', '{_KEY_SEP[1]}')"


def by_name(level: Level) -> dict[str, Metric]:
    table = {"token": TOKEN_METRICS, "sequence": SEQUENCE_METRICS, "step": STEP_METRICS + LOGGED_SCALARS}
    return {m.name: m for m in table[level]}


def markdown_table() -> str:
    """The catalogue as a Markdown table (docs/metrics.md is generated from it)."""
    rows = ["| name | level | formula | population | unit |", "|---|---|---|---|---|"]
    for m in TOKEN_METRICS + SEQUENCE_METRICS + STEP_METRICS + LOGGED_SCALARS:
        rows.append(f"| `{m.name}` | {m.level} | {m.formula} | {m.population} | {m.unit} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m collapsewatch.catalogue > docs/metrics.md
    print("# Metric catalogue\n\nGenerated from `collapsewatch/catalogue.py` (`python -m collapsewatch.catalogue "
          "> docs/metrics.md`); a test keeps the two equal. NULL = the metric does not apply to that step.\n")
    print("## Conventions\n\n" + CONVENTIONS)
    print(markdown_table(), end="")
