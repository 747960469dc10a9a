"""verl's actor update on CPU with ``loss_mode=collapsewatch`` and the driver hook: the per-token rows a verl worker
writes carry the driver's rewards, groups and sequence ids (see verl_cpu.py for what is verl's own code here).
Runs in .venv-verl (``make test``)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

import torch  # noqa: E402
import verl_cpu  # noqa: E402  (tests/integrations/verl_cpu.py; verl ships its own top-level `tests` package)
from verl.trainer.ppo.metric_utils import compute_data_metrics  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from collapsewatch import connect  # noqa: E402
from collapsewatch.ingest import KEY_MAP  # noqa: E402
from collapsewatch.integrations import verl_driver  # noqa: E402

REWARDS = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # 4 prompts × n = 2: groups mixed, all-1, all-0, mixed


@pytest.fixture
def tap(monkeypatch, store):
    fresh = verl_cpu.cpu_tap(monkeypatch, store, "verl-cpu")
    monkeypatch.setattr(RayPPOTrainer, "_update_actor", RayPPOTrainer._update_actor)  # undone after the test
    verl_driver.install(RayPPOTrainer)
    yield fresh
    if fresh._hook is not None:
        fresh._hook.remove()


def test_actor_update_records_rows_joined_to_the_driver_batch(tap, store):
    torch.manual_seed(0)
    model = verl_cpu.tiny_model()
    cfg = verl_cpu.actor_config(ppo_mini_batch_size=2, micro=2, n=2)  # 8 sequences: 2 mini-batches × 2 micro
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, cfg), n=2, mini=2)
    before = [p.detach().clone() for p in model.parameters()]
    batch = verl_cpu.rollout_batch(model, REWARDS, n=2)
    out = trainer._update_actor(batch)  # verl's own driver method, wrapped by collapsewatch's hook
    metrics = out.meta_info["metrics"]
    assert len(metrics["actor/pg_loss"]) == 2  # two mini-batches → two optimizer steps
    assert any((a != b).any() for a, b in zip(before, model.parameters(), strict=True))  # the update happened
    assert tap.errors == 0 and tap.monitor is not None
    tap.monitor.close()
    con = connect(store)
    # driver fields reached the worker's rows: seq_id = step·2³² + row, reward = Σ token_level_scores
    seqs = con.execute("SELECT seq_id, reward, correct, group_id FROM sequences ORDER BY seq_id").fetchall()
    assert [s[0] - (1 << 32) for s in seqs] == list(range(8))
    assert [s[1] for s in seqs] == REWARDS
    assert [s[2] for s in seqs] == [r >= 1.0 for r in REWARDS]
    assert [s[3] - (1 << 32) for s in seqs] == [0, 0, 1, 1, 2, 2, 3, 3]  # np.unique order of prompt-0..3
    step = con.execute("SELECT step, n_seqs, reward_mean, correct_frac, zero_std_group_frac, on_policy "
                       "FROM steps").fetchall()
    # one step (global_steps = 1) of 8 sequences; 4 of 8 rewards are 1; groups all-1 and all-0 → 4/8 zero-std
    assert step == [(1, 8, 0.5, 0.5, 0.5, False)]
    # tokens: every response token of the 8 sequences (step 1 is not a multiple of token_every = 10, so sampled
    # rows only); per-sequence n_model_tokens = the response lengths 6, 5, 4, 6, 5, 4, 6, 5
    assert [r[0] for r in con.execute("SELECT n_model_tokens FROM sequences ORDER BY seq_id").fetchall()] == [
        6, 5, 4, 6, 5, 4, 6, 5]
    # the correct / incorrect split of the likelihood (LLD's input) exists, from verl's old_log_probs; the entropy is
    # the one verl computed for its loss (calculate_entropy), a random-init model's: near ln 64 = 4.16 nats
    lc, li, ent, p50 = con.execute("SELECT logp_old_mean_correct, logp_old_mean_incorrect, entropy_mean, "
                                   "ratio_p50_pos FROM steps").fetchone()
    assert lc < 0 and li < 0 and 3.0 < ent <= 4.16
    assert p50 is not None  # two mini-batches: the second trains after an update, so ratios exist (off-policy)
    # the step scalars verl itself logs for this batch (metric_utils.compute_data_metrics, the driver's code) equal the
    # catalogue metrics ingest maps them onto (single-turn: verl's response length counts no tool tokens here)
    ours = dict(zip(("reward_mean", "response_length_mean", "truncated_frac"), con.execute(
        "SELECT reward_mean, response_length_mean, truncated_frac FROM steps").fetchone(), strict=True))
    theirs = compute_data_metrics(batch, use_critic=False)
    pairs = [(verl_key, m.metric) for verl_key, m in KEY_MAP.items() if m.source.startswith("verl") and m.metric in ours]
    assert sorted(name for _, name in pairs) == sorted(ours)  # one verl key for each of the three
    for verl_key, name in pairs:
        assert ours[name] == pytest.approx(float(theirs[verl_key]), abs=1e-6), verl_key
    assert ours["truncated_frac"] == 3 / 8  # rows 0, 3, 6 filled the 6-token budget


def test_one_mini_batch_per_rollout_is_on_policy(tap, store):
    # ppo_mini_batch_size = 4 prompts × n = 2 = the whole batch: one optimizer step, π_θ = π_old throughout → the
    # step is told on-policy and every ratio metric is NULL (docs/architecture.md, *Glossary*), the likelihood signals still exist
    model = verl_cpu.tiny_model()
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, verl_cpu.actor_config(4, 2, 2)), n=2, mini=4)
    trainer._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2))
    tap.monitor.close()
    on_policy, p50, ppo_kl, lc = connect(store).execute(
        "SELECT on_policy, ratio_p50_pos, ppo_kl, logp_old_mean_correct FROM steps").fetchone()
    assert (on_policy, p50, ppo_kl) == (True, None, None) and lc < 0


def test_the_update_is_bit_identical_to_verls_own_loss(tap, store):
    # the same model, batch and config through verl's update with loss_mode=vanilla and loss_mode=collapsewatch:
    # identical parameters afterwards (max abs diff 0.0) and identical logged losses
    results = []
    for mode in ("vanilla", "collapsewatch"):
        model = verl_cpu.tiny_model(seed=3)
        cfg = verl_cpu.actor_config(2, 2, 2, loss_mode=mode)
        trainer = verl_cpu.driver(verl_cpu.training_worker(model, cfg), n=2, mini=2)
        out = trainer._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2, seed=5))
        results.append(([p.detach().clone() for p in model.parameters()], out.meta_info["metrics"]["actor/pg_loss"]))
    (p_ref, loss_ref), (p_cw, loss_cw) = results
    assert max((a - b).abs().max().item() for a, b in zip(p_ref, p_cw, strict=True)) == 0.0
    assert loss_cw == loss_ref
    assert tap.monitor is not None and tap.errors == 0  # the collapsewatch run did record
    tap.monitor.close()


def test_two_epochs_keep_sequence_rows_unique(tap, store):
    # ppo_epochs = 2, 2 mini-batches per epoch: each sequence is trained twice in step 1; the second pass (after 2
    # optimizer steps) is recorded as seq_id + 2⁴⁰, so 16 sequence rows, 8 per pass, rewards repeated
    model = verl_cpu.tiny_model()
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, verl_cpu.actor_config(2, 2, 2)), n=2, mini=2, epochs=2)
    trainer._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2))
    tap.monitor.close()
    rows = connect(store).execute("SELECT seq_id, reward FROM sequences ORDER BY seq_id").fetchall()
    base = 1 << 32
    assert [r[0] for r in rows] == [base + i for i in range(8)] + [(1 << 40) + base + i for i in range(8)]
    assert [r[1] for r in rows] == REWARDS + REWARDS


def test_multi_turn_masks_and_rollout_log_probs_with_dynamic_batches(tap, store, tmp_path):
    # verl's dynamic batch size (micro-batches packed to ≤ 24 tokens, re-ordered by verl) must keep each row with its
    # driver fields. Responses 0 and 3 hold a tool observation at position 2 → 2 turns, 1 model token fewer
    # (lengths 6 − 1 = 5 and 6 − 1 = 5). rollout_log_probs = π_old − 0.1 on model tokens → is_log_ratio = 0.1 on
    # every token: w = e^0.1 constant, so ESS = 1/mean((w/mean w)²) = 1 and χ² = mean(w²) − 1 = e^0.2 − 1 = 0.22140
    model = verl_cpu.tiny_model()
    cfg = verl_cpu.actor_config(2, 2, 2, max_tokens=24, model_dir=verl_cpu.save_model_dir(model, str(tmp_path / "m")))
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, cfg), n=2, mini=2, step=10)  # 10: all token rows
    batch = verl_cpu.rollout_batch(model, REWARDS, n=2, tool_rows=(0, 3), rollout_shift=0.1)
    trainer._update_actor(batch)
    assert tap.errors == 0
    tap.monitor.close()
    con = connect(store)
    # per token (step 10 keeps every sequence's tokens): one row per model token, 5+5+4+5+5+4+6+5 = 39 (tool
    # observations and padding have mask 0), each with is_log_ratio = 0.1
    n_tok, lo, hi = con.execute("SELECT count(*), min(is_log_ratio), max(is_log_ratio) FROM tokens "
                                "WHERE mask").fetchone()
    assert n_tok == 39 and lo == pytest.approx(0.1, abs=1e-6) and hi == pytest.approx(0.1, abs=1e-6)
    # token ids are verl's `responses`, so the dashboard can decode them with the tokenizer the worker saved
    ids = con.execute("SELECT list(token_id ORDER BY pos) FROM tokens WHERE seq_id = ? AND mask",
                      [(10 << 32) + 6]).fetchone()[0]  # seq_id = step · 2³² + row
    assert ids == batch.batch["responses"][6].tolist()  # response 6: 6 model tokens, no tool observation
    assert (store / "verl-cpu" / "tokenizer" / "tokenizer_config.json").is_file()
    rows = con.execute("SELECT seq_id, reward, n_turns, n_model_tokens FROM sequences "
                       "ORDER BY seq_id").fetchall()
    assert [r[1] for r in rows] == REWARDS
    assert [r[2] for r in rows] == [2, 1, 1, 2, 1, 1, 1, 1]
    assert [r[3] for r in rows] == [5, 5, 4, 5, 5, 4, 6, 5]
    ess, chi2, abs_mean = con.execute("SELECT is_ess, is_chi2, is_log_ratio_abs_mean FROM steps").fetchone()
    assert ess == pytest.approx(1.0, abs=1e-5) and chi2 == pytest.approx(0.22140, abs=1e-4)
    assert abs_mean == pytest.approx(0.1, abs=1e-6)


def test_the_last_step_closes_the_worker_monitor_finished(tap, store):
    # global_steps = total_training_steps: after that step's last optimizer step (2 mini-batches × 2 epochs = 4) the
    # worker closes its Monitor itself, status finished (Ray kills workers without exit handlers)
    model = verl_cpu.tiny_model()
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, verl_cpu.actor_config(2, 2, 2)), n=2, mini=2, epochs=2,
                              step=5, total_steps=5)
    trainer._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2))
    assert tap.monitor is None and tap.errors == 0
    con = connect(store)
    assert con.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    assert con.execute("SELECT count(*) FROM sequences").fetchone() == (16,)  # 8 sequences × 2 epochs, all flushed


def test_without_the_driver_hook_each_optimizer_step_is_a_step(monkeypatch, store):
    # a custom trainer that does not go through RayPPOTrainer._update_actor: no driver fields; the worker's own clock
    # numbers its optimizer steps 0, 1 (2 mini-batches); on-policy is not told, so the catalogue's rule gives False
    # (a step with logp_old has ratios); the per-sequence fields are NULL (reward_mean NULL)
    fresh = verl_cpu.cpu_tap(monkeypatch, store, "no-hook")
    model = verl_cpu.tiny_model()
    worker = verl_cpu.training_worker(model, verl_cpu.actor_config(2, 2, 2))
    try:
        verl_cpu.driver(worker, n=2, mini=2)._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2))
        fresh.monitor.close()
    finally:
        fresh._hook.remove()
    con = connect(store)
    assert con.execute("SELECT step, n_seqs, on_policy, reward_mean FROM steps ORDER BY step").fetchall() == [
        (0, 4, False, None), (1, 4, False, None)]
