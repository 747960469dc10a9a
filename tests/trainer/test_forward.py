"""The trainer's forward pieces: the entropy bonus has a gradient (grpo, sapo_search, llds) and π_old is recomputed
in eval mode (dropout off)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from collapsewatch import TokenBatch
from collapsewatch.objectives import GrpoParams, LldsParams, SapoSearchParams, aggregate, compute_objective
from collapsewatch.trainer.forward import entropy_needs_grad, forward_logps, old_logps


class LogitsModel(torch.nn.Module):
    """A causal LM whose logits are a parameter z (1, L, V): d loss / d z is read off ``z.grad``."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.z = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.z)


def _grad_wrt_logits(objective: str, params, entropy_coef: float) -> torch.Tensor:
    # Two-token vocabulary, ids [0, 0]: position 0's logits z = [ln 3, 0] score token 0 -> p = [3/4, 1/4].
    model = LogitsModel(torch.tensor([[[math.log(3.0), 0.0], [0.0, 0.0]]], dtype=torch.float64))
    ids, attn = torch.tensor([[0, 0]]), torch.ones(1, 2, dtype=torch.long)
    logp, entropy = forward_logps(model, ids, attn, 1.0, entropy_grad=entropy_needs_grad(params))  # (1, 1)
    tb = TokenBatch(logp=logp, mask=torch.ones(1, 1), logp_old=logp.detach(), advantages=torch.tensor([1.0]),
                    entropy=entropy, turn_ids=torch.zeros(1, 1, dtype=torch.long))
    aggregate(compute_objective(objective, tb, params).loss, tb.mask, "token_mean").backward()
    return model.z.grad[0, 0]


@pytest.mark.parametrize("objective,make", [
    ("grpo", lambda c: GrpoParams(entropy_coef=c)),
    ("sapo_search", lambda c: SapoSearchParams(base=GrpoParams(entropy_coef=c))),
    ("llds", lambda c: LldsParams(base=GrpoParams(entropy_coef=c))),
])
def test_entropy_bonus_moves_the_gradient(objective, make):
    # r = 1 (logp_old = logp), A = 1: sapo's penalty (r ≤ 0.8) and the LLDS gate (Σ d = 0, not < 0) are off, so
    # ℓ = −A·r − c·H. Policy part: dℓ/dlogp = −1, dlogp/dz = onehot(0) − p = [1/4, −1/4] -> [−1/4, +1/4].
    # Entropy: H = ln 4 − (3/4) ln 3; dH/dz_i = −p_i (log p_i + H): for i = 0, log(3/4) + H = (1/4) ln 3, so
    # dH/dz = (3/16) ln 3 · [−1, +1] and −c·dH/dz = c (3/16) ln 3 · [+1, −1].
    plain = _grad_wrt_logits(objective, make(0.0), 0.0)
    torch.testing.assert_close(plain, torch.tensor([-0.25, 0.25], dtype=torch.float64))
    c = 0.1
    bonus = _grad_wrt_logits(objective, make(c), c)
    k = c * 3 / 16 * math.log(3.0)  # 0.020599
    torch.testing.assert_close(bonus - plain, torch.tensor([k, -k], dtype=torch.float64))


def test_entropy_is_computed_without_graph_when_no_bonus():
    assert not entropy_needs_grad(GrpoParams()) and entropy_needs_grad(LldsParams(base=GrpoParams(entropy_coef=0.01)))
    model = LogitsModel(torch.zeros(1, 2, 3))
    _, entropy = forward_logps(model, torch.tensor([[0, 1]]), torch.ones(1, 2, dtype=torch.long), 1.0)
    assert not entropy.requires_grad and entropy.item() == pytest.approx(math.log(3.0))  # uniform over 3 tokens


def test_old_logps_are_recomputed_in_eval_mode():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, attention_dropout=0.5)
    model = Qwen2ForCausalLM(cfg).train()  # the trainer's mode: dropout active in the loss forward
    ids = torch.randint(0, 32, (3, 10))
    batch = SimpleNamespace(input_ids=ids, attention_mask=torch.ones_like(ids))
    first, second = old_logps(model, batch, 1.0, chunk=2), old_logps(model, batch, 1.0, chunk=2)
    assert model.training  # the mode is restored
    torch.testing.assert_close(first, second, rtol=0, atol=0)  # no dropout sample: π_old is one policy
    with torch.no_grad():
        expected, _ = forward_logps(model.eval(), ids, batch.attention_mask, 1.0, want_entropy=False)
    torch.testing.assert_close(first, expected)
    with torch.no_grad():  # the train-mode forward is a different (dropout) sample: what main recomputed
        noisy, _ = forward_logps(model.train(), ids, batch.attention_mask, 1.0, want_entropy=False)
    assert not torch.allclose(noisy, expected)
