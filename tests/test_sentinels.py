"""Sentinel likelihoods on a bigram model whose every log-prob is read off a table, and on a real tiny Qwen2."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from collapsewatch.sentinels import Sentinel, due, score

LN = math.log
P = torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])  # P[prev, next]


class Bigram(torch.nn.Module):
    """logits of the token after ``a`` = log P[a]: log_softmax gives back log P[a] exactly (rows sum to 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(3, 3)
        self.emb.weight.data = P.log()

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.emb(input_ids))


SENTINELS = [
    # ids 0 1 1 2, the policy wrote positions 1, 2 (position 3 is an observation): P(1|0) · P(1|1) = 0.25 · 0.8
    Sentinel("c:a", (0, 1, 1, 2), (0, 1, 1, 0), True),
    # ids 1 0: one scored token, P(0|1) = 0.1
    Sentinel("c:b", (1, 0), (0, 1), True),
    # ids 2 2 0: P(2|2) · P(0|2) = 0.6 · 0.2
    Sentinel("i:a", (2, 2, 0), (0, 1, 1), False),
]


def test_scores_are_the_masked_log_prob_sums():
    s = score(Bigram(), SENTINELS, chunk=2)  # two forwards, the first right-padded
    assert s.n_tokens == (2, 1, 2)
    assert s.logp_sum == pytest.approx((LN(0.25) + LN(0.8), LN(0.1), LN(0.6) + LN(0.2)))
    scalars = s.step_scalars(seconds=0.5)
    # correct: mean of the per-sentinel means ((ln .25 + ln .8) / 2 + ln .1) / 2; token mean Σ / 3 tokens
    assert scalars["sentinel_logp_correct_mean"] == pytest.approx(((LN(0.25) + LN(0.8)) / 2 + LN(0.1)) / 2)
    assert scalars["sentinel_logp_correct_token_mean"] == pytest.approx((LN(0.25) + LN(0.8) + LN(0.1)) / 3)
    assert scalars["sentinel_logp_incorrect_mean"] == pytest.approx((LN(0.6) + LN(0.2)) / 2)
    assert scalars["sentinel_time"] == 0.5
    assert s.rows()["logp_mean"][1] == pytest.approx(LN(0.1))
    assert s.rows()["sentinel"] == ["c:a", "c:b", "i:a"] and s.rows()["correct"] == [True, True, False]


def test_temperature_and_no_side_effects():
    model = Bigram().train()
    s = score(model, SENTINELS[:1], temperature=2.0)
    # softmax(log P / 2) ∝ √P: P(1|0) = .5 / (√.5 + .5 + .5) = 0.29289; P(1|1) = √.8 / (√.1 + √.8 + √.1) = 0.58579
    assert s.logp_sum[0] == pytest.approx(LN(0.5 / (math.sqrt(0.5) + 1.0)) + LN(math.sqrt(0.8) / (2 * math.sqrt(0.1)
                                                                                                   + math.sqrt(0.8))))
    assert model.training  # eval mode for scoring, restored afterwards
    assert s.step_scalars()["sentinel_logp_incorrect_mean"] is None  # no incorrect sentinel: NULL, not 0
    assert "sentinel_time" not in s.step_scalars()


def test_bad_sentinels_and_the_schedule():
    with pytest.raises(ValueError, match="differ in length"):
        Sentinel("x", (1, 2), (0,), True)
    with pytest.raises(ValueError, match="no scored token"):
        Sentinel("x", (1, 2), (1, 0), True)
    with pytest.raises(ValueError, match="no sentinels"):
        score(Bigram(), [])
    assert [s for s in range(25) if due(s, 10)] == [0, 10, 20] and not due(0, 0)


def test_real_model_padding_and_chunking_change_nothing():
    """A real tiny Qwen2: one sentinel alone (no padding) scores the same as in a right-padded chunk."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg)
    g = torch.Generator().manual_seed(1)
    sents = [Sentinel(f"c:{n}", tuple(torch.randint(0, 32, (n,), generator=g).tolist()),
                      tuple([0] * 3 + [1] * (n - 3)), n % 2 == 0) for n in (5, 9, 12)]
    together = score(model, sents, chunk=3)
    alone = [score(model, [s]).logp_sum[0] for s in sents]
    assert together.logp_sum == pytest.approx(alone, abs=1e-5)
    # the direct transcription: Σ over scored positions t of log_softmax(logits[t − 1])[id_t]
    ids = torch.tensor([sents[1].ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
    assert alone[1] == pytest.approx(float(logp[2:].sum()), abs=1e-5)  # model tokens are ids 3 … 8 (targets 2 …)
    # … and the trainer's own forward (the π_old / logp the batch L is made of) gives the same numbers
    from collapsewatch.trainer.forward import forward_logps

    with torch.no_grad():
        trainer_logp, _ = forward_logps(model.eval(), ids, torch.ones_like(ids), 1.0, want_entropy=False)
    assert alone[1] == pytest.approx(float(trainer_logp[0, 2:].sum()), abs=1e-5)


def test_trace_sentinels_pair_each_gold_trace_with_a_wrong_answer():
    from collapsewatch.env import EnvConfig, KBConfig, build_kb, make_env_factory
    from collapsewatch.env.traces import wrong_trace
    from collapsewatch.models.builtin import tokenizer_corpus
    from collapsewatch.models.tokenizer import train_tokenizer
    from collapsewatch.trainer.sentinels import trace_sentinels

    kb = build_kb(KBConfig(seed=3, n_people=30, n_cities=8, n_countries=3, n_companies=5))
    make_env = make_env_factory(kb)
    tok = train_tokenizer(tokenizer_corpus(kb, EnvConfig()), vocab_size=300)
    _, held_out = kb.split()
    sents = trace_sentinels(tok, held_out, make_env, 3)
    assert [s.name for s in sents] == [f"{k}:{t.id}" for t in held_out[:3] for k in "ci"]
    assert [s.correct for s in sents] == [True, False] * 3
    for c, i in zip(sents[::2], sents[1::2], strict=True):
        # the same prompt and searches; they part where the answer starts
        same = next(j for j, (a, b) in enumerate(zip(c.ids, i.ids, strict=False)) if a != b)
        assert c.ids[:same] == i.ids[:same] and sum(c.model_mask[:same]) > 0 and same > len(c.ids) // 2
    task = held_out[0]
    with pytest.raises(AssertionError, match="earned 1.0, not 0.0"):  # a "wrong" answer that is right is refused
        wrong_trace(task, make_env, task.answers[0])
    with pytest.raises(ValueError, match="only"):
        trace_sentinels(tok, held_out[:2], make_env, 3)
