"""Policies for the built-in trainer: tiny Qwen2 models with a locally trained tokenizer, their supervised
warm start on gold search traces, and ``load_policy`` for built-in, local HF and opt-in SmolLM2 models.
"""

from collapsewatch.models.builtin import (
    BuiltinPolicy,
    BuiltinSpec,
    build_builtin,
    default_cache_root,
    load_builtin,
    tokenizer_corpus,
)
from collapsewatch.models.loading import Policy, load_policy, smollm2_gguf_path
from collapsewatch.models.tiny import PRESETS, ModelPreset, build_model, qwen2_config, tiny_model_and_tokenizer
from collapsewatch.models.tokenizer import CHAT_TEMPLATE, train_tokenizer
from collapsewatch.models.warmstart import (
    WarmStartConfig,
    WarmStartReport,
    sft_loss,
    success_rate,
    trace_examples,
    train_on_traces,
    warm_start,
)

__all__ = [
    "CHAT_TEMPLATE",
    "PRESETS",
    "BuiltinPolicy",
    "BuiltinSpec",
    "ModelPreset",
    "Policy",
    "WarmStartConfig",
    "WarmStartReport",
    "build_builtin",
    "build_model",
    "default_cache_root",
    "load_builtin",
    "load_policy",
    "qwen2_config",
    "sft_loss",
    "smollm2_gguf_path",
    "success_rate",
    "tiny_model_and_tokenizer",
    "tokenizer_corpus",
    "trace_examples",
    "train_on_traces",
    "train_tokenizer",
    "warm_start",
]
