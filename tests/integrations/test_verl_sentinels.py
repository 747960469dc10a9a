"""Sentinels on verl: scored by the driver hook through verl's own ``compute_log_prob`` (the π_old call: the actor's
``TrainingWorker.infer_batch`` → the engine's no-grad forward, see verl_cpu.py) and recorded by rank 0's worker tap
with the step. Runs in .venv-verl (``make test``)."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

import torch  # noqa: E402
import verl_cpu  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from collapsewatch import connect  # noqa: E402
from collapsewatch.integrations import verl as cw_verl  # noqa: E402
from collapsewatch.integrations import verl_driver, verl_sentinels  # noqa: E402
from collapsewatch.models.tiny import ModelPreset, build_model  # noqa: E402
from collapsewatch.models.tokenizer import train_tokenizer  # noqa: E402
from collapsewatch.sentinels import score as builtin_score  # noqa: E402
from collapsewatch.sentinels import text_sentinels  # noqa: E402

PAIRS = [("search the knowledge base", " answer: paris", True), ("answer", " search the base", True),
         ("the knowledge", " paris paris", False)]


@pytest.fixture
def setup(monkeypatch, store, tmp_path):
    verl_cpu.cpu_world()
    verl_cpu.patch_cpu_device(monkeypatch)
    monkeypatch.setenv(cw_verl.ENV_STORE, str(store))
    monkeypatch.setenv(cw_verl.ENV_RUN, "verl-sentinels")
    path = tmp_path / "sentinels.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "response": r, "correct": c}) + "\n" for p, r, c in PAIRS))
    monkeypatch.setenv(verl_sentinels.ENV_SENTINELS, str(path))
    monkeypatch.setenv(verl_sentinels.ENV_SENTINEL_EVERY, "10")
    tap = cw_verl.WorkerTap()
    monkeypatch.setattr(cw_verl, "TAP", tap)
    monkeypatch.setattr(RayPPOTrainer, "_update_actor", RayPPOTrainer._update_actor)  # undone after the test
    verl_driver.install(RayPPOTrainer)
    tok = train_tokenizer(["search the knowledge base", "answer: paris"] * 20, vocab_size=300)
    torch.manual_seed(0)
    model = build_model(ModelPreset(n_layers=1, d_model=32, n_heads=2), len(tok), tok.pad_token_id,
                        tok.eos_token_id).float()
    yield tap, tok, model, path
    if tap._hook is not None:
        tap._hook.remove()


def _trainer(model, tok, step: int, world_size: int = 1):
    cfg = verl_cpu.actor_config(ppo_mini_batch_size=2, micro=2, n=2)
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, cfg), n=2, mini=2, step=step)
    trainer.actor_rollout_wg.world_size = world_size
    trainer.tokenizer = tok
    return trainer


@pytest.mark.parametrize("world_size, temperature", [(1, 1.0), (2, 1.3)])
def test_sentinels_scored_through_verls_log_prob_call_equal_the_builtin_scorer(setup, store, world_size,
                                                                               temperature):
    tap, tok, model, _ = setup
    sentinels = text_sentinels(tok, PAIRS)
    # the reference: the built-in trainer's scorer (held to its forward_logps) on the policy the step starts from,
    # under softmax(logits / τ) at the rollout temperature
    ref = builtin_score(model, sentinels, temperature, tok.pad_token_id)
    for step in (1, 2):  # every 10 from step 1: step 1 is scored, step 2 is not
        batch = verl_cpu.rollout_batch(model, [1.0, 0.0, 1.0, 0.0], n=2)
        trainer = _trainer(model, tok, step, world_size)
        trainer.config.actor_rollout_ref.rollout.temperature = temperature
        trainer._update_actor(batch)
    assert tap.errors == 0
    tap.monitor.close()
    con = connect(store)
    rows = con.execute("SELECT step, sentinel, correct, n_tokens, logp_sum, logp_mean FROM sentinels "
                       "ORDER BY sentinel").fetchall()
    # three sentinels once (world_size 2: the set is padded to 4 rows with a copy of the last, whose score is
    # dropped); n_tokens = the response's own tokens, encoded without special tokens (all scored)
    n = [len(tok(r, add_special_tokens=False)["input_ids"]) for _, r, _ in PAIRS]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(1, "c:0", True, n[0]), (1, "c:1", True, n[1]),
                                                        (1, "i:2", False, n[2])]
    for r, want in zip(rows, ref.logp_sum, strict=True):
        assert r[4] == pytest.approx(want, abs=1e-4) and r[5] == pytest.approx(want / r[3], abs=1e-4)
    # the step scalars: the correct mean weighs each sentinel the same, the token mean pools the tokens
    lc, lct, li = con.execute("SELECT sentinel_logp_correct_mean, sentinel_logp_correct_token_mean, "
                              "sentinel_logp_incorrect_mean FROM steps WHERE step = 1").fetchone()
    assert lc == pytest.approx((rows[0][5] + rows[1][5]) / 2, abs=1e-6)
    assert lct == pytest.approx((rows[0][4] + rows[1][4]) / (n[0] + n[1]), abs=1e-6)
    assert li == pytest.approx(rows[2][5], abs=1e-6)
    assert con.execute("SELECT sentinel_logp_correct_mean FROM steps WHERE step = 2").fetchone() == (None,)


def test_a_bad_sentinel_file_costs_the_sentinels_not_the_step(setup, store, caplog):
    tap, tok, model, path = setup
    path.write_text('{"prompt": "a", "response": "b"}\n')  # no "correct"
    batch = verl_cpu.rollout_batch(model, [1.0, 0.0, 1.0, 0.0], n=2)
    before = [p.detach().clone() for p in model.parameters()]
    with caplog.at_level(logging.ERROR, logger="collapsewatch"):
        _trainer(model, tok, 1)._update_actor(batch)
    assert any((a != b).any() for a, b in zip(before, model.parameters(), strict=True))  # the update happened
    assert "could not score the sentinels" in caplog.text and "line 1" in caplog.text
    tap.monitor.close()
    assert connect(store).execute("SELECT count(*) FROM sentinels").fetchone() == (0,)


def test_sentinel_batch_layout_by_hand():
    # two sentinels: prompt [5, 6] + response [7, 8, 9]; prompt [5] + response [7] with a 0-mask token after it.
    from collapsewatch.sentinels import Sentinel

    a = Sentinel("a", (5, 6, 7, 8, 9), (0, 0, 1, 1, 1), True)
    b = Sentinel("b", (5, 7, 4), (0, 1, 0), False)
    t = verl_sentinels.sentinel_batch([a, b], pad_id=0, multiple=4)  # padded to 4 rows with copies of b
    assert t["prompts"].tolist() == [[5, 6], [0, 5], [0, 5], [0, 5]]  # left-padded
    assert t["responses"].tolist() == [[7, 8, 9], [7, 4, 0], [7, 4, 0], [7, 4, 0]]  # right-padded
    assert t["response_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 0, 0], [1, 0, 0]]
    assert t["attention_mask"][1].tolist() == [0, 1, 1, 1, 0]
    assert t["position_ids"][1].tolist() == [0, 0, 1, 2, 2]  # cumsum − 1 of the mask, clamped at 0
    with pytest.raises(ValueError, match="no prompt token"):
        verl_sentinels.sentinel_batch([Sentinel("x", (7, 8), (1, 1), True)], pad_id=0)
    assert [verl_sentinels.due(s, 10) for s in (1, 2, 10, 11, 21)] == [True, False, False, True, True]
