"""Built-in tiny Qwen2-architecture causal LMs (random init, seeded) for CPU-sized RL runs.

Presets keep the Qwen2 shape that real recipes train (RMSNorm, RoPE, SwiGLU, grouped-query attention
with 2 KV heads, tied embeddings) at a size where a GRPO step on 2 CPU cores takes about a second.
:func:`tiny_model_and_tokenizer` is the smallest of them with its tokenizer, built offline in about a second: what
docs/trl.md's script, the TRL integration's tests and ``bench/bench_trl.py`` train.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from collapsewatch.models.tokenizer import train_tokenizer


@dataclass(frozen=True)
class ModelPreset:
    """Body size of a built-in model; the vocabulary comes from its tokenizer."""

    n_layers: int
    """Transformer blocks."""
    d_model: int
    """Hidden size."""
    n_heads: int
    """Query heads (head_dim = d_model / n_heads)."""
    n_kv_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    mlp_ratio: int = 4
    """intermediate_size = mlp_ratio * d_model."""
    max_positions: int = 1024
    """Longest prompt + response, in tokens."""
    sft_lr: float = 5e-3
    """Peak warm-start learning rate for this size (measured: ``small`` does not learn at 5e-3 in 600 steps,
    nll 1.27; at 1e-3 it reaches nll 0.18 in ~320 steps)."""

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, got {self}")


PRESETS: dict[str, ModelPreset] = {
    "tiny": ModelPreset(n_layers=2, d_model=128, n_heads=4),
    "small": ModelPreset(n_layers=4, d_model=256, n_heads=4, sft_lr=1e-3),
}


def qwen2_config(preset: ModelPreset, vocab_size: int, pad_token_id: int, eos_token_id: int) -> Qwen2Config:
    """The ``Qwen2Config`` of ``preset`` for a tokenizer of ``vocab_size`` tokens."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=preset.d_model,
        intermediate_size=preset.mlp_ratio * preset.d_model,
        num_hidden_layers=preset.n_layers,
        num_attention_heads=preset.n_heads,
        num_key_value_heads=preset.n_kv_heads,
        max_position_embeddings=preset.max_positions,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
        use_cache=True,
    )


def build_model(
    preset: str | ModelPreset, vocab_size: int, pad_token_id: int, eos_token_id: int, seed: int = 0
) -> Qwen2ForCausalLM:
    """A freshly initialised fp32 model; ``torch.manual_seed(seed)`` first, so weights are bit-identical per seed."""
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(f"unknown model preset {preset!r}; known: {sorted(PRESETS)}")
        preset = PRESETS[preset]
    config = qwen2_config(preset, vocab_size, pad_token_id, eos_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = pad_token_id
    model.generation_config.eos_token_id = eos_token_id
    return model.float().eval()


TOY_BODY = ModelPreset(n_layers=1, d_model=32, n_heads=2, n_kv_heads=1, max_positions=128)
"""The body of :func:`tiny_model_and_tokenizer`: one layer, d=32 (a few thousand weights besides the embedding)."""

TOY_TEXTS: tuple[str, ...] = (
    "the cat sat on the mat", "a dog ran in the park", "count the apples and pears", "what is two plus two",
    "name a river in france", "spell banana backwards", "say hello to the user", "list three colours please")
"""The sentences the toy tokenizer is trained on (byte-level: any other text still encodes)."""


def tiny_model_and_tokenizer(seed: int = 0, body: ModelPreset = TOY_BODY
                             ) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """A random-init Qwen2 causal LM of ``body`` (seeded) and a byte-level BPE tokenizer trained locally on
    :data:`TOY_TEXTS`: nothing is downloaded, so a TRL or HF example runs offline in seconds. It learns nothing
    useful; it exercises the real training and monitoring code paths."""
    tokenizer = train_tokenizer(TOY_TEXTS * 4, vocab_size=300)
    model = build_model(body, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed=seed)
    return model, tokenizer
