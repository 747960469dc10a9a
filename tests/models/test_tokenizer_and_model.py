"""Built-in tokenizer and model: vocabulary, chat template, seeded init, offline save/load round trip."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BertConfig

from collapsewatch.env import TAGS, KBConfig, build_kb, gold_trace, make_env_factory, task_messages
from collapsewatch.models import BuiltinSpec, build_builtin, build_model, load_policy, tokenizer_corpus
from collapsewatch.models.builtin import META_FILE
from collapsewatch.rollout import encode_prompt

SPEC = BuiltinSpec(kb=KBConfig(seed=2, n_people=24, n_cities=6, n_countries=3, n_companies=4), warm_start=None)


@pytest.fixture(scope="module")
def built():
    model, tok, _ = build_builtin(SPEC)
    return model, tok


def _trace_text(tok, task, kb):
    prompt = tok.apply_chat_template(task_messages(task), add_generation_prompt=True, tokenize=False)
    return prompt + "".join(s.text for s in gold_trace(task, make_env_factory(kb)))


def test_vocabulary_tags_and_chat_template(built):
    model, tok = built
    # a 24-person KB runs out of merges before 1024: every word is one token and the vocabulary stops early
    assert len(tok) == model.config.vocab_size and 300 < len(tok) <= 1024
    for tag in TAGS:  # each tag is one token, and decoding keeps it (it is not a "special" token)
        (tid,) = tok.encode(tag, add_special_tokens=False)
        assert tok.decode([tid], skip_special_tokens=True) == tag
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert (tok.pad_token, tok.eos_token) == ("<|endoftext|>", "<|im_end|>")
    assert model.config.tie_word_embeddings and model.config.num_key_value_heads == 2
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_names_compress_well(built):
    _, tok = built
    kb = build_kb(SPEC.kb)
    task = next(t for t in kb.tasks if t.hops == 2)
    n_tokens = len(tok.encode(_trace_text(tok, task, kb), add_special_tokens=False))
    n_bytes = len(_trace_text(tok, task, kb).encode())
    assert n_tokens < n_bytes / 3  # ~1k BPE on its own corpus: entity names are one or two tokens


def test_seeded_init_is_bit_identical():
    a = build_model("tiny", 1024, 0, 2, seed=3)
    b = build_model("tiny", 1024, 0, 2, seed=3)
    c = build_model("tiny", 1024, 0, 2, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    # tiny = 2 layers, d128, MLP 512, tied 1024 x 128 embedding:
    # embedding 131072; per layer q 128*128+128, k/v 2*(128*64+64), o 128*128, MLP 3*128*512, 2 norms 2*128
    per_layer = (16384 + 128) + 2 * (8192 + 64) + 16384 + 3 * 65536 + 256
    assert sum(p.numel() for p in a.parameters()) == 131072 + 2 * per_layer + 128


def test_save_and_load_round_trip_offline(built, tmp_path):
    model, tok = built
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    policy = load_policy(str(tmp_path))
    kb = build_kb(SPEC.kb)
    text = _trace_text(tok, kb.tasks[2], kb)
    ids = tok.encode(text, add_special_tokens=False)
    assert policy.tokenizer.encode(text, add_special_tokens=False) == ids  # same pre-tokenizer after reload
    assert policy.tokenizer.decode(ids) == text and len(policy.tokenizer) == len(tok)
    assert encode_prompt(policy.tokenizer, task_messages(kb.tasks[0])) == encode_prompt(tok, task_messages(kb.tasks[0]))
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(model(x).logits, policy.model(x).logits)
    assert AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).config.model_type == "qwen2"
    assert AutoTokenizer.from_pretrained(tmp_path, local_files_only=True).chat_template == tok.chat_template


def test_tokenizer_training_is_deterministic():
    kb = build_kb(SPEC.kb)
    _, a, _ = build_builtin(SPEC)
    _, b, _ = build_builtin(SPEC)
    assert a.get_vocab() == b.get_vocab()
    assert len(tokenizer_corpus(kb, SPEC.env)) == len(kb.passages) + 2 * len(kb.tasks) + 50


def test_load_policy_errors_name_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match="nope.*does not exist"):
        load_policy(str(missing))
    with pytest.raises(ValueError, match="no config.json"):
        load_policy(str(tmp_path))
    encoder = tmp_path / "encoder"
    BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2).save_pretrained(encoder)
    config = json.loads((encoder / "config.json").read_text())
    (encoder / "config.json").write_text(json.dumps(dict(config, model_type="vit")))
    with pytest.raises(ValueError, match="encoder.*'vit' model, not a causal LM"):
        load_policy(str(encoder))
    with pytest.raises(ValueError, match="unknown built-in preset 'huge'"):
        load_policy("builtin:huge")


def test_builtin_metadata_round_trip():
    spec = BuiltinSpec(preset="small", seed=4, kb=KBConfig(seed=9, question_types=("born_city",)))
    assert BuiltinSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert BuiltinSpec().dir_name() == "tiny-0" and spec.dir_name().startswith("small-4-")
    assert META_FILE.endswith(".json")
