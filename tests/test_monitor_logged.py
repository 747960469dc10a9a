"""A reward (and the other outcome metrics) given to ``Monitor.log`` reaches the detectors, the ``steps`` view and the
run page where the observed batches carry none; an observed value wins (``catalogue.LOGGED_STANDINS``)."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from collapsewatch import Monitor, TokenBatch, connect
from collapsewatch.cli import app
from collapsewatch.detectors import DetectorConfig, SeverityConfig
from collapsewatch.ingest import ingest_file
from collapsewatch.offline import detect_runs
from collapsewatch.store import Store
from collapsewatch.store.queries import runs_summary

LENGTH_ONLY = DetectorConfig(enabled=("length",), severity=SeverityConfig(sustain_steps=0))
"""The length detector alone; the severity gate by its levels only (a 40-step run: its 20-step fall never lasts the
default sustain_steps 90 — test_severity.py has that)."""
STEPS = 40
FALL = 20
"""From step FALL on every response is truncated and the logged reward is 0.1 (0.8 before)."""


def _batch(step: int, rewards: torch.Tensor | None = None) -> TokenBatch:
    """B = 4 responses of T = 8 model tokens (real log-probs, no entropy); all truncated from step FALL on."""
    g = torch.Generator().manual_seed(step)
    return TokenBatch(logp=-2 * torch.rand(4, 8, generator=g), mask=torch.ones(4, 8),
                      truncated=torch.full((4,), step >= FALL), rewards=rewards)


def _reward(step: int) -> float:
    return 0.8 if step < FALL else 0.1


def _run(store, run: str, log: bool, rewards: torch.Tensor | None = None) -> list:
    with Monitor(store, run, detectors=LENGTH_ONLY) as mon:
        for step in range(STEPS):
            mon.observe(_batch(step, rewards), step=step)
            if log:
                mon.log(step, {"reward_mean": _reward(step)})
    return mon.events


def _episodes(events: list) -> dict:
    """(detector, phase, step_start) → (step_end, severity) of each episode's latest version."""
    return {(e.detector, e.phase, e.step_start): (e.step_end, e.severity) for e in events}


