"""Recompute per-token log-probs of a ``RolloutBatch`` layout with a full forward pass.

This is the reference the trainer's own forward must agree with: ``out[b, t]`` is the log-prob of
``input_ids[b, t]`` under softmax(logits_{t-1} / τ), i.e. logits at position t-1 score token t, and
``out[:, 0] = 0``. Right padding needs no position-id fix: real tokens sit at positions 0…n-1 exactly as
during left-padded generation (HF derives positions from the attention mask there).
"""

from __future__ import annotations

import torch
from torch import Tensor


def token_logprobs(logits: Tensor, input_ids: Tensor, temperature: float = 1.0) -> Tensor:
    """(B, L) log softmax(logits[:, t-1] / τ)[input_ids[:, t]], 0 at t = 0; ``logits`` is (B, L, V)."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # (B, L-1, V)
    picked = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    return torch.nn.functional.pad(picked, (1, 0))


def recompute_logprobs(
    model: torch.nn.Module, input_ids: Tensor, attention_mask: Tensor, temperature: float = 1.0
) -> Tensor:
    """(B, L) token log-probs of ``input_ids`` under ``model`` (no grad), aligned like ``logp_rollout``."""
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, L, V)
    return token_logprobs(logits, input_ids, temperature)
