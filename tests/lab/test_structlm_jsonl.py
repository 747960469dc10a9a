"""lab/public/structlm_jsonl.py: franalli/struct-lm's train_log.jsonl (TRL dicts among config, check and backfilled
records) → one row per step that ingest reads."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from collapsewatch.ingest import ingest_file
from collapsewatch.store import connect

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"
spec = importlib.util.spec_from_file_location("structlm_jsonl", PUBLIC / "structlm_jsonl.py")
structlm_jsonl = importlib.util.module_from_spec(spec)
assert spec.loader is not None
spec.loader.exec_module(structlm_jsonl)

# the layout of the authors' file, shortened: a config and a check record at step 0, TRL's dicts at steps 1–2, a resume
# (the config again at step 0, a step-1 row backfilled from saved rollouts, a "resumed" check at 2), step 3's dict and
# its evaluation, a stop check
LOG = [
    {"step": 0, "dataset_hash": "4db8", "train_tasks": 622, "val_tasks": 50},
    {"step": 0, "check": "trainable_params", "trainable": 178257920, "passed": True},
    {"step": 1, "loss": 0.01, "reward": 0.5, "entropy": 0.9, "completions/mean_length": 40.0},
    {"step": 2, "loss": 0.02, "reward": 0.6, "entropy": 0.8, "completions/mean_length": 42.0},
    {"step": 0, "dataset_hash": "4db8", "train_tasks": 622, "val_tasks": 50},
    {"step": 1, "source": "rollouts, backfilled", "zero_spread": 0.25},
    {"step": 2, "check": "resumed"},
    {"step": 3, "loss": 0.03, "reward": 0.7, "entropy": 0.3, "completions/mean_length": 45.0},
    {"step": 3, "eval_loss": 0.1, "val_pass@1": 0.4},
    {"step": 3, "check": "stop"},
]


def test_config_check_and_backfilled_records_are_left_out_and_the_rest_merged_by_step(tmp_path, store):
    src, out = tmp_path / "train_log.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in LOG))
    assert structlm_jsonl.main([str(src), str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    # steps 1, 2, 3 once each, ascending (read as they are, the second step-0 config rewinds the run and ingest would
    # keep only step 3); step 3 holds its TRL dict and its evaluation; no config / check / backfill key survives
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[2] == {"step": 3, "loss": 0.03, "reward": 0.7, "entropy": 0.3, "completions/mean_length": 45.0,
                       "eval_loss": 0.1, "val_pass@1": 0.4}
    assert not any(k in r for r in rows for k in ("dataset_hash", "check", "source", "zero_spread"))
    ingest_file(store, out, "sl")
    # TRL's keys fill the catalogue: reward → reward_mean, entropy → entropy_mean, completions/mean_length →
    # response_length_mean
    assert connect(store).execute("SELECT step, reward_mean, entropy_mean, response_length_mean FROM steps "
                                  "ORDER BY step").fetchall() == [(1, 0.5, 0.9, 40.0), (2, 0.6, 0.8, 42.0),
                                                                  (3, 0.7, 0.3, 45.0)]


def test_the_committed_runs_end_at_the_authors_stop_steps(tmp_path):
    # docs/stage5.md: the two seeds stopped at steps 52 and 65; each file holds a step-0 evaluation before training,
    # so 53 and 66 steps, with TRL's loss on every training step (52 and 65 of them)
    for run, last in (("struct-lm-grpo", 52), ("struct-lm-grpo-seed1", 65)):
        out = tmp_path / f"{run}.jsonl"
        assert structlm_jsonl.main([str(PUBLIC / "raw" / f"{run}.structlm.jsonl.gz"), str(out)]) == 0
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert ([r["step"] for r in rows] == list(range(last + 1))
                and sum("loss" in r for r in rows) == last), run
