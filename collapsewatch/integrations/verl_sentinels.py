"""verl, sentinels: a fixed (prompt, response, correct) set scored under the current actor every k steps through
verl's own log-prob call, so a verl run records the same ``sentinel_logp_*`` scalars and ``sentinels`` rows as the
built-in trainer and TRL (:mod:`collapsewatch.sentinels`).

    COLLAPSEWATCH_SENTINELS=/shared/sentinels.jsonl      # one {"prompt": …, "response": …, "correct": true} a line
    COLLAPSEWATCH_SENTINEL_EVERY=10                      # steps 1, 11, 21 … (verl counts steps from 1)

Where it runs. The loss wrapper never sees the model, and under FSDP a forward needs every rank of the actor to take
part. verl already has a call that does exactly that: ``actor_rollout_wg.compute_log_prob`` — the one
``RayPPOTrainer`` makes for π_old and the reference policy — which dispatches a batch over the actor's data-parallel
ranks, runs the engine's no-grad forward on each (FSDP gathers, sequence parallelism, remove-padding, dynamic batch
size: verl's own code) and gathers the log-probs. The driver hook (:mod:`.verl_driver`) calls it on the sentinel
set before the step's update (the policy the step starts from), then puts the scores into the step's batch as meta
info; rank 0's worker tap (:mod:`.verl`) records them with that step. One extra forward of N sentinels every k steps,
spread over the data-parallel ranks.

For sentinel i, with response tokens y_1..y_n where the response mask is 1, under verl's softmax(logits / τ) with τ
the rollout temperature::

    logp_sum_i = Σ_t log π_θ(y_t | prompt, y_<t)          n_i = Σ_t response_mask_t

Layout (verl's): prompts left-padded, responses right-padded, ``input_ids`` = prompt ‖ response, position ids from
the attention mask; the set is padded with copies of its last sentinel to a multiple of the worker group's size
(verl splits the batch evenly over data-parallel ranks) and the copies' scores are dropped; each rank scores its
share in one micro-batch (N / world size sentinels: keep the set small for a large model).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..sentinels import Sentinel, SentinelScores, text_sentinels

ENV_SENTINELS, ENV_SENTINEL_EVERY = "COLLAPSEWATCH_SENTINELS", "COLLAPSEWATCH_SENTINEL_EVERY"


def read_pairs(path: str | os.PathLike) -> list[tuple[str, str, bool]]:
    """(prompt, response, correct) from a JSON-lines file; a clear error names the file and line."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{ENV_SENTINELS}: file {str(p)!r} does not exist")
    pairs = []
    for line_no, line in enumerate(p.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt, response, correct = obj["prompt"], obj["response"], obj["correct"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{ENV_SENTINELS}: {str(p)!r} line {line_no}: expected a JSON object with prompt, "
                             f"response and correct ({e})") from e
        if not isinstance(prompt, str) or not isinstance(response, str) or not isinstance(correct, bool):
            raise ValueError(f"{ENV_SENTINELS}: {str(p)!r} line {line_no}: prompt and response must be strings, "
                             "correct true or false")
        pairs.append((prompt, response, correct))
    if not pairs:
        raise ValueError(f"{ENV_SENTINELS}: {str(p)!r} holds no sentinel")
    return pairs


def every_from_env() -> int:
    raw = os.environ.get(ENV_SENTINEL_EVERY, "10")
    try:
        every = int(raw)
    except ValueError:
        every = 0
    if every < 1:
        raise ValueError(f"{ENV_SENTINEL_EVERY} must be an integer ≥ 1, got {raw!r}")
    return every


def due(step: int, every: int) -> bool:
    """verl's steps count from 1: the first step and every ``every``-th after it (1, 1 + k, 1 + 2k …)."""
    return (step - 1) % every == 0


def sentinel_batch(sentinels: Sequence[Sentinel], pad_id: int, multiple: int = 1) -> dict[str, torch.Tensor]:
    """verl's padded tensors for ``sentinels`` (module docstring), padded to a multiple of ``multiple`` rows."""
    rows = list(sentinels) + [sentinels[-1]] * (-len(sentinels) % max(multiple, 1))
    split = []
    for s in rows:
        first = s.model_mask.index(1)  # the prompt is everything before the first scored token
        if first == 0:
            raise ValueError(f"sentinel {s.name!r}: no prompt token before the response")
        split.append((s.ids[:first], s.ids[first:], s.model_mask[first:]))
    P, R = max(len(p) for p, _, _ in split), max(len(r) for _, r, _ in split)
    B = len(rows)
    prompts = torch.full((B, P), pad_id, dtype=torch.long)
    responses = torch.full((B, R), pad_id, dtype=torch.long)
    attn = torch.zeros(B, P + R, dtype=torch.long)
    response_mask = torch.zeros(B, R, dtype=torch.long)
    for i, (p, r, m) in enumerate(split):
        prompts[i, P - len(p):] = torch.tensor(p)  # left-padded
        responses[i, : len(r)] = torch.tensor(r)  # right-padded
        attn[i, P - len(p): P + len(r)] = 1
        response_mask[i, : len(m)] = torch.tensor(m)
    position_ids = (attn.cumsum(1) - 1).clamp(min=0)  # (B, P + R)
    return {"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attn, "position_ids": position_ids, "response_mask": response_mask}


def score(worker_group: Any, sentinels: Sequence[Sentinel], temperature: float, pad_id: int) -> SentinelScores:
    """The sentinels' log-likelihoods under the actor, through ``worker_group.compute_log_prob`` (verl's π_old
    path: every rank takes part in the forward, see the module docstring)."""
    from verl import DataProto
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    world = int(getattr(worker_group, "world_size", 1) or 1)
    tensors = sentinel_batch(sentinels, pad_id, world)
    batch = DataProto.from_dict(tensors=tensors, meta_info={"temperature": float(temperature)})
    td = left_right_2_no_padding(batch.to_tensordict())
    # one micro-batch per rank (fixed size, not verl's token-packed dynamic batches): the rank's rows, whatever
    # log_prob_micro_batch_size_per_gpu the run set for its rollouts (its rows might not divide the sentinels')
    tu.assign_non_tensor(td, calculate_entropy=False, compute_loss=False, use_dynamic_bsz=False,
                         micro_batch_size_per_gpu=len(tensors["input_ids"]) // world)
    out = worker_group.compute_log_prob(td)
    logp = no_padding_2_padding(tu.get(out, "log_probs"), td).float()  # (B, R) 0 on padding
    mask = tensors["response_mask"].to(logp.device).bool()
    sums = torch.where(mask, logp, torch.zeros_like(logp)).sum(1)[: len(sentinels)].tolist()
    counts = tensors["response_mask"].sum(1)[: len(sentinels)].tolist()
    return SentinelScores(tuple(s.name for s in sentinels), tuple(s.correct for s in sentinels), tuple(sums),
                          tuple(int(n) for n in counts))


def encode(scores: SentinelScores, seconds: float) -> str:
    """The scores as the JSON text the batch carries to the workers (meta info travels as non-tensor data)."""
    return json.dumps({"names": scores.names, "correct": scores.correct, "logp_sum": scores.logp_sum,
                       "n_tokens": scores.n_tokens, "seconds": seconds})


def decode(text: str) -> tuple[SentinelScores, float]:
    d = json.loads(text)
    return SentinelScores(tuple(d["names"]), tuple(d["correct"]), tuple(d["logp_sum"]), tuple(d["n_tokens"])), \
        float(d["seconds"])


class DriverSentinels:
    """The driver's sentinel set, tokenized once with the trainer's tokenizer on first use (read from
    $COLLAPSEWATCH_SENTINELS); :meth:`maybe_score` returns the encoded scores of a due step, else None."""

    def __init__(self, path: str, every: int) -> None:
        self.path, self.every = path, every
        self.sentinels: list[Sentinel] | None = None

    @classmethod
    def from_env(cls) -> DriverSentinels | None:
        path = os.environ.get(ENV_SENTINELS)
        return cls(path, every_from_env()) if path else None

    def maybe_score(self, trainer: Any, step: int) -> str | None:
        import time

        if not due(step, self.every):
            return None
        tokenizer = getattr(trainer, "tokenizer", None)
        if self.sentinels is None:
            self.sentinels = text_sentinels(tokenizer, read_pairs(self.path))
        pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
        temperature = float(trainer.config.actor_rollout_ref.rollout.temperature)
        t0 = time.perf_counter()
        scores = score(trainer.actor_rollout_wg, self.sentinels, temperature, pad_id)
        return encode(scores, time.perf_counter() - t0)
