"""What a logged key means in the catalogue: the lookup of a step's logged keys in the key table (:data:`KEY_MAP`,
:class:`Meaning`: :mod:`.key_table`, the one home of that mapping, re-exported here), the user's own aliases, and the
evaluation score and size a step's evaluation keys give.

An ingested run has no per-token source, so its logged keys are the only source of reward, entropy and length:
a key whose meaning is a catalogue metric fills that catalogue column (``steps.entropy_mean`` …), and the original
key is always kept too (``scalars``). When two keys of one step map onto the same metric (verl's ``actor/entropy``
and ``actor/entropy_loss``), the one listed first in the table wins. An entry with witness keys
(:attr:`Meaning.only_with`: SkyRL's ``policy/policy_entropy``, masked in current SkyRL and not in older skyrl-train)
holds only in a step that also logs one of them; elsewhere the key is kept as a scalar only.

A key that is itself a catalogue step column (``entropy_mean``, ``grad_norm`` …) maps onto that column. HF's
TensorBoard / trackio / W&B callbacks write ``train/<key>``: a key not listed is looked up again without ``train/``.
A user's own aliases (``ingest --map KEY=COLUMN``, checked in :mod:`.maps`) are applied here too, before the table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping

from ..catalogue import ALL_STEP_COLUMNS
from .key_table import KEY_MAP, Meaning, markdown_table  # re-exported: the table's users import them from here

TRL_ALIASES: dict[str, str] = {key: KEY_MAP[key].metric for key in ("learning_rate", "policy_loss")}
"""TRL / HF log keys the TRL adapter (:mod:`collapsewatch.integrations.trl`) stores a second time under their
catalogue name, as :data:`KEY_MAP` maps them (same definition). ``grad_norm``, ``loss`` and ``step_time`` already
carry catalogue names; ``kl`` becomes ``loss_kl`` = β · kl and, when TRL weights it by the ratio
(``use_bias_correction_kl``), ``kl_ref_ratio_weighted_mean`` (docs/trl.md, "Step values next to TRL's")."""

HF_PREFIX = "train/"
"""HF's TensorBoard / trackio / W&B callbacks (and OpenRLHF's loggers) write ``train/<key>``."""


def meaning(key: str) -> Meaning | None:
    """The catalogue meaning of a logged key: listed, a catalogue column itself, or listed without ``train/`` — for an
    entry with witness keys, the meaning it has where it holds (:func:`holds`)."""
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


def holds(m: Meaning | None, keys: Iterable[str]) -> bool:
    """Whether the meaning ``m`` holds in a step that logs ``keys``: always, or, for an entry with witness keys
    (:attr:`Meaning.only_with`), when one of them is among ``keys`` (with or without ``train/``)."""
    return m is not None and (not m.only_with or any(k.removeprefix(HF_PREFIX) in m.only_with for k in keys))


def _chosen(values: dict[str, float | None]) -> dict[str, tuple[int, str, float | None]]:
    """Each catalogue metric the step's keys fill → (rank, the key that fills it, its value): among keys filling one
    metric the one listed first in :data:`KEY_MAP` wins (a catalogue-named key before any listed one); a key whose
    entry's witness keys the step does not log fills nothing (:func:`holds`)."""
    best: dict[str, tuple[int, str, float | None]] = {}
    for key, value in values.items():
        m = meaning(key)
        if m is None or not holds(m, values):
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
    empty) nor beside the witness keys among ``keys`` (:func:`holds`), and that no ``maps`` entry names: kept in
    ``scalars`` under their names, read by no detector — what a user maps (``ingest --map``) to be judged."""
    keys = set(keys)
    return sorted(k for k in keys if k not in (maps or {}) and not catalogue_values({k: 1.0})
                  and not holds(meaning(k), keys))


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


if __name__ == "__main__":  # python -m collapsewatch.ingest.keys: the table docs/ingest.md prints
    print(markdown_table(), end="")
