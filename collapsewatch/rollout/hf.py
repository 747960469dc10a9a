"""HF-``generate`` rollout engine: batched multi-turn sampling with a KV cache, on CPU or GPU.

Each round, every unfinished sequence gets one model turn: the active contexts (prompt + response so far)
are left-padded into one batch and ``model.generate`` runs until each row hits a stop string, EOS or its
token budget (rows that stop early are padded by HF and ignored here). Each row's turn text goes to its
environment; the observation is tokenised and appended with loss mask 0, and the next round starts.
The prefix is re-encoded each round (no cross-turn cache); with ≤ 4 turns of short text that costs less
than keeping ragged caches alive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import GenerationConfig, LogitsProcessorList, PreTrainedModel, StoppingCriteriaList
from transformers import PreTrainedTokenizerBase as Tokenizer

from collapsewatch.env.kb import Task
from collapsewatch.env.search import Environment, task_messages
from collapsewatch.rollout.batch import RolloutBatch, SequenceBuilder, collate
from collapsewatch.rollout.engine import PromptFn, RolloutConfig
from collapsewatch.rollout.sampling import SampleRecorder, TurnStopper, stop_token_info


def encode_prompt(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Chat-template ``messages`` with the assistant generation prompt; no extra BOS/EOS."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both (B, max len), padded on the left."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[b, width - len(r) :] = 1
    return ids, mask


class HFRolloutEngine:
    """``RolloutEngine`` over a transformers causal LM that it shares with the trainer (no weight copies)."""

    def __init__(self, model: PreTrainedModel, tokenizer: Tokenizer, config: RolloutConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or RolloutConfig()
        if tokenizer.pad_token_id is None:
            raise ValueError("HFRolloutEngine needs a tokenizer with a pad token")
        self.pad_id = int(tokenizer.pad_token_id)
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted({*eos, *([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])})
        vocab = model.get_output_embeddings().weight.shape[0]
        self.single_stop_ids, self.candidate_ids = stop_token_info(tokenizer, self.config.stop_strings, vocab)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Sample from ``model`` from now on. The engine holds the module itself (no copy), so after an
        optimizer step on the same module there is nothing to do; a vLLM engine would copy weights here."""
        self.model = model

    def rollout(
        self,
        tasks: Sequence[Task],
        make_env: Callable[[Task], Environment],
        group_size: int,
        prompt_fn: PromptFn = task_messages,
    ) -> RolloutBatch:
        """``group_size`` episodes per task; rows are grouped by task in order (``group_ids``)."""
        seqs, envs = start_episodes(self.tokenizer, tasks, make_env, group_size, prompt_fn)
        was_training = self.model.training
        self.model.eval()
        try:
            while active := [i for i, s in enumerate(seqs) if not s.done]:
                step = self.config.micro_batch or len(active)
                for lo in range(0, len(active), step):
                    self._model_turn(
                        [seqs[i] for i in active[lo : lo + step]], [envs[i] for i in active[lo : lo + step]]
                    )
        finally:
            self.model.train(was_training)
        texts = [self.tokenizer.decode(s.response_ids, skip_special_tokens=False) for s in seqs]
        return collate(seqs, texts, self.pad_id, self.config.logp_temperature)

    def _model_turn(self, seqs: list[SequenceBuilder], envs: list[Environment]) -> None:
        """One model turn for each of ``seqs``, then each environment's answer."""
        cfg = self.config
        input_ids, attention_mask = left_pad([s.context for s in seqs], self.pad_id)
        device = self.model.device
        budgets = torch.tensor([turn_budget(cfg, s) for s in seqs])
        recorder = SampleRecorder(cfg.logp_temperature, cfg.top_k, cfg.top_p)
        stopper = TurnStopper(
            input_ids.shape[1],
            budgets.to(device),
            self.tokenizer,
            cfg.stop_strings,
            self.eos_ids,
            self.single_stop_ids,
            self.candidate_ids.to(device),
        )
        gen_config = GenerationConfig(
            do_sample=not cfg.greedy,
            temperature=1.0,
            top_k=None,
            top_p=None,
            num_beams=1,
            max_new_tokens=int(budgets.max()),
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            use_cache=True,
        )
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=gen_config,
                logits_processor=LogitsProcessorList([recorder]),
                stopping_criteria=StoppingCriteriaList([stopper]),
            )
        new = out[:, input_ids.shape[1] :]  # (b, n)
        logps = recorder.finish(new[:, -1]).cpu().tolist()  # (b, n)
        n_new = torch.where(stopper.n_new < 0, new.shape[1], stopper.n_new).tolist()  # (b,)
        new, stopped = new.cpu().tolist(), stopper.hit_stop.tolist()
        for b, (seq, env) in enumerate(zip(seqs, envs, strict=True)):
            finish_turn(self.tokenizer, cfg, seq, env, new[b][: n_new[b]], logps[b][: n_new[b]], stopped[b])


def start_episodes(
    tokenizer: Tokenizer, tasks: Sequence[Task], make_env: Callable[[Task], Environment], group_size: int,
    prompt_fn: PromptFn,
) -> tuple[list[SequenceBuilder], list[Environment]]:
    """``group_size`` fresh episodes per task (builder and environment each), rows grouped by task in order."""
    if group_size < 1 or not tasks:
        raise ValueError(f"rollout needs tasks and group_size >= 1, got {len(tasks)} tasks, G={group_size}")
    seqs, envs = [], []
    for g, task in enumerate(tasks):
        prompt = encode_prompt(tokenizer, prompt_fn(task))
        for _ in range(group_size):
            seqs.append(SequenceBuilder(prompt_ids=prompt, group_id=g, task_id=task.id, anchor=task.question))
            envs.append(make_env(task))
    return seqs, envs


def turn_budget(cfg: RolloutConfig, seq: SequenceBuilder) -> int:
    """New tokens the next model turn of ``seq`` may generate: min(max_turn_tokens, response budget left)."""
    return min(cfg.max_turn_tokens, cfg.max_response_tokens - len(seq.response_ids))


def finish_turn(tokenizer: Tokenizer, cfg: RolloutConfig, seq: SequenceBuilder, env: Environment, tokens: list[int],
                logps: list[float], stopped: bool) -> None:
    """Append a model turn (``stopped``: it ended on a stop string / EOS, not its budget), give its text to the
    environment and append the observation (loss mask 0), or end the episode: done, or truncated when the
    response budget is spent. The one turn protocol of every engine."""
    seq.add_model_turn(tokens, logps)
    budget_left = cfg.max_response_tokens - len(seq.response_ids)
    if budget_left <= 0 and not stopped:
        seq.done = seq.truncated = True
        return
    result = env.step(tokenizer.decode(tokens, skip_special_tokens=False))
    seq.record(result)
    if result.done:
        return
    obs = tokenizer.encode(result.observation, add_special_tokens=False)
    if len(obs) >= budget_left:  # no room left for another model token after the observation
        seq.done = seq.truncated = True
        return
    seq.add_observation(obs)
