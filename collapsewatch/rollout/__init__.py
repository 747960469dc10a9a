"""Rollout engines: multi-turn generation against an environment, producing a ``RolloutBatch``.

``HFRolloutEngine`` uses transformers ``generate`` (CPU or GPU). A vLLM engine can implement the same
``RolloutEngine`` protocol; nothing here imports vLLM.
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