def test_a_logged_reward_lets_a_critical_stand(store):
    """The length blow-up (truncated_frac from the observed batches) is critical from step 33, and stays critical
    only where a reward shows harm: the logged one here.

    truncated_frac = 0 on steps 0–19, 1 from 20. Level (median of 5) = 1 from step 22 (3 of 5 points), start = 0:
    the blow-up rule holds from 22 and the episode opens at 24 (confirm_steps = 3: 22, 23, 24). Critical needs the
    mean of the last 20 points ≥ 0.7: (s − 19) / 20 ≥ 0.7 → s ≥ 33.
    Gate (signals.reward_fall) with the logged reward 0.8 → 0.1 at step 20: levels 0.8 up to step 21, 0.1 from 22;
    best 0.8; per-point noise = MAD of the differences (all 0 but one) = 0; drop needed = max(0.05, 0.25 · 0.8) =
    0.2 ≤ 0.8 − 0.1 on each of the last 5 levels from step 26 on → at 33 the critical stands.
    Without the log: no reward point → lowered to warning. With observed rewards [1, 0, 1, 0] (mean 0.5 every
    step) beside the same log: the observed reward wins, flat at its best 0.5 → the reward holds → info."""
    logged, unlogged = _run(store, "logged", True), _run(store, "unlogged", False)
    observed = _run(store, "observed", True, torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert _episodes(logged) == {("length", "blowup", 24): (STEPS - 1, "critical")}
    first = next(e for e in logged if e.severity == "critical")
    assert first.step_end == 33 and "severity_gate" not in first.evidence
    assert _episodes(unlogged) == {("length", "blowup", 24): (STEPS - 1, "warning")}
    lowered = [e for e in unlogged if "severity_gate" in e.evidence]
    assert lowered[0].step_end == 33 and lowered[0].evidence["severity_gate"]["lowered_from"] == "critical"
    # the observed run: its reward holds at its best (0.5 = 0.5, drop needed max(0.05, 0.25 · 0.5) = 0.125), so
    # the blow-up is responses growing into the budget (length.py) — info, never raised to warning
    assert _episodes(observed) == {("length", "blowup", 24): (STEPS - 1, "info")}
    last = observed[-1].evidence
    assert (last["reward_best"], last["reward_now"], last["drop_needed"]) == (0.5, 0.5, 0.125)

    con = connect(store)
    # the steps view shows the reward the detectors read: logged where none was observed, else the observed one
    rows = con.execute("SELECT run, list(reward_mean ORDER BY step) FROM steps GROUP BY run ORDER BY run").fetchall()
    assert rows == [("logged", [_reward(s) for s in range(STEPS)]), ("observed", [0.5] * STEPS),
                    ("unlogged", [None] * STEPS)]
    # `collapsewatch runs`' last reward: the last observed one, else the last logged one (step 39: 0.1)
    last = runs_summary(Store(store)).set_index("run")["last_reward"]
    assert (last["logged"], last["observed"]) == (0.1, 0.5) and pd.isna(last["unlogged"])
    # offline detection reads the steps view: the same episodes as online, for each run
    for run, events in (("logged", logged), ("unlogged", unlogged), ("observed", observed)):
        offline = detect_runs(store, run=run, config=LENGTH_ONLY)
        assert {(r.detector, r.phase, r.step_start): (r.step_end, r.severity) for r in offline.itertuples()} == \
            _episodes(events)


def test_an_ingested_log_with_a_reward_column_is_judged_the_same(store, tmp_path):
    """The offline path: a TRL-keyed JSON Lines log — ``completions/clipped_ratio`` = the truncated_frac the probe
    measured on the batches above, ``reward`` = the reward logged above — ingested gives the same episode as the
    online run that logged that reward (critical from 33); without the reward column the gate lowers it."""
    _run(store, "source", False)
    steps = connect(store).execute("SELECT step, truncated_frac FROM step_metrics WHERE run = 'source' "
                                   "ORDER BY step").fetchall()
    assert [t for _, t in steps] == [0.0] * FALL + [1.0] * (STEPS - FALL)
    for name, keep_reward in (("with_reward", True), ("without_reward", False)):
        log = tmp_path / f"{name}.jsonl"
        log.write_text("".join(json.dumps({"step": s, "completions/clipped_ratio": t,
                                           **({"reward": _reward(s)} if keep_reward else {})}) + "\n"
                               for s, t in steps))
        ingest_file(store, log, name, fmt="jsonl")
    for name, severity in (("with_reward", "critical"), ("without_reward", "warning")):
        offline = detect_runs(store, run=name, config=LENGTH_ONLY)
        assert [(r.phase, r.step_start, r.step_end, r.severity) for r in offline.itertuples()] == [
            ("blowup", 24, STEPS - 1, severity)]


def test_the_run_page_draws_the_logged_reward(store):
    """The run page's reward trace reads the steps view: the logged 0.8 → 0.1."""
    from collapsewatch.dashboard import history, live, state
    from collapsewatch.dashboard.figures import TRACE_COLUMNS

    _run(store, "logged", True)
    state.configure(store)
    history.clear()
    try:
        trace = live.load("logged")["figure"]["data"][TRACE_COLUMNS.index("reward_mean")]
    finally:
        history.clear()
    assert list(trace["x"]) == list(range(STEPS)) and list(trace["y"]) == [_reward(s) for s in range(STEPS)]


def test_logged_aliases_fill_the_steps_view_and_observed_values_win(store):
    """Each key the alias table (ingest/keys.py) maps onto a stand-in metric fills it; ``scalars`` keeps the key as
    logged plus a second row under the catalogue name."""
    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))  # no reward, truncation or entropy
    with Monitor(store, "aliases", detectors=False) as mon:
        # step 0: TRL's keys; `rollout/reward_mean` is listed before `reward` (OpenRLHF logs both): 0.4 wins
        mon.observe(plain, step=0)
        mon.log(0, {"reward": 0.3, "rollout/reward_mean": 0.4, "frac_reward_zero_std": 0.25, "entropy": 1.5,
                    "completions/clipped_ratio": 0.5, "learning_rate": 1e-6})
        # step 1: the catalogue's own name beats an alias in the same call; HF's train/ prefix is read through
        mon.observe(plain, step=1)
        mon.log(1, {"reward_mean": 0.2, "reward": 0.9, "train/reward_std": 0.1})
        # step 2: logged only (no batch): verl's key
        mon.log(2, {"critic/score/mean": 0.7})
        # step 3: observed rewards [1, 0] → mean 0.5, sample std √((0.25 + 0.25) / 1) = √0.5, correct 0.5; truncated
        # [1, 0] → 0.5: all four win over the logged values
        mon.observe(TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3), rewards=torch.tensor([1.0, 0.0]),
                               truncated=torch.tensor([True, False])), step=3)
        mon.log(3, {"reward_mean": 0.1, "reward_std": 0.0, "correct_frac": 0.0, "truncated_frac": 0.0})
    con = connect(store)
    rows = con.execute("SELECT step, reward_mean, reward_std, correct_frac, zero_std_group_frac, truncated_frac, "
                       "entropy_mean, response_length_mean, lr FROM steps ORDER BY step").fetchall()
    assert rows[:3] == [
        (0, 0.4, None, None, 0.25, 0.5, 1.5, 3.0, 1e-6),  # response length observed: 3 model tokens each
        (1, 0.2, 0.1, None, None, None, None, 3.0, None),
        (2, 0.7, None, None, None, None, None, None, None)]
    assert rows[3] == (3, 0.5, pytest.approx(0.5 ** 0.5), 0.5, None, 0.5, None, 3.0, None)  # no group ids: NULL
    assert con.execute("SELECT step, reward_mean FROM step_metrics ORDER BY step").fetchall() == [
        (0, None), (1, None), (3, 0.5)]  # the probe's own table is untouched
    scalars = con.execute("SELECT step, key, value FROM scalars WHERE step < 2 ORDER BY step, key").fetchall()
    assert scalars == [
        (0, "completions/clipped_ratio", 0.5), (0, "entropy", 1.5), (0, "entropy_mean", 1.5),
        (0, "frac_reward_zero_std", 0.25), (0, "learning_rate", 1e-6), (0, "lr", 1e-6), (0, "reward", 0.3),
        (0, "reward_mean", 0.4), (0, "rollout/reward_mean", 0.4), (0, "truncated_frac", 0.5),
        (0, "zero_std_group_frac", 0.25),
        (1, "reward", 0.9), (1, "reward_mean", 0.2), (1, "reward_std", 0.1), (1, "train/reward_std", 0.1)]


