"""RolloutBatch: what a rollout engine hands the trainer, and the per-sequence builder that fills it.

Layout: one row per sequence, ``prompt + response`` right-padded to L. The response is everything after
the prompt: model turns (loss mask 1) interleaved with environment observations (loss mask 0).
Position t of every (B, L) token tensor refers to token ``input_ids[b, t]``; in particular
``logp_rollout[b, t] = log softmax(z_{t-1} / τ)[input_ids[b, t]]`` where ``z_{t-1}`` are the model's logits
after reading ``input_ids[b, :t]`` (so ``logp_rollout[:, 0] = 0``, it is a prompt token).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

from collapsewatch.env.search import StepResult


@dataclass
class RolloutBatch:
    """B = n_prompts * G sequences; rows ``g*G … g*G+G-1`` answer prompt ``g`` (``group_ids``)."""

    prompt_ids: list[list[int]]  # per sequence, the chat-templated prompt
    input_ids: Tensor  # (B, L) long, prompt + response, right-padded with the pad id
    attention_mask: Tensor  # (B, L) long, 1 on prompt and response tokens, 0 on right padding
    response_start: Tensor  # (B,) long, index of the first response token (= len(prompt_ids[b]))
    loss_mask: Tensor  # (B, L) float, 1 on model-generated response tokens only
    obs_mask: Tensor  # (B, L) float, 1 on environment-observation tokens only
    turn_ids: Tensor  # (B, L) long, k on model turn k and on the observation that answers it; -1 elsewhere
    logp_rollout: Tensor  # (B, L) float32, see module docstring; 0 where loss_mask == 0
    rewards: Tensor  # (B,) float32
    group_ids: Tensor  # (B,) long, index of the prompt in the rollout call
    truncated: Tensor  # (B,) bool, the response hit max_response_tokens before the episode ended
    n_turns: Tensor  # (B,) long, model turns taken
    n_searches: Tensor  # (B,) long, valid search actions
    n_invalid: Tensor  # (B,) long, turns without a valid action
    texts: list[str]  # decoded responses (model text and observations), for display
    task_ids: list[str] = field(default_factory=list)  # task id of each row
    temperature: float = 1.0  # τ used for logp_rollout (1.0 for greedy decoding)
    turn_rewards: list[list[float]] = field(default_factory=list)  # per row, the env's reward for each model turn
    anchors: list[list[str]] = field(default_factory=list)  # per row and turn, the text the env showed before it
    #                                                         (the question, then the last observation): GiGPO

    @property
    def batch_size(self) -> int:
        return self.input_ids.shape[0]

    def response_lengths(self) -> Tensor:
        """(B,) tokens after the prompt (model + observation)."""
        return self.attention_mask.sum(1) - self.response_start

    def to(self, device: torch.device | str) -> RolloutBatch:
        """A copy with every tensor moved to ``device``."""
        moved = {k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in self.__dict__.items()}
        return RolloutBatch(**moved)


@dataclass
class SequenceBuilder:
    """Mutable per-sequence state while an episode is rolled out (engine-internal)."""

    prompt_ids: list[int]
    group_id: int
    task_id: str
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    n_turns: int = 0
    n_searches: int = 0
    n_invalid: int = 0
    reward: float = 0.0
    done: bool = False
    truncated: bool = False
    anchor: str = ""  # what the env showed last: the question, then each observation (GiGPO's anchor state)
    turn_rewards: list[float] = field(default_factory=list)  # env reward per model turn (0 for a cut-off turn)
    anchors: list[str] = field(default_factory=list)  # the anchor each model turn started from

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def add_model_turn(self, token_ids: list[int], logps: list[float]) -> None:
        self.response_ids += token_ids
        self.loss_mask += [1] * len(token_ids)
        self.turn_ids += [self.n_turns] * len(token_ids)
        self.logps += logps
        self.n_turns += 1
        self.anchors.append(self.anchor)
        self.turn_rewards.append(0.0)

    def record(self, result: StepResult) -> None:
        """Update the episode counters from the environment's answer to the last model turn."""
        self.n_searches += int(result.valid_action and result.is_search)
        self.n_invalid += int(not result.valid_action)
        self.reward += result.reward
        self.done = result.done
        self.turn_rewards[-1] = result.reward
        self.anchor = result.observation

    def add_observation(self, token_ids: list[int]) -> None:
        self.response_ids += token_ids
        self.loss_mask += [0] * len(token_ids)
        self.turn_ids += [self.n_turns - 1] * len(token_ids)  # belongs to the turn that asked for it
        self.logps += [0.0] * len(token_ids)


