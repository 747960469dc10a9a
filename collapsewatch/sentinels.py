"""Sentinel likelihoods: fixed (prompt, known-correct response) and (prompt, known-incorrect response) pairs scored
under the current policy every k optimizer steps — the LLD paper's likelihood of correct responses, measured
independently of how many correct responses a rollout happens to contain.

For sentinel i with response tokens y_1..y_n (model tokens only: observation tokens of a multi-turn trace are
context, never scored), under softmax(logits / τ) of the current policy, without grad and in eval mode::

    logp_sum_i  = Σ_t log π_θ(y_t | prompt, y_<t)          logp_mean_i = logp_sum_i / n_i

Step scalars (catalogue ``LOGGED_SCALARS``), over the correct (C) and incorrect (I) sentinels::

    sentinel_logp_correct_mean       = mean_{i ∈ C} logp_mean_i          (each sentinel weighs the same)
    sentinel_logp_correct_token_mean = Σ_{i ∈ C} logp_sum_i / Σ_{i ∈ C} n_i
    (and the same for I)

Per sentinel, one row of the store's ``sentinels`` table (migration 0003) per scored step. The set is frozen at
start: the same token ids at every step, so a change is the policy's, never the set's. Cost: one no-grad forward
of the set every ``every`` steps (bench/bench_sentinels.py measures it against a training step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

SENTINEL_COLUMNS = ("sentinel", "correct", "n_tokens", "logp_sum", "logp_mean")
"""Columns of a per-sentinel row (besides run, rank, step): migration 0003's ``sentinels`` table."""


@dataclass(frozen=True)
class Sentinel:
    """One fixed (prompt, response) pair: token ids and which of them the policy wrote (1) — the scored ones."""

    name: str
    ids: tuple[int, ...]
    """Prompt and response token ids, in order."""
    model_mask: tuple[int, ...]
    """1 on response tokens the policy wrote (scored), 0 on prompt and observation tokens; same length as ids."""
    correct: bool

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.model_mask):
            raise ValueError(f"sentinel {self.name!r}: ids and model_mask differ in length")
        if not any(self.model_mask[1:]):
            raise ValueError(f"sentinel {self.name!r}: no scored token (model_mask is 0 after the first token)")


@dataclass(frozen=True)
class SentinelScores:
    """One scoring of a sentinel set: per sentinel (N,) sums and counts, in the set's order."""

    names: tuple[str, ...]
    correct: tuple[bool, ...]
    logp_sum: tuple[float, ...]
    n_tokens: tuple[int, ...]

    def step_scalars(self, seconds: float | None = None) -> dict[str, float | None]:
        """The step scalars of the module docstring (None where a kind has no sentinel)."""
        out: dict[str, float | None] = {}
        for kind, want in (("correct", True), ("incorrect", False)):
            sums = [s for s, c in zip(self.logp_sum, self.correct, strict=True) if c is want]
            ns = [n for n, c in zip(self.n_tokens, self.correct, strict=True) if c is want]
            out[f"sentinel_logp_{kind}_mean"] = sum(s / n for s, n in zip(sums, ns, strict=True)) / len(sums) \
                if sums else None
            out[f"sentinel_logp_{kind}_token_mean"] = sum(sums) / sum(ns) if sums else None
        if seconds is not None:
            out["sentinel_time"] = seconds
        return out

    def rows(self) -> dict[str, list]:
        """Column lists of the per-sentinel rows (``SENTINEL_COLUMNS``)."""
        return {"sentinel": list(self.names), "correct": list(self.correct), "n_tokens": list(self.n_tokens),
                "logp_sum": list(self.logp_sum),
                "logp_mean": [s / n for s, n in zip(self.logp_sum, self.n_tokens, strict=True)]}


def _padded(sentinels: Sequence[Sentinel], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention mask, scored-target mask): (N, L), (N, L), (N, L−1) right-padded; the target mask is the
    model mask shifted by one (logits at t−1 predict token t)."""
    width = max(len(s.ids) for s in sentinels)
    ids = torch.full((len(sentinels), width), pad_id, dtype=torch.long)
    attn = torch.zeros(len(sentinels), width, dtype=torch.long)
    scored = torch.zeros(len(sentinels), width, dtype=torch.bool)
    for i, s in enumerate(sentinels):
        ids[i, : len(s.ids)] = torch.tensor(s.ids)
        attn[i, : len(s.ids)] = 1
        scored[i, : len(s.ids)] = torch.tensor(s.model_mask, dtype=torch.bool)
    return ids, attn, scored[:, 1:]


@torch.no_grad()
def score(model: torch.nn.Module, sentinels: Sequence[Sentinel], temperature: float = 1.0, pad_id: int = 0,
          chunk: int = 16) -> SentinelScores:
    """Score ``sentinels`` under ``model`` (no grad, eval mode restored afterwards), ``chunk`` sequences per
    forward, log-probs in fp32 under softmax(logits / temperature) (``rollout.logprobs.token_logprobs``, the
    reference the trainer's forward is held to)."""
    from .rollout.logprobs import token_logprobs  # one home for the token log-prob; imported late (rollout is heavy)

    if not sentinels:
        raise ValueError("score: no sentinels")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    sums: list[float] = []
    try:
        for lo in range(0, len(sentinels), chunk):
            ids, attn, scored = _padded(sentinels[lo : lo + chunk], pad_id)
            width = int(attn.sum(1).max())
            ids_w = ids[:, :width].to(device)
            logits = model(input_ids=ids_w, attention_mask=attn[:, :width].to(device)).logits  # (n, width, V)
            logp = token_logprobs(logits, ids_w, temperature)[:, 1:]  # (n, width − 1): logits at t − 1 score token t
            m = scored[:, : width - 1].to(device)
            sums += torch.where(m, logp, torch.zeros_like(logp)).sum(1).tolist()  # masked: padding may be −inf
    finally:
        model.train(was_training)
    return SentinelScores(tuple(s.name for s in sentinels), tuple(s.correct for s in sentinels), tuple(sums),
                          tuple(sum(s.model_mask[1:]) for s in sentinels))


def due(step: int, every: int) -> bool:
    """Whether sentinels are scored at optimizer step ``step`` (0, every, 2·every …; never when every ≤ 0)."""
    return every > 0 and step % every == 0


def text_sentinels(tokenizer, pairs: Sequence[tuple[str, str, bool]]) -> list[Sentinel]:
    """Sentinels from ``(prompt, response, correct)`` texts (TRL / verl users): the prompt encoded as the tokenizer
    encodes it (pass it already chat-templated, as the trainer feeds it), the response's tokens appended without
    special tokens and scored; named ``c:<i>`` / ``i:<i>`` by position. A clear error names a bad pair."""
    out = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, Sentinel):
            out.append(pair)
            continue
        try:
            prompt, response, correct = pair
        except (TypeError, ValueError) as e:
            raise ValueError(f"sentinels[{i}]: expected (prompt, response, correct) or a Sentinel, got {pair!r}") from e
        p = list(tokenizer(prompt)["input_ids"])
        r = list(tokenizer(response, add_special_tokens=False)["input_ids"])
        if not p or not r:
            raise ValueError(f"sentinels[{i}]: prompt and response must both encode to ≥ 1 token")
        out.append(Sentinel(f"{'c' if correct else 'i'}:{i}", tuple(p + r), tuple([0] * len(p) + [1] * len(r)),
                            bool(correct)))
    return out
