"""A small byte-level BPE tokenizer trained locally (about a second) on knowledge-base and trace text.

Vocabulary size is the first CPU cost driver (embedding and LM head), so the built-in models use ~1k tokens.
Byte-level means any text still encodes, including names the tokenizer never saw. The chat markers are
special tokens (Qwen's ``<|endoftext|>`` pads); the Search-R1 tags are ordinary added tokens (one id each, kept by ``decode``), so a model
can emit a tag in one step and stop detection is a single-token check.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from collapsewatch.env.search import TAGS

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
# Qwen2's pre-tokenizer split. transformers >= 5 reloads a saved tokenizer through the class of the model
# type (Qwen2Tokenizer), which rebuilds NFC + this split + byte-level; training with the same pipeline
# makes the reloaded tokenizer encode exactly like the trained one (digits are single tokens, for one).
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# ChatML, as Qwen2 and SmolLM2 use it (no default system prompt, to keep prompts short).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE of at most ``vocab_size`` tokens (256 bytes + specials + tags + merges) on
    ``texts``; a small corpus runs out of merges earlier, so size models by ``len(tokenizer)``.

    Deterministic for a given text order. Padding side is left (decoder-only generation); the rollout
    engine pads explicitly anyway.
    """
    n_reserved = 256 + len(SPECIAL_TOKENS) + len(TAGS)
    if vocab_size <= n_reserved:
        raise ValueError(f"vocab_size must exceed {n_reserved} (bytes + special tokens), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TAGS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=ENDOFTEXT,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )
