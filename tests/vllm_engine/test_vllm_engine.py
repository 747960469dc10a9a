"""The vLLM rollout engine against the trainer and the HF engine (runs in .venv-vllm: `make test` / `make vllm-env`).

One engine start for the module: the warm-started built-in tiny model, vLLM in fp32, its engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's own in-process mode: the same model runner, sampler and weight-reload
call, without a second process importing torch and vLLM again — 49 → 24 CPU s for this module). The default, the
engine core in its own process (weights sent to it by ``collective_rpc``), is what tests/vllm_engine/test_vllm_train.py
runs: the trainer's vLLM engine, synced once. Bounds: vLLM's CPU kernels and a transformers forward pass agree to ~1e-5 nats per token in fp32
(measured 4.5e-6 greedy, 1.1e-5 at τ = 0.7); 1e-4 leaves room for other CPUs and is 1000× below the 0.1-nat gap
that a weight change or a temperature mix-up produces.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from collapsewatch.env import build_kb, make_env_factory
from collapsewatch.models import load_builtin
from collapsewatch.rollout import HFRolloutEngine, RolloutConfig, recompute_logprobs
from collapsewatch.rollout.vllm_engine import VLLMRolloutEngine

FP32_BOUND = 1e-4
GREEDY = RolloutConfig(temperature=0.0, max_turn_tokens=24, max_response_tokens=120)


@pytest.fixture(scope="module")
def setup():
    policy = load_builtin()
    kb = build_kb(policy.spec.kb)
    _, held_out = kb.split(policy.spec.eval_fraction)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        engine = VLLMRolloutEngine(policy.model, policy.tokenizer, GREEDY, dtype="float32", seed=0)
    try:
        yield policy.model, policy.tokenizer, held_out[:3], make_env_factory(kb, policy.spec.env), engine
    finally:
        engine.close()
        # vLLM's own reset after an in-process engine (its tests' too): the environment cache the engine core turned
        # on (it holds VLLM_ENABLE_V1_MULTIPROCESSING=0) and the process group, so later engines start by default
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()


def max_gap(batch, logp: torch.Tensor) -> float:
    """max over model tokens of |logp_rollout − logp|."""
    return float(((batch.logp_rollout - logp) * batch.loss_mask).abs().max())


def test_the_environment_sees_the_same_protocol_from_both_engines(setup):
    model, tok, tasks, make_env, engine = setup
    engine.config = GREEDY
    v = engine.rollout(tasks, make_env, 2)
    h = HFRolloutEngine(model, tok, GREEDY).rollout(tasks, make_env, 2)
    # greedy in fp32: the same tokens, so the same turns, observations, masks, rewards and budget cuts
    for name in ("input_ids", "attention_mask", "loss_mask", "obs_mask", "turn_ids", "rewards", "n_turns",
                 "n_searches", "n_invalid", "truncated", "response_start"):
        assert torch.equal(getattr(v, name), getattr(h, name)), name
    assert v.texts == h.texts and v.turn_rewards == h.turn_rewards and v.temperature == h.temperature == 1.0
    assert int(v.n_turns.max()) >= 2 and v.obs_mask.sum() > 0  # multi-turn: observations were appended
    assert max_gap(v, h.logp_rollout) < FP32_BOUND


def test_fp32_logprobs_follow_the_trainers_tempered_distribution(setup):
    model, _, tasks, make_env, engine = setup
    engine.config = replace(GREEDY, temperature=0.7)
    b = engine.rollout(tasks, make_env, 4)
    assert b.temperature == 0.7 and b.loss_mask.sum() > 50
    assert max_gap(b, recompute_logprobs(model, b.input_ids, b.attention_mask, 0.7)) < FP32_BOUND
    # vLLM's default (raw_logprobs) would be log softmax(z), the τ = 1 values: far from these
    assert max_gap(b, recompute_logprobs(model, b.input_ids, b.attention_mask, 1.0)) > 0.1


def test_sync_weights_changes_what_vllm_samples(setup):
    model, _, tasks, make_env, engine = setup
    engine.config = replace(GREEDY, temperature=0.7)
    moved = copy.deepcopy(model)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    try:
        engine.sync_weights(moved)
        assert engine.sync_seconds is not None and engine.sync_seconds > 0
        b = engine.rollout(tasks, make_env, 4)
        assert max_gap(b, recompute_logprobs(moved, b.input_ids, b.attention_mask, 0.7)) < FP32_BOUND
        assert max_gap(b, recompute_logprobs(model, b.input_ids, b.attention_mask, 0.7)) > 0.1
    finally:
        engine.sync_weights(model)  # the module's other tests sample from the original weights
    b = engine.rollout(tasks, make_env, 2)
    assert max_gap(b, recompute_logprobs(model, b.input_ids, b.attention_mask, 0.7)) < FP32_BOUND


def test_truncated_sampling_is_refused(setup):
    _, _, tasks, make_env, engine = setup
    engine.config = replace(GREEDY, temperature=1.0, top_p=0.9)
    with pytest.raises(ValueError, match="top_p must be 1"):
        engine.rollout(tasks, make_env, 2)


def test_the_trainer_refuses_top_p_with_vllm_before_loading_anything():
    from collapsewatch.trainer.config import load_config

    with pytest.raises(ValueError, match="^top_p: rollout.engine=vllm needs top_p = 1"):
        load_config(overrides=["rollout.engine=vllm", "top_p=0.9"])
    assert load_config(overrides=["rollout.engine=vllm"]).rollout == {"engine": "vllm"}
