"""The TRL integration on real ``GRPOTrainer`` runs (tiny offline model, CPU, a few steps each).

The off-policy tests hold the store against what TRL itself logged for the same steps. TRL's aggregation of
``clip_ratio/*_mean`` and ``entropy`` (grpo_trainer.py, ``_compute_loss`` and ``log``), transcribed:

    per micro-batch k:  m_k = Σ_tokens(x · mask) / max(Σ mask, 1)          (global_masked_mean; one process here)
    logged at step s:   mean over the micro-batches k of step s of m_k      (``log`` averages ``_metrics`` lists)

with x = clip flag (low: r < 1−ε_low ∧ A < 0, high: r > 1+ε_high ∧ A > 0, region: either) or entropy. With
``importance_sampling_level="sequence"`` the flags are per sequence (r = exp(mean log_ratio)) and m_k is their mean
over the micro-batch's sequences. ``logging_steps=1``, so each step's log holds that step's micro-batches only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("trl")

from transformers import TrainerCallback  # noqa: E402

from collapsewatch import Sampling, connect  # noqa: E402
from collapsewatch.detectors import DetectorConfig  # noqa: E402
from collapsewatch.integrations._trl_tap import turn_ids_from_tool_mask  # noqa: E402
from collapsewatch.integrations.trl import (  # noqa: E402
    SUPPORTED_TRL,
    AlreadyWatched,
    CollapsewatchCallback,
    UnsupportedTRLVersion,
    catalogue_scalars,
    check_trl,
    watch,
)
from tests.integrations.trl_tiny import LogsSeen, tiny_grpo_trainer  # noqa: E402

ALL_TOKENS = Sampling(token_every=1)
TOL = 1e-6


def _run(tmp_path, name: str, per_token: bool = True, detectors: bool = False, **config):
    """Train a tiny GRPO run under watch(); returns (trainer, callback, store, micro-batches observed)."""
    trainer = tiny_grpo_trainer(str(tmp_path / f"out-{name}"), **config)
    store = tmp_path / "store"
    cb = watch(trainer, store, name, per_token=per_token, sampling=ALL_TOKENS, detectors=detectors)
    micro: list[tuple[int, np.ndarray, torch.Tensor | None]] = []
    if per_token:  # record each micro-batch's membership and TRL's own old log-probs, as the tap hands them over
        build = cb.tap.token_batch

        def spy(inputs, logps, entropies, step):
            b = build(inputs, logps, entropies, step)
            old = inputs.get("old_per_token_logps")
            micro.append((step, b.seq_ids.numpy().copy(), None if old is None else old.clone()))
            return b

        cb.tap.token_batch = spy
    trainer.train()
    return trainer, cb, store, micro


def _trl_logged(store, run: str, key: str) -> pd.Series:
    df = connect(store).execute("SELECT step, value FROM scalars WHERE run = ? AND key = ? ORDER BY step",
                                [run, key]).df()
    return df.set_index("step")["value"]


def _tokens(store, run: str) -> pd.DataFrame:
    return connect(store).execute("SELECT * FROM tokens WHERE run = ? AND mask ORDER BY step, seq_id, pos",
                                  [run]).df()


def _micro_index(micro) -> pd.DataFrame:
    rows = [(step, int(s), k) for k, (step, seqs, _) in enumerate(micro) for s in seqs]
    return pd.DataFrame(rows, columns=["step", "seq_id", "micro"])


def _trl_mean_of_micro_means(per_micro: pd.DataFrame, value: str) -> pd.Series:
    """TRL's aggregation: per micro-batch Σx/max(n, 1), then the plain mean over a step's micro-batches."""
    g = per_micro.groupby(["step", "micro"])[value].agg(["sum", "count"])
    m = g["sum"] / g["count"].clip(lower=1)
    return m.groupby(level="step").mean()


@pytest.mark.parametrize("schedule", [
    dict(gradient_accumulation_steps=2, steps_per_generation=4),  # 2 micro-batches per step; rollout reused once
    dict(num_iterations=2),  # one micro-batch per step; each rollout trained on twice
], ids=["ga2-spg4", "iters2"])
def test_token_ratios_and_clip_fractions_agree_with_trl_logs(tmp_path, schedule):
    trainer, cb, store, micro = _run(tmp_path, "offpol", **schedule)
    assert cb.tap.errors == 0 and not cb.tap.on_policy
    assert connect(store).execute("SELECT probe_errors, status FROM runs").fetchone() == (0, "finished")
    tok = _tokens(store, "offpol").merge(_micro_index(micro), on=["step", "seq_id"], how="left", validate="m:1")
    assert tok["micro"].notna().all() and len(tok) > 0

    # per token: r = exp(logp − logp_old) with logp_old exactly TRL's old_per_token_logps; flags by TRL's rule
    olds = {(step, int(s)): old[i] for step, seqs, old in micro if old is not None for i, s in enumerate(seqs)}
    trl_old = np.array([float(olds[(r.step, r.seq_id)][r.pos]) for r in tok.itertuples()])
    np.testing.assert_array_equal(tok["logp_old"].to_numpy(), trl_old)
    off = tok[tok["ratio"].notna()]  # tokens of micro-batches trained after an update (on-policy ones: NULL)
    assert len(off) > 0 and off["step"].nunique() < tok["step"].nunique()
    np.testing.assert_allclose(off["ratio"], np.exp(off["logp"] - off["logp_old"]), rtol=1e-6)
    eps_low, eps_high = trainer.epsilon_low, trainer.epsilon_high
    assert (off["clip_low"] == ((off["ratio"] < 1 - eps_low) & (off["advantage"] < 0))).all()
    assert (off["clip_high"] == ((off["ratio"] > 1 + eps_high) & (off["advantage"] > 0))).all()

    # per step: TRL's logged clip fractions and entropy, transcribed from the stored token rows
    tok[["clip_low", "clip_high"]] = tok[["clip_low", "clip_high"]].fillna(False).astype(bool)  # r = 1: no clip
    tok["clip_region"] = tok["clip_low"] | tok["clip_high"]
    for ours, key in (("clip_low", "low_mean"), ("clip_high", "high_mean"), ("clip_region", "region_mean")):
        expected = _trl_mean_of_micro_means(tok.assign(x=tok[ours].astype(float)), "x")
        logged = _trl_logged(store, "offpol", f"clip_ratio/{key}")
        pd.testing.assert_series_equal(logged, expected, check_names=False, check_index_type=False, atol=TOL)
    pd.testing.assert_series_equal(_trl_logged(store, "offpol", "entropy"), _trl_mean_of_micro_means(tok, "entropy"),
                                   check_names=False, check_index_type=False, atol=1e-5)
    assert _trl_logged(store, "offpol", "clip_ratio/region_mean").max() > 0  # the comparison is not vacuous

    # the steps view: exact token-level fractions over the whole step, NULL where the policy had not moved yet
    steps = connect(store).execute("SELECT * FROM steps WHERE run = 'offpol' ORDER BY step").df().set_index("step")
    exact = tok.groupby("step")[["clip_low", "clip_high", "clip_region"]].mean()
    # told by the tap: a generation feeds 2 optimizer steps; the first is trained before any update (on-policy)
    assert steps["on_policy"].tolist() == [True, False, True, False]
    moved = ~steps["on_policy"].astype(bool)
    np.testing.assert_allclose(steps.loc[moved, "clip_region_frac"], exact.loc[moved[moved].index, "clip_region"],
                               atol=TOL)
    assert steps.loc[moved, "ratio_p50_pos"].notna().all()
    assert steps.loc[~moved, "clip_region_frac"].isna().all()  # told on-policy at the fresh step: NULL, not 0
    assert steps["logp_old_mean_correct"].notna().sum() + steps["logp_old_mean_incorrect"].notna().sum() > 0
    pd.testing.assert_series_equal(steps["grad_norm"], _trl_logged(store, "offpol", "grad_norm"),
                                   check_names=False, check_index_type=False)


def test_rewards_groups_and_ranks_match_trl(tmp_path):
    trainer, cb, store, micro = _run(tmp_path, "seqs", gradient_accumulation_steps=2, steps_per_generation=4)
    con = connect(store)
    seqs = con.execute("SELECT DISTINCT rank, seq_id, group_id, reward FROM sequences WHERE run = 'seqs'").df()
    n_gen = trainer.args.generation_batch_size  # 16 sequences per rollout, observed over two steps
    assert set(seqs["rank"]) == {0} and con.execute("SELECT world_size FROM runs").fetchone() == (1,)
    assert seqs["seq_id"].is_unique and len(seqs) == 2 * n_gen
    assert (seqs.groupby("group_id").size() == trainer.num_generations).all()
    assert (store / "seqs" / "tokenizer" / "tokenizer_config.json").is_file()  # kept for the dashboard
    reward_logged = _trl_logged(store, "seqs", "reward")  # logged at the step whose first micro-step generated
    ours = seqs.groupby(seqs["seq_id"] // n_gen)["reward"].mean()
    np.testing.assert_allclose(ours.to_numpy(), reward_logged.loc[[1, 3]].to_numpy(), atol=TOL)


def test_gspo_sequence_ratio_reproduces_trl_sequence_clip_fractions(tmp_path):
    trainer, cb, store, micro = _run(tmp_path, "gspo", importance_sampling_level="sequence", loss_type="grpo",
                                     epsilon=3e-3, epsilon_high=4e-3, gradient_accumulation_steps=2,
                                     steps_per_generation=4)
    con = connect(store)
    assert con.execute("SELECT objective FROM runs").fetchone() == ("trl:grpo+sequence_is",)
    assert con.execute("SELECT count(clip_low), count(ratio) > 0 FROM tokens").fetchone() == (0, True)
    seqs = con.execute("SELECT step, seq_id, seq_ratio, advantage FROM sequences").df()
    seqs = seqs.merge(_micro_index(micro), on=["step", "seq_id"], validate="1:1")
    s, a = seqs["seq_ratio"], seqs["advantage"]
    seqs["x"] = (((s < 1 - trainer.epsilon_low) & (a < 0)) | ((s > 1 + trainer.epsilon_high) & (a > 0))).astype(float)
    logged = _trl_logged(store, "gspo", "clip_ratio/region_mean")
    pd.testing.assert_series_equal(logged, _trl_mean_of_micro_means(seqs, "x"), check_names=False,
                                   check_index_type=False, atol=TOL)
    assert logged.max() > 0


def test_on_policy_run_records_null_ratio_metrics(tmp_path):
    trainer, cb, store, micro = _run(tmp_path, "onpol", detectors=True)  # 1 micro-batch/step, 1 iteration: r ≡ 1
    assert cb.tap.on_policy and all(old is None for _, _, old in micro)
    con = connect(store)
    assert con.execute("SELECT probe_errors FROM runs").fetchone() == (0,)
    steps = con.execute("SELECT * FROM steps WHERE run = 'onpol' ORDER BY step").df()
    assert len(steps) == 4 and steps["on_policy"].all()
    for col in ("ratio_p50_pos", "ratio_min_neg", "clip_low_frac", "clip_region_frac", "ppo_kl", "llds_gate_rate"):
        assert steps[col].isna().all(), col
    assert steps["entropy_mean"].notna().all() and steps["grad_norm"].notna().all()
    # π_old = π_θ on-policy: logp stands in for the logp_old TRL did not compute, so the LLD input exists
    assert con.execute("SELECT count(*) > 0, count(ratio), count(*) FILTER (WHERE logp_old = logp) = count(*) "
                       "FROM tokens WHERE mask").fetchone() == (True, 0, True)
    lld_input = steps[["logp_old_mean_correct", "logp_old_mean_incorrect"]].notna().any(axis=1)
    assert lld_input.all()  # main: NULL on every step (no logp_old), the LLD detector had no input
    tok = _tokens(store, "onpol").merge(_micro_index(micro), on=["step", "seq_id"])
    pd.testing.assert_series_equal(_trl_logged(store, "onpol", "entropy"), _trl_mean_of_micro_means(tok, "entropy"),
                                   check_names=False, check_index_type=False, atol=1e-5)


def test_callback_only_path_stores_trl_scalars(tmp_path):
    trainer, cb, store, _ = _run(tmp_path, "scalars", per_token=False, steps_per_generation=2)
    assert cb.tap is None
    con = connect(store)
    keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM scalars").fetchall()}
    assert {"clip_ratio/region_mean", "clip_ratio/low_mean", "learning_rate", "lr", "grad_norm", "loss", "entropy",
            "reward", "step_time"} <= keys
    steps = con.execute("SELECT step, grad_norm, lr, loss FROM steps ORDER BY step").df()
    history = [h for h in trainer.state.log_history if "grad_norm" in h]
    assert steps["step"].tolist() == [h["step"] for h in history] == [1, 2, 3, 4]
    np.testing.assert_allclose(steps["grad_norm"], [h["grad_norm"] for h in history], rtol=1e-12)
    np.testing.assert_allclose(steps["lr"], [h["learning_rate"] for h in history], rtol=1e-12)
    np.testing.assert_allclose(steps["loss"], [h["loss"] for h in history], rtol=1e-12)
    assert con.execute("SELECT (SELECT count(*) FROM tokens), (SELECT count(*) FROM step_metrics)").fetchone() == (0, 0)
    assert con.execute("SELECT status, objective FROM runs").fetchone() == ("finished", "trl:dapo")


def test_a_crashing_train_marks_the_run_crashed(tmp_path):
    calls = []

    def reward_then_fail(completions, **kw):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("reward server down")
        return [0.0] * len(completions)

    trainer = tiny_grpo_trainer(str(tmp_path / "out"), reward_funcs=reward_then_fail, max_steps=3)
    watch(trainer, tmp_path / "store", "crash", detectors=False)
    with pytest.raises(RuntimeError, match="reward server down"):
        trainer.train()
    con = connect(tmp_path / "store")
    assert con.execute("SELECT status FROM runs").fetchone() == ("crashed",)
    assert con.execute("SELECT max(step) FROM step_metrics").fetchone() == (1,)


def test_version_gate():
    assert "1.16.0" in SUPPORTED_TRL and "1.17.0" not in SUPPORTED_TRL
    for ok in ("1.10.0", "1.14.2", "1.16.0", "1.16.1.dev0", "1.16.0+local"):
        check_trl(version=ok)
    for bad in ("1.9.2", "1.17.0", "2.0.0"):
        with pytest.raises(UnsupportedTRLVersion, match="per_token=False"):
            check_trl(version=bad)


def _attached(trainer) -> bool:
    return "_compute_loss" in vars(trainer) or any(isinstance(cb, CollapsewatchCallback)
                                                   for cb in trainer.callback_handler.callbacks)


def test_watch_misuse_fails_at_watch_with_its_own_error(tmp_path):
    trainer = tiny_grpo_trainer(str(tmp_path / "out"))
    # a typo in a Monitor argument used to surface only when train() opened the Monitor
    with pytest.raises(TypeError, match="unknown Monitor argument 'flush_step'; Monitor takes: .*flush_steps"):
        watch(trainer, tmp_path / "store", "x", flush_step=5)
    with pytest.raises(TypeError, match="'rank' is set by watch"):
        watch(trainer, tmp_path / "store", "x", rank=1)
    with pytest.raises(TypeError, match="unknown Monitor argument 'sampel'"):
        CollapsewatchCallback(tmp_path / "store", "x", sampel=ALL_TOKENS)
    assert not _attached(trainer)  # nothing half-installed by a refused call
    # a wrong trainer type is a TypeError, not a TRL version problem
    for per_token in (True, False):
        with pytest.raises(TypeError, match="got object") as e:
            watch(object(), tmp_path / "store", "x", per_token=per_token)
        assert not isinstance(e.value, UnsupportedTRLVersion)
    # a second watch() names the run already attached
    cb = watch(trainer, tmp_path / "store", "first", detectors=False)
    with pytest.raises(AlreadyWatched, match="already watched \\(run 'first'\\)") as e:
        watch(trainer, tmp_path / "store", "second")
    assert not isinstance(e.value, UnsupportedTRLVersion)
    assert [c for c in trainer.callback_handler.callbacks if isinstance(c, CollapsewatchCallback)] == [cb]


def test_a_second_train_is_recorded_as_a_new_run(tmp_path):
    trainer = tiny_grpo_trainer(str(tmp_path / "out"), max_steps=2)
    store = tmp_path / "store"
    cb = watch(trainer, store, "twice", sampling=ALL_TOKENS, detectors=False)
    trainer.train()
    trainer.train()  # used to die with "Monitor for run 'twice' is closed"
    assert cb.runs == ["twice", "twice-train2"] and cb.tap.errors == 0
    con = connect(store)
    runs = con.execute("SELECT run, status FROM runs ORDER BY run").fetchall()
    assert runs == [("twice", "finished"), ("twice-train2", "finished")]
    # HF restarts global_step at 0 on each train(): each run has its own steps 1, 2, with token rows and TRL's logs
    per_run = con.execute("SELECT run, list(step ORDER BY step) FROM steps GROUP BY run ORDER BY run").fetchall()
    assert per_run == [("twice", [1, 2]), ("twice-train2", [1, 2])]
    assert con.execute("SELECT count(DISTINCT run) FROM tokens").fetchone() == (2,)
    assert con.execute("SELECT count(*) FROM steps WHERE grad_norm IS NULL").fetchone() == (0,)


def test_catalogue_aliases():
    logs = {"loss": 0.5, "learning_rate": 1e-3, "kl": 0.2, "grad_norm": 2.0, "epoch": 0.1, "note": "text",
            "flag": True, "reward": None}
    out = catalogue_scalars(logs, beta=0.04)
    assert out == {"loss": 0.5, "learning_rate": 1e-3, "lr": 1e-3, "kl": 0.2, "loss_kl": 0.04 * 0.2,
                   "grad_norm": 2.0, "epoch": 0.1, "reward": None}
    assert "loss_kl" not in catalogue_scalars(logs, beta=0.0)
    # TRL's default use_bias_correction_kl: its kl is mean(r · k3), kept under a name that says so
    weighted = catalogue_scalars(logs, beta=0.04, kl_ratio_weighted=True)
    assert weighted["kl_ref_ratio_weighted_mean"] == 0.2 and "kl_ref_ratio_weighted_mean" not in out


def test_turn_ids_from_tool_mask():
    # completion: model model | tool tool | model | pad   -> turns 0 0 (0 0) 1 -1
    completion_mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    tool_mask = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 1, 1, 1, 1]])  # TRL pads tool_mask with 1
    assert turn_ids_from_tool_mask(completion_mask, tool_mask).tolist() == [[0, 0, 0, 0, 1, -1], [0, 0, 0, -1, -1, -1]]
    assert turn_ids_from_tool_mask(completion_mask, None) is None


def test_step_values_next_to_trls(tmp_path):
    """kl, reward, reward_std, frac_reward_zero_std and mean length: each TRL value is stored under its own key and
    reproduced from the stored rows by its documented definition (docs/trl.md, "Step values next to TRL's")."""
    trainer, cb, store, micro = _run(tmp_path, "par", beta=0.1, gradient_accumulation_steps=2, steps_per_generation=4)
    assert trainer.args.use_bias_correction_kl and cb.tap.errors == 0
    con = connect(store)

    # kl: with use_bias_correction_kl (TRL's default) TRL logs mean(r · k3), r = exp(logp − logp_old) (1 where TRL
    # had no old log-probs), in TRL's mean-of-micro-batch-means aggregation; stored as kl_ref_ratio_weighted_mean
    tok = _tokens(store, "par").merge(_micro_index(micro), on=["step", "seq_id"], how="left", validate="m:1")
    r = np.exp(tok["logp"] - tok["logp_old"]).fillna(1.0)
    weighted = _trl_mean_of_micro_means(tok.assign(x=r * tok["kl_ref_k3"]), "x")
    stored = _trl_logged(store, "par", "kl_ref_ratio_weighted_mean")
    pd.testing.assert_series_equal(stored, _trl_logged(store, "par", "kl"), check_names=False)
    pd.testing.assert_series_equal(stored, weighted, check_names=False, check_index_type=False, rtol=1e-5)
    plain = con.execute("SELECT step, kl_ref_mean FROM steps ORDER BY step").df().set_index("step")["kl_ref_mean"]
    assert (stored - plain).abs().max() > 1e-6  # ratio-weighted ≠ plain once the policy moved: not the same number

    # reward, reward_std, frac_reward_zero_std, completions/mean_length: per *generation* in TRL (logged at the step
    # that generated it: 1 and 3 here, 16 completions each), per optimizer step in the steps view
    seqs = con.execute("SELECT DISTINCT seq_id, group_id, reward, n_model_tokens FROM sequences").df()
    gen = seqs.groupby(seqs["seq_id"] // trainer.args.generation_batch_size)
    zero_std = seqs.groupby("group_id")["reward"].agg(lambda x: x.max() == x.min())
    for key, ours in (("reward", gen["reward"].mean()), ("reward_std", gen["reward"].std(ddof=1)),
                      ("completions/mean_length", gen["n_model_tokens"].mean()),
                      ("frac_reward_zero_std", zero_std.groupby(zero_std.index // 4).mean())):
        np.testing.assert_allclose(ours.to_numpy(), _trl_logged(store, "par", key).loc[[1, 3]].to_numpy(),
                                   rtol=1e-5, err_msg=key)

    # the steps view: the step's own 8 sequences; reward_std is a sample std (n − 1) like TRL's
    per_step = con.execute("SELECT step, reward FROM sequences").df().groupby("step")["reward"]
    steps = con.execute("SELECT step, reward_mean, reward_std FROM steps ORDER BY step").df().set_index("step")
    np.testing.assert_allclose(steps["reward_mean"], per_step.mean(), rtol=1e-9)
    np.testing.assert_allclose(steps["reward_std"], per_step.std(ddof=1), rtol=1e-9)  # was the population std


def test_unscored_rewards_count_as_starved_groups(tmp_path):
    calls = []

    def sometimes_none(completions, **kw):
        # generation 1: every other completion unscored, the rest 0.0 -> each group's scored rewards are equal;
        # generation 2: nothing scored. Either way TRL zeroes every advantage: no group has a learning signal.
        calls.append(1)
        return [None if len(calls) > 1 or i % 2 else 0.0 for i in range(len(completions))]

    trainer, cb, store, _ = _run(tmp_path, "none", reward_funcs=sometimes_none, max_steps=2)
    con = connect(store)
    ours = con.execute("SELECT zero_std_group_frac FROM steps ORDER BY step").fetchall()
    assert ours == [(1.0,), (1.0,)]  # was 0.0, 0.0: NaN rewards made every group look like it had spread
    # TRL: nanstd of {0, 0} is 0 -> 1.0; of nothing it is NaN, and isclose(NaN, 0) is false -> 0.0 (docs/trl.md)
    assert _trl_logged(store, "none", "frac_reward_zero_std").tolist() == [1.0, 0.0]
    # the unscored rewards stay NaN (TRL warns "all reward functions returned None"): counted as non-finite rewards
    assert con.execute("SELECT nonfinite_rewards FROM steps ORDER BY step").fetchall() == [(2,), (4,)]  # of 4 each


def test_nan_sampling_logps_that_trl_neutralises_raise_no_event(tmp_path):
    """vLLM returns None for a token log-prob it cannot compute; TRL turns it into NaN and neutralises it (ratio 1).
    Emulated on CPU by handing TRL a sampling log-prob list with None entries, as its vLLM path produces."""
    trainer = tiny_grpo_trainer(str(tmp_path / "out"), max_steps=2)
    generate = trainer._generate

    def generate_with_sampling_logps(prompts):
        out = list(generate(prompts))
        out[4] = [[None if i == 0 else -1.0 for i in range(len(ids))] for ids in out[1]]  # first token unscored
        return tuple(out)

    trainer._generate = generate_with_sampling_logps
    cb = watch(trainer, tmp_path / "store", "vllm", sampling=ALL_TOKENS, detectors=True)
    trainer.train()
    assert cb.tap.errors == 0
    con = connect(tmp_path / "store")
    assert con.execute("SELECT count(*) FROM events WHERE detector = 'nonfinite'").fetchone() == (0,)
    steps = con.execute("SELECT nonfinite_logp_rollout, is_log_ratio_abs_mean FROM steps").df()
    assert (steps["nonfinite_logp_rollout"] == 0).all() and steps["is_log_ratio_abs_mean"].notna().all()
    tok = _tokens(tmp_path / "store", "vllm")
    first, rest = tok[tok["pos"] == 0], tok[tok["pos"] > 0]
    # on-policy, logp stands in for logp_old: is_log_ratio = logp − logp_rollout; 0 where TRL neutralised, else logp + 1
    assert (first["is_log_ratio"] == 0).all() and (first["logp_rollout"] == first["logp"]).all()
    np.testing.assert_allclose(rest["is_log_ratio"], rest["logp"] + 1.0, rtol=1e-6)


def test_sentinels_are_scored_under_the_policy_each_step_starts_from(tmp_path):
    from collapsewatch.sentinels import score, text_sentinels

    pairs = [("the cat sat", " on the mat", True), ("a dog ran", " banana", False)]
    trainer = tiny_grpo_trainer(str(tmp_path / "out"), max_steps=3)
    store = tmp_path / "store"
    watch(trainer, store, "sent", detectors=False, sentinels=pairs, sentinel_every=2, log_signals=False)
    later = LogsSeen()  # added after watch(), as a report_to backend comes after it
    trainer.add_callback(later)
    # the policy step 1 starts from is the initial model: score a bit-identical copy (same seed) before training
    fresh = tiny_grpo_trainer(str(tmp_path / "fresh"), max_steps=3)
    expected = score(fresh.model, text_sentinels(fresh.processing_class, pairs))
    trainer.train()
    con = connect(store)
    # due at global_step 0 and 2 → stored at steps 1 and 3, the step numbers of the optimizer steps they precede
    rows = con.execute("SELECT step, sentinel, correct, logp_sum FROM sentinels ORDER BY step, sentinel").fetchall()
    assert [(s, n, c) for s, n, c, _ in rows] == [(1, "c:0", True), (1, "i:1", False), (3, "c:0", True),
                                                 (3, "i:1", False)]
    assert [r[3] for r in rows[:2]] == pytest.approx(list(expected.logp_sum), abs=1e-5)
    assert rows[2][3] != pytest.approx(rows[0][3], abs=1e-6)  # two updates later (lr 5e-2) the policy moved
    steps = con.execute("SELECT step, sentinel_logp_correct_mean, sentinel_logp_incorrect_mean FROM steps "
                        "ORDER BY step").fetchall()
    n_c = expected.n_tokens[0]
    assert steps[0][1] == pytest.approx(expected.logp_sum[0] / n_c, abs=1e-5) and steps[1][1] is None
    # log_signals=False: TRL's logs reach the later callbacks without any collapsewatch/ series
    assert later.logs and not any(k.startswith("collapsewatch/") for _, logs in later.logs for k in logs)
    with pytest.raises(ValueError, match="sentinel_every"):
        watch(tiny_grpo_trainer(str(tmp_path / "bad")), store, "bad", sentinels=pairs, sentinel_every=0)


def test_trl_evaluation_logs_fill_eval_score(tmp_path):
    # TRL evaluates every eval_steps (here 2: after steps 2 and 4) and logs eval_reward, eval_rewards/<func>/mean,
    # eval_reward_std …; the callback hands them to Monitor.log at that global step, and the step's eval_score is the
    # mean of its reward-family keys (no accuracy key): eval_reward and eval_rewards/letter_a_reward/mean, equal with
    # one reward function of weight 1 — so eval_score = eval_reward
    trainer, _, store, _ = _run(tmp_path, "evals", per_token=False, n_eval_prompts=8, eval_strategy="steps",
                                eval_steps=2, per_device_eval_batch_size=4)
    con = connect(store)
    logged = [(h["step"], h["eval_reward"]) for h in trainer.state.log_history if "eval_reward" in h]
    assert [s for s, _ in logged] == [2, 4]
    scores = con.execute("SELECT step, eval_score FROM steps WHERE eval_score IS NOT NULL ORDER BY step").fetchall()
    assert [s for s, _ in scores] == [2, 4]
    for (step, want), (_, got) in zip(logged, scores, strict=True):
        assert got == pytest.approx(want, rel=1e-9), step
    # HF's speed metrics: eval_samples_per_second = samples / eval_runtime (rounded to 3 and 4 decimals), so their
    # product rounds back to the samples evaluated — the 8 eval prompts (HF counts the dataset's rows, not the
    # 8 × 4 completions) — which is the step's eval_size
    sizes = con.execute("SELECT step, eval_size FROM steps WHERE eval_size IS NOT NULL ORDER BY step").fetchall()
    implied = [(h["step"], round(h["eval_samples_per_second"] * h["eval_runtime"])) for h in trainer.state.log_history
               if "eval_runtime" in h]
    assert sizes == implied == [(2, 8), (4, 8)]


def test_trl_evaluation_falls_are_seen_online_at_their_step(tmp_path):
    # HF evaluates after a step's training log and logs eval_* in a second on_log call for the same global step;
    # the Monitor's online detectors read that evaluation there. The eval reward is made to fall: TRL scores eval
    # completions with the policy in eval mode (its own train/eval switch), where this reward is 1.0 at the first
    # evaluation (after step 2) and 0.0 at the second (after step 4); training completions get 0.5 throughout.
    # eval_score: 1.0 at 2, 0.0 at 4; the bar at 4 is max(0.05, 0.25 × 1.0) = 0.25 (two points: no spread; the set's
    # 8 prompts give no floor at p̄ = 1.0) ≤ 1.0 → an evaluation/fall warning at 4, found online
    evaluations_done = []

    class Count(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            evaluations_done.append(state.global_step)

    trainer = tiny_grpo_trainer(str(tmp_path / "out"), reward_funcs=lambda completions, **kw: [
        0.5 if trainer.model.training else (0.0 if evaluations_done else 1.0) for _ in completions],
        n_eval_prompts=8, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=4)
    trainer.add_callback(Count())
    store = tmp_path / "store"
    watch(trainer, store, "online_eval", per_token=False, detectors=DetectorConfig(enabled=("evaluation",)))
    trainer.train()
    assert evaluations_done == [2, 4]
    con = connect(store)
    assert con.execute("SELECT step, eval_score, eval_size FROM steps WHERE eval_score IS NOT NULL ORDER BY step"
                       ).fetchall() == [(2, 1.0, 8.0), (4, 0.0, 8.0)]
    assert con.execute("SELECT detector, phase, step_start, severity, source FROM events").fetchall() == [
        ("evaluation", "fall", 4, "warning", "online")]
