"""The ``collapsewatch/…`` series in verl's own step metrics: verl's actor update on CPU (verl_cpu.py) with the driver
hook, the metrics ``_update_actor`` returns reduced and logged as ``RayPPOTrainer.fit`` does (``reduce_metrics``, then
verl's real ``Tracking``, file backend), the JSONL read back with ingest's reader and held against the store the
worker wrote. Runs in .venv-verl (``make test``)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="real-verl tests run in .venv-verl (make verl-env; make test runs them)")

import verl_cpu  # noqa: E402  (tests/integrations/verl_cpu.py; verl ships its own top-level `tests` package)
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402
from verl.utils.metric import reduce_metrics  # noqa: E402
from verl.utils.tracking import Tracking  # noqa: E402

from collapsewatch import connect  # noqa: E402
from collapsewatch.ingest import ingest_file  # noqa: E402
from collapsewatch.integrations import verl as cw_verl  # noqa: E402
from collapsewatch.integrations import verl_driver  # noqa: E402
from collapsewatch.series import COLUMNS, PREFIX, SEVERITY_KEY, STEP_KEY  # noqa: E402

REWARDS = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # 4 prompts × n = 2: groups mixed, all-1, all-0, mixed


def _fit(monkeypatch, store, tmp_path, steps: int = 3, flush_after: tuple[int, ...] = ()) -> tuple:
    """``steps`` verl steps, the last one the run's last (its worker closes its Monitor), each step's metrics logged
    through verl's Tracking as fit() logs them; after the steps in ``flush_after`` the worker's Monitor is flushed (as
    its recorder does every 5 s in a real run, where a step takes longer). Returns (the JSONL file, the tap)."""
    tap = verl_cpu.cpu_tap(monkeypatch, store, "verl-series")
    monkeypatch.setattr(RayPPOTrainer, "_update_actor", RayPPOTrainer._update_actor)  # undone after the test
    verl_driver.install(RayPPOTrainer)
    log = tmp_path / "verl.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    tracker = Tracking(project_name="p", experiment_name="e", default_backend="file")
    model = verl_cpu.tiny_model()
    # 8 sequences, 2 mini-batches of 2 prompts × 2: the second optimizer step of each step is off-policy (ratios)
    trainer = verl_cpu.driver(verl_cpu.training_worker(model, verl_cpu.actor_config(2, 2, 2)), n=2, mini=2,
                              total_steps=steps)
    try:
        for step in range(1, steps + 1):
            trainer.global_steps = step
            out = trainer._update_actor(verl_cpu.rollout_batch(model, REWARDS, n=2, seed=step))
            tracker.log(data=reduce_metrics(out.meta_info["metrics"]), step=step)
            if step in flush_after:
                tap.monitor.flush()
    finally:
        if tap._hook is not None:
            tap._hook.remove()
    return log, tap


def test_the_series_pass_through_verls_tracking(monkeypatch, store, tmp_path):
    log, tap = _fit(monkeypatch, store, tmp_path, flush_after=(1,))
    assert tap.errors == 0 and tap.monitor is None  # closed after the last step, finished
    back = tmp_path / "back"
    assert ingest_file(back, log, "tracked").format == "jsonl"
    rows = connect(back).execute("SELECT step, key, value FROM scalars WHERE key LIKE 'collapsewatch/%'").fetchall()
    logged: dict[int, dict[str, float]] = {}
    for step, key, value in rows:
        logged.setdefault(step, {})[key] = value
    con = connect(store)
    cols = ", ".join(COLUMNS)
    held = {r[0]: dict(zip(COLUMNS, r[1:], strict=True))
            for r in con.execute(f"SELECT step, {cols} FROM steps WHERE rank = 0 ORDER BY step").fetchall()}
    assert sorted(held) == [1, 2, 3]
    # by hand, the last step's log: the worker closed its Monitor inside that step's update, so step 3 is in the
    # store when the driver reads it: S = 3 at verl's step 3, every value step 3's (every step has ratios, from its
    # second mini-batch), zero-std share 2 of 4 groups (all-1 and all-0) = 0.5, no sentinels configured (left out).
    # Severity 1 = info: rows 0, 3 and 6 of each batch fill the 6-token budget, truncated_frac 3/8 ≥ 0.3 at every
    # step from the first: a length budget (info, not a blow-up: truncation did not rise), opening at step 3
    # (confirm_steps = 3)
    last = logged[3]
    assert last[STEP_KEY] == 3.0 and last[PREFIX + "zero_std_group_frac"] == 0.5 and last[SEVERITY_KEY] == 1.0
    assert con.execute("SELECT detector, phase, step_start, severity FROM events").fetchall() == [
        ("length", "budget", 3, "info")]
    assert not any(k.startswith(PREFIX + "sentinel") for k in last)
    for col in ("ratio_p05_pos", "ratio_p50_pos", "entropy_mean_correct", "entropy_mean_incorrect",
                "zero_std_group_frac"):
        assert held[3][col] is not None and last[PREFIX + col] == held[3][col], col  # JSON keeps float64
    # the earlier logs: at step 1 the store holds no step yet (nothing added); step 1, flushed after its log, is
    # what step 2's log carries (S = 1 < 2, step 1's values, no event yet: severity 0); step 2's values never go out,
    # as step 3's are newer by the next log
    assert sorted(logged) == [2, 3]
    assert logged[2][STEP_KEY] == 1.0 and logged[2][SEVERITY_KEY] == 0.0
    for col in ("ratio_p05_pos", "ratio_p50_pos", "entropy_mean_correct", "entropy_mean_incorrect"):
        assert logged[2][PREFIX + col] == held[1][col], col


def test_log_signals_0_keeps_verls_metrics_as_they_were(monkeypatch, store, tmp_path):
    monkeypatch.setenv(cw_verl.ENV_SIGNALS, "0")
    log, _ = _fit(monkeypatch, store, tmp_path, steps=1)
    assert b"collapsewatch/" not in log.read_bytes()
    assert connect(store).execute("SELECT count(*) FROM steps").fetchone() == (1,)  # the store was written