def test_a_logged_tool_call_count_fills_tool_calls_mean_and_an_observed_one_wins(store):
    """TRL's ``tools/call_frequency`` (GRPO with tools) and Search-R1's ``env/number_of_valid_search`` stand in for
    ``tool_calls_mean`` where the step's batches carry no tool calls; the probe's own mean wins where they do."""
    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))
    with Monitor(store, "tools", detectors=False) as mon:
        mon.observe(plain, step=0)
        mon.log(0, {"tools/call_frequency": 1.5})
        mon.log(1, {"env/number_of_valid_search": 0.25})  # logged only
        # step 2: responses made 2 and 0 valid calls → mean 1.0, over the logged 3.0
        mon.observe(TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3), tool_calls=torch.tensor([2, 0])),
                    step=2)
        mon.log(2, {"tools/call_frequency": 3.0})
    con = connect(store)
    assert con.execute("SELECT step, tool_calls_mean FROM steps ORDER BY step").fetchall() == [
        (0, 1.5), (1, 0.25), (2, 1.0)]
    assert con.execute("SELECT step, seq_id, tool_calls FROM sequences WHERE step = 2 ORDER BY seq_id").fetchall() == [
        (2, 0, 2), (2, 1, 0)]


def test_logged_evaluation_keys_fill_eval_score_online_and_ingested(store, tmp_path):
    """Evaluation keys (ingest/keys.py ``eval_score``) fill ``eval_score`` at the steps that log them — through
    ``Monitor.log`` and through ingest alike — and the evaluation detector reads it there (and nowhere else)."""
    only = DetectorConfig(enabled=("evaluation",))
    # every 10 steps verl's per-source accuracies: mean of 0.5 and 0.7 = 0.6 up to step 20; then 0.1 and 0.3 = 0.2.
    # best@16 and format keys are not scores; val-aux/ is not read. Bar at 30: max(0.05, 0.25 × 0.6) = 0.15 (the
    # three points before it are equal: noise 0) ≤ 0.6 − 0.2 = 0.4 → a warning from 30, held at 40
    def evals(step: int) -> dict[str, float]:
        hi = step <= 20
        return {"val-core/aime/acc/mean@16": 0.5 if hi else 0.1, "val-core/math/acc/mean@16": 0.7 if hi else 0.3,
                "val-core/math/acc/best@16/mean": 0.9, "val/format_reward": 1.0, "val-aux/aime/acc/mean@16": 0.0}

    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))
    with Monitor(store, "online_eval", detectors=only) as mon:
        for step in range(41):
            mon.observe(plain, step=step)
            mon.log(step, {"reward": 0.5, **(evals(step) if step % 10 == 0 else {})})
    log = tmp_path / "eval.jsonl"
    log.write_text("".join(json.dumps({"step": s, "reward": 0.5, **(evals(s) if s % 10 == 0 else {})}) + "\n"
                           for s in range(41)))
    ingest_file(store, log, "ingested_eval", fmt="jsonl")
    con = connect(store)
    for run in ("online_eval", "ingested_eval"):
        scores = con.execute("SELECT step, eval_score FROM steps WHERE run = ? AND eval_score IS NOT NULL "
                             "ORDER BY step", [run]).fetchall()
        assert scores == [(0, pytest.approx(0.6)), (10, pytest.approx(0.6)), (20, pytest.approx(0.6)),
                          (30, pytest.approx(0.2)), (40, pytest.approx(0.2))]
        found = detect_runs(store, run=run, config=only)
        assert [(r.detector, r.phase, r.step_start, r.step_end, r.severity) for r in found.itertuples()] == [
            ("evaluation", "fall", 30, 40, "warning")]
    # the online detectors saw it too, at the step the evaluation was logged: the Monitor's stored episode
    assert con.execute("SELECT detector, phase, step_start, max(step_end), severity FROM events WHERE run = "
                       "'online_eval' GROUP BY ALL").fetchall() == [("evaluation", "fall", 30, 40, "warning")]


