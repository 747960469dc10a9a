"""The trainer's forward passes: log-probs (and entropy) of a batch's tokens under the policy, in fp32.

``forward_logps`` is the one place the trainer turns logits into log π; ``old_logps`` runs it without grad, in eval
mode, over a whole rollout (π_old, and π_ref for a KL term).
"""

from __future__ import annotations

from typing import Any

import torch

from ..rollout import RolloutBatch


def forward_logps(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, temperature: float,
                  want_entropy: bool = True, entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, L-1) log-prob of ids[:, 1:] under softmax(logits / τ) and its entropy, in fp32.

    ``entropy_grad``: keep the entropy's graph (an objective with an entropy bonus differentiates it); otherwise
    it is computed without grad, which spares a (B, L-1, V) activation.
    """
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature  # (B, L-1, V)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    entropy = None
    if want_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, L-1) nats
    return logp, entropy


def batch_rows(batch: RolloutBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, slice]:
    """input ids and attention mask of ``rows``, trimmed to their longest sequence, and the token columns
    (``slice(1, width)``) their log-probs cover."""
    attn = batch.attention_mask[rows]
    width = int(attn.sum(1).max())
    return batch.input_ids[rows, :width], attn[:, :width], slice(1, width)


@torch.no_grad()
def old_logps(model: torch.nn.Module, batch: RolloutBatch, temperature: float, chunk: int) -> torch.Tensor:
    """(B, L-1) log π_old of every token, recomputed by the training model before any update, in eval mode:
    π_old is a policy, not a dropout sample of it (the mode is restored afterwards)."""
    out = torch.zeros(batch.input_ids.shape[0], batch.input_ids.shape[1] - 1)
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, out.shape[0], chunk):
            rows = torch.arange(lo, min(lo + chunk, out.shape[0]))
            ids, attn, cols = batch_rows(batch, rows)
            logp, _ = forward_logps(model, ids, attn, temperature, want_entropy=False)
            out[lo : lo + len(rows), : cols.stop - 1] = logp.cpu()
    finally:
        model.train(was_training)
    return out


def entropy_needs_grad(params: Any) -> bool:
    """True when the objective has an entropy bonus (``entropy_coef > 0``), whose gradient flows through H."""
    return getattr(getattr(params, "base", params), "entropy_coef", 0.0) > 0.0
