"""The ``collapsewatch/…`` series in a TRL run's own trackers: the shared 3-step run of tests/ingest/trl_logs.py is
watched by collapsewatch (``watch_run``) and reports to TensorBoard, W&B (offline), MLflow (folder store) and trackio;
each tracker's files are read back with ingest's own readers and the series hold the values the run's store holds.
The run's ``watch`` also has the W&B sink (``sinks=["wandb"]``): it writes its alert, severity and verdict into the
run TRL's ``WandbCallback`` opened — one W&B run, holding TRL's metrics, the series and the sink's records.

What the run's store holds, by hand (trl_logs.py): ``steps_per_generation=2`` generates at steps 1 and 3, which are
on-policy (ratio columns NULL), step 2 trains the same rollout after an update (ratios exist); sentinels are stored at
steps 1 and 3; the reward (share of ``a`` in a completion) is below the success threshold 1.0 for every completion,
so no response is correct and ``entropy_mean_correct`` is NULL everywhere; the starvation detector (warning bar 0)
opens a warning episode at step 3. The last emission is train()'s summary log at tracker step 3, with S = 3."""

from __future__ import annotations

import json

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file
from collapsewatch.series import COLUMNS, SERIES, SEVERITY_KEY, SEVERITY_LEVEL, STEP_KEY
from tests.ingest.trl_logs import RULES

# tracker → (its files in the run's OUT, the prefix HF's callback puts before a key, float32 or float64)
TRACKERS = {"tensorboard": ("tb", "train/", 1e-6), "wandb": ("wandb", "train/", 0.0),
            "mlflow": ("mlruns", "", 0.0), "trackio": ("trackio/cw.db", "train/", 0.0)}
KEYS = {s.key: s.column for s in SERIES}


def _emissions(store, prefix: str) -> list[tuple[int, dict[str, float]]]:
    """(tracker step, {series key: value}) of every ingested row holding collapsewatch/step, in order. trackio numbers
    its own log calls: the tracker step is then the row's train/global_step (what HF's callback logs in every row)."""
    rows = connect(store).execute("SELECT step, key, value FROM scalars ORDER BY step").fetchall()
    by_step: dict[int, dict[str, float]] = {}
    for step, key, value in rows:
        by_step.setdefault(step, {})[key] = value
    out = []
    for step, values in by_step.items():
        if prefix + STEP_KEY in values:
            tracker_step = int(values.get("train/global_step", step))
            out.append((tracker_step, {k: values[prefix + k] for k in KEYS if prefix + k in values}))
    return out


@pytest.fixture(scope="module")
def held(trl_logs) -> tuple[dict[int, dict[str, float]], dict[int, int]]:
    """What the run's store holds: rank 0's non-NULL series columns by step, and the severity number at each step
    from its raw event rows (every write of an episode, online)."""
    con = connect(trl_logs / "store")
    cols = ", ".join(COLUMNS)
    values = {}
    for row in con.execute(f"SELECT step, {cols} FROM steps WHERE run = 'tiny' AND rank = 0 ORDER BY step").fetchall():
        values[row[0]] = {c: v for c, v in zip(COLUMNS, row[1:], strict=True) if v is not None}
    events = con.execute("SELECT step_end, severity FROM read_parquet(?)",
                         [str(trl_logs / "store" / "tiny" / "events" / "*.parquet")]).fetchall()
    severity = {s: max([SEVERITY_LEVEL[sev] for end, sev in events if end <= s], default=0) for s in values}
    return values, severity


def _expected(emitted_steps: list[int], values, severity) -> list[dict[str, float]]:
    """The rule (collapsewatch/series.py), derived again from the store: at each emission with S, each column's newest
    value at a step ≤ S, unless a value of that step (or a newer one) went out before; the severity at S."""
    sent: dict[str, int] = {}
    out = []
    for s in emitted_steps:
        want = {STEP_KEY: float(s)}
        for key, col in ((k, c) for k, c in KEYS.items() if c is not None):
            have = [(step, row[col]) for step, row in values.items() if step <= s and col in row]
            if have and max(have)[0] > sent.get(col, -1):
                sent[col], want[key] = max(have)
        want[SEVERITY_KEY] = float(severity[s])
        out.append(want)
    return out