def test_an_evaluation_logged_after_its_steps_training_log_is_seen_online(store):
    """HF Trainer's order (TRL's callback passes it on): a step's training log, then — in a second call for the same
    step — its evaluation's metrics, before the next step. The online detectors read the evaluation at that step.
    Scores as in the test above (0.6 to step 20, 0.2 from 30; bar 0.15 ≤ 0.4) → a warning from 30, held at 40; the
    sizes (HF's round(eval_samples_per_second × eval_runtime) = round(31.949 × 10.0163) = round(320.01) = 320) fill
    eval_size, whose floor √(0.6 · 0.4 / 320) · 3 = 0.0822 stays under the margin 0.15."""
    only = DetectorConfig(enabled=("evaluation",))
    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))
    with Monitor(store, "hf_order", detectors=only) as mon:
        for step in range(41):
            mon.observe(plain, step=step)
            mon.log(step, {"reward": 0.5, "loss": 0.1})
            if step % 10 == 0:
                mon.log(step, {"eval_accuracy": 0.6 if step <= 20 else 0.2, "eval_runtime": 10.0163,
                               "eval_samples_per_second": 31.949, "eval_loss": 1.0})
    con = connect(store)
    assert con.execute("SELECT step, eval_score, eval_size FROM steps WHERE run = 'hf_order' AND eval_score IS NOT "
                       "NULL ORDER BY step").fetchall() == [(s, pytest.approx(0.6 if s <= 20 else 0.2), 320.0)
                                                             for s in range(0, 41, 10)]
    assert con.execute("SELECT detector, phase, step_start, max(step_end), severity FROM events WHERE run = "
                       "'hf_order' GROUP BY ALL").fetchall() == [("evaluation", "fall", 30, 40, "warning")]


def test_a_logged_nan_loss_or_grad_norm_is_seen_online_as_offline(store, tmp_path):
    """A NaN given to ``Monitor.log`` (what HF's Trainer logs) reaches the non-finite rule online as it does offline
    (``nonfinite.with_first_nonfinite`` = the store's ``STORED_FIRST_NONFINITE``): steps 0–19, loss 0.5 and grad_norm
    1.0 logged at every step (clean points), but grad_norm NaN alone at 5 → info, a skipped update (4 and 6 clean);
    loss and grad_norm NaN at 12 → the loss named first → critical at once (12 is 6 clean points after 5, past
    exit_patience 3: a new episode)."""
    only = DetectorConfig(enabled=("nonfinite",))
    nan = float("nan")

    def scalars(step: int) -> dict[str, float]:
        return {"loss": nan if step == 12 else 0.5, "grad_norm": nan if step in (5, 12) else 1.0}

    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))
    with Monitor(store, "online_nan", detectors=only) as mon:
        for step in range(20):
            mon.observe(plain, step=step)
            mon.log(step, scalars(step))
    log = tmp_path / "nan.jsonl"
    log.write_text("".join(json.dumps({"step": s, **scalars(s)}) + "\n" for s in range(20)))
    ingest_file(store, log, "ingested_nan", fmt="jsonl")
    want = [("nonfinite", 5, 5, "info"), ("nonfinite", 12, 12, "critical")]
    con = connect(store)
    assert con.execute("SELECT detector, step_start, max(step_end), max_by(severity, step_end) FROM events WHERE "
                       "run = 'online_nan' GROUP BY detector, step_start ORDER BY step_start").fetchall() == want
    found = detect_runs(store, run="ingested_nan", config=only)
    assert [(r.detector, r.step_start, r.step_end, r.severity) for r in found.itertuples()] == want
    assert "loss" in found.iloc[1]["message"] and "skips such an update" in found.iloc[0]["message"]