def collate(seqs: list[SequenceBuilder], texts: list[str], pad_id: int, temperature: float) -> RolloutBatch:
    """Right-pad finished sequences into a ``RolloutBatch``."""
    B = len(seqs)
    L = max(len(s.prompt_ids) + len(s.response_ids) for s in seqs)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(B, L, dtype=torch.long)
    loss_mask = torch.zeros(B, L)
    turn_ids = torch.full((B, L), -1, dtype=torch.long)
    logp = torch.zeros(B, L)
    for b, s in enumerate(seqs):
        p, n = len(s.prompt_ids), len(s.response_ids)
        input_ids[b, : p + n] = torch.tensor(s.prompt_ids + s.response_ids, dtype=torch.long)
        attention_mask[b, : p + n] = 1
        loss_mask[b, p : p + n] = torch.tensor(s.loss_mask, dtype=torch.float32)
        turn_ids[b, p : p + n] = torch.tensor(s.turn_ids, dtype=torch.long)
        logp[b, p : p + n] = torch.tensor(s.logps, dtype=torch.float32)
    response_start = torch.tensor([len(s.prompt_ids) for s in seqs], dtype=torch.long)
    in_response = (torch.arange(L)[None, :] >= response_start[:, None]) & attention_mask.bool()
    return RolloutBatch(
        prompt_ids=[list(s.prompt_ids) for s in seqs],
        input_ids=input_ids,
        attention_mask=attention_mask,
        response_start=response_start,
        loss_mask=loss_mask,
        obs_mask=(in_response & (loss_mask == 0)).float(),
        turn_ids=turn_ids,
        logp_rollout=logp * loss_mask,
        rewards=torch.tensor([s.reward for s in seqs], dtype=torch.float32),
        group_ids=torch.tensor([s.group_id for s in seqs], dtype=torch.long),
        truncated=torch.tensor([s.truncated for s in seqs], dtype=torch.bool),
        n_turns=torch.tensor([s.n_turns for s in seqs], dtype=torch.long),
        n_searches=torch.tensor([s.n_searches for s in seqs], dtype=torch.long),
        n_invalid=torch.tensor([s.n_invalid for s in seqs], dtype=torch.long),
        texts=texts,
        task_ids=[s.task_id for s in seqs],
        temperature=temperature,
        turn_rewards=[list(s.turn_rewards) for s in seqs],
        anchors=[list(s.anchors) for s in seqs],
    )


_PAD = {"input_ids": None, "turn_ids": -1}
"""Fill value of a (B, L) field when rows are right-padded to a longer L (None = the pad id); others get 0."""


def select_rows(batch: RolloutBatch, rows: list[int]) -> RolloutBatch:
    """The rows ``rows`` of ``batch`` (in that order), every per-row field cut alike; L is kept."""
    idx = torch.tensor(rows, dtype=torch.long)
    out = {}
    for f in fields(batch):
        v = getattr(batch, f.name)
        out[f.name] = v[idx] if isinstance(v, Tensor) else [v[i] for i in rows] if isinstance(v, list) else v
    return RolloutBatch(**out)


def concat_batches(batches: list[RolloutBatch], pad_id: int) -> RolloutBatch:
    """Rows of ``batches`` stacked in order, right-padded to the longest L (pad id, turn id −1, masks and
    log-probs 0); ``group_ids`` renumbered so that groups of different batches stay apart (each batch's ids are
    shifted past the previous batches'). All batches must share the sampling temperature."""
    if not batches:
        raise ValueError("concat_batches needs at least one batch")
    if len({b.temperature for b in batches}) != 1:
        raise ValueError(f"concat_batches: batches sampled at different temperatures {[b.temperature for b in batches]}")
    L = max(b.input_ids.shape[1] for b in batches)
    shift, shifted = 0, []
    for b in batches:
        shifted.append(b.group_ids + shift)
        shift += int(b.group_ids.max()) + 1 if b.group_ids.numel() else 0
    out = {}
    for f in fields(RolloutBatch):
        vals = [getattr(b, f.name) for b in batches]
        if f.name == "group_ids":
            out[f.name] = torch.cat(shifted)
        elif isinstance(vals[0], Tensor) and vals[0].dim() == 2:
            fill = _PAD.get(f.name, 0)
            fill = pad_id if fill is None else fill
            out[f.name] = torch.cat([torch.nn.functional.pad(v, (0, L - v.shape[1]), value=fill) for v in vals])
        elif isinstance(vals[0], Tensor):
            out[f.name] = torch.cat(vals)
        elif isinstance(vals[0], list):
            out[f.name] = [x for v in vals for x in v]
        else:
            out[f.name] = vals[0]
    return RolloutBatch(**out)
