"""Hooks into HF ``generate``: a logits processor that samples *and* records log-probs, and a per-sequence
stopping criterion for stop strings, EOS and token budgets.

Why a custom processor instead of ``output_logits=True``: storing raw logits for every step costs
steps × B × V floats (1.3 GB for SmolLM2's 49k vocabulary at 64 × 100); this keeps one (B, V) step alive.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from transformers import LogitsProcessor, PreTrainedTokenizerBase, StoppingCriteria


def filter_top_k_top_p(logp: Tensor, top_k: int, top_p: float) -> Tensor:
    """Set log-probs outside the top-k / nucleus(top_p) set to -inf; always keeps the best token."""
    if top_k > 0 and top_k < logp.shape[-1]:
        kth = torch.topk(logp, top_k, dim=-1).values[..., -1:]  # (B, 1)
        logp = logp.masked_fill(logp < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logp, order = torch.sort(logp, dim=-1, descending=True)  # (B, V)
        probs = sorted_logp.exp()
        mass_before = probs.cumsum(-1) - probs  # probability of strictly better tokens
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logp = logp.masked_fill(drop, float("-inf"))
    return logp


class SampleRecorder(LogitsProcessor):
    """Turns raw logits z into log softmax(z / τ), remembers it, and returns the top-k/top-p filtered copy.

    HF then samples from softmax(returned) (or takes its argmax when greedy). Call k+1 of the processor
    sees the token sampled at call k as ``input_ids[:, -1]``, so it gathers that token's log-prob from the
    remembered distribution; ``finish`` gathers the last one. Place it alone in the list and pass
    temperature 1 / top_k 0 / top_p 1 to ``generate`` so HF adds no warpers of its own.
    """

    def __init__(self, temperature: float, top_k: int = 0, top_p: float = 1.0) -> None:
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self._prev: Tensor | None = None
        self._steps: list[Tensor] = []

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self._prev is not None:
            self._steps.append(self._prev.gather(1, input_ids[:, -1:]).squeeze(1))  # (B,)
        logp = torch.log_softmax(scores.float() / self.temperature, dim=-1)  # (B, V)
        self._prev = logp
        return filter_top_k_top_p(logp, self.top_k, self.top_p)

    def finish(self, last_tokens: Tensor) -> Tensor:
        """(B, n) log-probs of the n generated tokens; ``last_tokens`` (B,) is the final sampled column."""
        if self._prev is not None:
            self._steps.append(self._prev.gather(1, last_tokens[:, None]).squeeze(1))
            self._prev = None
        return torch.stack(self._steps, dim=1) if self._steps else torch.zeros(last_tokens.shape[0], 0)


class TurnStopper(StoppingCriteria):
    """Per-sequence end of a model turn: a stop string, an EOS id, or the row's token budget.

    Records, for each row, how many new tokens belong to the turn (``n_new``, -1 while running) and
    whether it ended on a stop string / EOS (``hit_stop``). Single-token stop strings are matched by id,
    vectorised; multi-token ones (e.g. a 49k BPE spelling ``</search>`` as ``</``, ``search``, ``>``) decode
    the turn's tail only for rows whose last token contains the stop string's final character.
    """

    def __init__(
        self,
        context_len: int,
        budgets: Tensor,
        tokenizer: PreTrainedTokenizerBase,
        stop_strings: Sequence[str],
        eos_ids: Sequence[int],
        single_stop_ids: Sequence[int],
        candidate_ids: Tensor,
    ) -> None:
        self.context_len = context_len
        self.budgets = budgets  # (B,) long, max new tokens per row
        self.tokenizer = tokenizer
        self.stop_strings = tuple(stop_strings)
        self.end_ids = torch.tensor(sorted(set(eos_ids) | set(single_stop_ids)), dtype=torch.long)
        self.candidate_ids = candidate_ids  # (V,) bool, or empty when every stop string is one token
        self.tail = max((len(s) for s in self.stop_strings), default=1)
        self.n_new = torch.full_like(budgets, -1)
        self.hit_stop = torch.zeros_like(budgets, dtype=torch.bool)

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs) -> Tensor:
        n = input_ids.shape[1] - self.context_len
        last = input_ids[:, -1]  # (B,)
        running = self.n_new < 0
        hit = torch.isin(last, self.end_ids)
        if self.candidate_ids.numel():
            for b in torch.nonzero(running & ~hit & self.candidate_ids[last]).flatten().tolist():
                tail = input_ids[b, -min(n, self.tail) :].tolist()
                text = self.tokenizer.decode(tail, skip_special_tokens=False)
                hit[b] = any(s in text for s in self.stop_strings)
        newly = running & (hit | (n >= self.budgets))
        self.n_new[newly] = n
        self.hit_stop |= newly & hit
        return self.n_new >= 0


def stop_token_info(
    tokenizer: PreTrainedTokenizerBase, stop_strings: Sequence[str], vocab_size: int
) -> tuple[list[int], Tensor]:
    """(ids of stop strings that are one token, candidate mask over ``vocab_size`` ids for the rest).

    The mask is empty when every stop string is a single token (the built-in tokenizer's case).
    """
    single, multi = [], []
    for s in stop_strings:
        ids = tokenizer.encode(s, add_special_tokens=False)
        (single if len(ids) == 1 else multi).append(ids[0] if len(ids) == 1 else s)
    if not multi:
        return single, torch.zeros(0, dtype=torch.bool)
    finals = {s[-1] for s in multi}
    pieces = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False)
    mask = torch.zeros(max(vocab_size, len(pieces)), dtype=torch.bool)
    mask[: len(pieces)] = torch.tensor([any(c in p for c in finals) for p in pieces], dtype=torch.bool)
    return single, mask