def test_a_monitor_logged_nan_is_stored_as_nan_and_judged_under_other_rules(store, tmp_path):
    """The store keeps what ``Monitor.log`` was given: NaN as NaN, None as NULL (scalars ``value``, and the ``steps``
    view built on it), so detection on read — under rules whose digest differs from the recorded events', here a
    detectors file — still finds the critical. Same run as above: grad_norm NaN alone at 5 → info, loss and grad_norm
    NaN at 12 → critical; plus ``loss`` None at 3 (not logged: NULL, not NaN, and no episode)."""
    nan = float("nan")
    plain = TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3))
    with Monitor(store, "mon_nan") as mon:
        for step in range(20):
            mon.observe(plain, step=step)
            mon.log(step, {"loss": nan if step == 12 else None if step == 3 else 0.5,
                           "grad_norm": nan if step in (5, 12) else 1.0})
    con = connect(store)
    got = con.execute("SELECT step, value IS NULL, isnan(value) FROM scalars WHERE run = 'mon_nan' AND key = 'loss' "
                      "AND step IN (3, 12) ORDER BY step").fetchall()
    assert got == [(3, True, None), (12, False, True)]
    assert con.execute("SELECT step, loss IS NULL, isnan(loss) FROM steps WHERE run = 'mon_nan' AND step IN (3, 12) "
                       "ORDER BY step").fetchall() == [(3, True, None), (12, False, True)]
    rules = tmp_path / "detectors.toml"
    rules.write_text('enabled = ["nonfinite", "grad"]\n')  # another digest: the stored events are not shown
    out = CliRunner().invoke(app, ["detect", str(store), "--run", "mon_nan", "--detectors", str(rules), "--csv"])
    assert out.exit_code == 0, out.output
    rows = [(r["detector"], int(r["step_start"]), r["severity"]) for r in csv.DictReader(io.StringIO(out.output))]
    assert rows == [("nonfinite", 5, "info"), ("nonfinite", 12, "critical")]


def test_a_run_that_only_logs_has_steps_in_runs(store):
    """``collapsewatch runs`` counted step rows only: a Monitor that only ``log``s showed no steps (the dashboard, on
    the ``steps`` view, counted them). Run ``logged``: reward_mean = step / 10 logged at steps 0–9, nothing observed →
    10 steps, last 9, last reward 0.9. Run ``mixed``: batches without rewards observed at steps 0–4, the same
    scalars logged at 0–9 → the steps view's 10 steps (0–9), last 9; no observed reward, so the logged 0.9."""
    with Monitor(store, "logged") as mon:
        for step in range(10):
            mon.log(step, {"reward_mean": step / 10})
    with Monitor(store, "mixed") as mon:
        for step in range(10):
            if step < 5:
                mon.observe(TokenBatch(logp=-torch.ones(2, 3), mask=torch.ones(2, 3)), step=step)
            mon.log(step, {"reward_mean": step / 10})
    out = CliRunner().invoke(app, ["runs", str(store), "--json"])
    assert out.exit_code == 0, out.output
    got = {r["run"]: (r["n_steps"], r["last_step"], r["last_reward"]) for r in json.loads(out.stdout)}
    assert got == {"logged": (10, 9, 0.9), "mixed": (10, 9, 0.9)}
    con = connect(store)
    assert con.execute("SELECT run, count(*), max(step) FROM steps GROUP BY run ORDER BY run").fetchall() == [
        ("logged", 10, 9), ("mixed", 10, 9)]  # what the dashboard counts