@pytest.mark.parametrize("tracker", list(TRACKERS))
def test_each_tracker_holds_the_series_the_store_holds(trl_logs, held, store, tracker):
    rel, prefix, rel_tol = TRACKERS[tracker]
    assert ingest_file(store, trl_logs / rel, "t").format == tracker
    emitted = _emissions(store, prefix)
    values, severity = held
    # by hand, the last emission (the summary log at tracker step 3, step 3 finished): ratios from step 2, the only
    # off-policy step; sentinels, entropy of the incorrect responses, zero-std share from step 3; severity 2 =
    # warning (the starvation episode of step 3); no correct response at all, so its entropy is left out, not 0
    last_step, last = emitted[-1]
    assert last_step == 3 and last[STEP_KEY] == 3.0 and last[SEVERITY_KEY] == 2.0
    assert "collapsewatch/entropy_mean_correct" not in last
    assert all(row.get("entropy_mean_correct") is None for row in values.values())
    assert values[1].keys() >= {"sentinel_logp_correct_mean"} and "ratio_p05_pos" not in values[1]
    assert "sentinel_logp_correct_mean" not in values[2] and "ratio_p05_pos" in values[2]
    for col, step in (("ratio_p05_pos", 2), ("ratio_p50_pos", 2), ("sentinel_logp_correct_mean", 3),
                      ("sentinel_logp_incorrect_mean", 3), ("entropy_mean_incorrect", 3), ("zero_std_group_frac", 3)):
        assert last["collapsewatch/" + col] == pytest.approx(values[step][col], rel=rel_tol, abs=1e-12), col
    # every emission (earlier ones too: how far the recorder thread got by each log call is up to the scheduler)
    # is the rule applied to the store, S never ahead of the logged step
    assert all(int(vals[STEP_KEY]) <= step for step, vals in emitted)
    assert [step for step, _ in emitted] == sorted({step for step, _ in emitted})  # one emission per tracker step
    want = _expected([int(vals[STEP_KEY]) for _, vals in emitted], values, severity)
    for (step, got), exp in zip(emitted, want, strict=True):
        assert got.keys() == exp.keys(), (tracker, step)
        for key, value in exp.items():
            assert got[key] == pytest.approx(value, rel=rel_tol, abs=1e-12), (tracker, step, key)


def test_the_series_stay_out_of_trls_own_log_history(trl_logs):
    # HF appends a copy of the logs to state.log_history before on_log, so trainer_state.json keeps TRL's keys only,
    # and the store's scalars (what on_log stored of TRL's logs) hold no collapsewatch/ key either
    text = (trl_logs / "trl" / "checkpoint-3" / "trainer_state.json").read_text()
    assert "collapsewatch/" not in text
    con = connect(trl_logs / "store")
    assert con.execute("SELECT count(*) FROM scalars WHERE key LIKE 'collapsewatch/%'").fetchone() == (0,)


def test_wandb_sink_writes_into_trls_own_run(trl_logs):
    """RULES: only the starvation detector, its warning bar at 0: a share of zero-std groups is always ≥ 0, so the
    rule holds at every step and opens one warning episode at the 3rd (a level of 3 points; cold_start off: the tiny
    model earns nothing; tests/integrations/test_trl_on_event.py) — one W&B alert (level WARN), severity 2 at that
    step."""
    from collapsewatch.alerts import event_headline
    from collapsewatch.detectors import DetectorConfig
    from collapsewatch.ingest.wandb_run import Parser, read
    from collapsewatch.sinks import SEVERITY_SCALAR, run_verdict

    seen = json.loads((trl_logs / "seen.json").read_text())  # the events watch's on_event was given
    [folder] = list((trl_logs / "wandb").glob("offline-run-*"))  # one run: TRL's, with the sink's records in it
    parser = Parser()
    rows = {r.step: r.values for r in read(folder, parser=parser)}
    assert any("train/loss" in v or "train/reward" in v for v in rows.values())  # TRL's own metrics
    first = dict(seen[0], run="tiny")
    assert first["severity"] == "warning" and first["step_start"] == first["step_end"]
    assert parser.alerts == [{"level": "WARN", "text": event_headline(first), "wait_duration": "60000",
                              "title": f"collapsewatch warning: tiny starvation/starvation from step "
                                       f"{first['step_start']}"}]
    assert any(v.get(SEVERITY_SCALAR) == 2 for v in rows.values())
    verdict = run_verdict(trl_logs / "store", "tiny", DetectorConfig.from_dict(RULES))  # the run's own rules
    assert parser.summary["collapsewatch/verdict"] == verdict["status"]
    assert parser.summary["collapsewatch/verdict_sentence"] == verdict["sentence"]
