"""lab/public/taoger_metrics.py: Taoger-Xu/assignment5-alignment's metrics.jsonl → the JSONL `ingest` reads.
Expected rows are written out by hand from the rows in each test (lines of its offpolicy_naive_seed2 and
offpolicy_clip_seed0 logs, copied as they are)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "public" / "taoger_metrics.py"
_spec = importlib.util.spec_from_file_location("taoger_metrics", SCRIPT)
taoger_metrics = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(taoger_metrics)

VAL0 = ('{"step": 0, "split": "val", "total_reward": 0.0, "format_reward": 0.5703125, "answer_reward": 0.0, '
        '"accuracy": 0.0, "avg_response_length": 302.31640625}')
TRAIN1 = ('{"step": 1, "split": "train", "clip_count": 0.0, "clip_total": 0.0, "clip_fraction": 0.0, "loss": '
          '-0.006473884917795658, "gradient_norm": 0.11865234375, "token_entropy": 0.03015933185815811, '
          '"num_response_tokens": 20.59375, "num_sequences": 8.0, "num_active_sequences": 0.25, '
          '"entropy_num_sequences": 0.25, "mean_reward": 0.00390625, "mean_format_reward": 0.5078125, '
          '"mean_answer_reward": 0.00390625, "mean_advantage": 0.0, "mean_group_baseline": 0.00390625, '
          '"mean_group_normalizer": 0.011048543266952038, "optimizer_updates": 32.0}')
# clip_seed0's step 2: no sequence active, so loss, gradient norm and entropy are the logger's zeros
IDLE2 = ('{"step": 2, "split": "train", "clip_count": 0.0, "clip_total": 0.0, "clip_fraction": 0.0, "loss": 0.0, '
         '"gradient_norm": 0.0, "token_entropy": 0.0, "num_response_tokens": 0.0, "num_sequences": 8.0, '
         '"num_active_sequences": 0.0, "entropy_num_sequences": 0.0, "mean_reward": 0.0, "mean_format_reward": '
         '0.5234375, "mean_answer_reward": 0.0, "mean_advantage": 0.0, "mean_group_baseline": 0.0, '
         '"mean_group_normalizer": 0.0, "optimizer_updates": 32.0}')


def test_train_and_val_rows_map_to_the_catalogue():
    steps = taoger_metrics.convert([json.loads(x) for x in (VAL0, TRAIN1, IDLE2)])
    assert [s["step"] for s in steps] == [0, 1, 2]
    val, train, idle = steps
    assert val == {"step": 0, "val/total_reward": 0.0, "val/format_reward": 0.5703125, "val/answer_reward": 0.0,
                   "val/accuracy": 0.0, "val/avg_response_length": 302.31640625}
    # mean_reward → reward_mean, mean_answer_reward → correct_frac, token_entropy → entropy_mean, gradient_norm →
    # grad_norm; zero_std_group_frac = 1 − 0.25 / 8 = 0.96875 (a quarter of a sequence active per update of 8)
    assert (train["reward_mean"], train["correct_frac"], train["entropy_mean"], train["grad_norm"], train["loss"],
            train["zero_std_group_frac"]) == (0.00390625, 0.00390625, 0.03015933185815811, 0.11865234375,
                                              -0.006473884917795658, 0.96875)
    assert train["train/clip_fraction"] == 0.0 and "train/mean_reward" not in train
    # nothing active: every group all-equal (1 − 0 / 8 = 1.0), the entropy's 0 left out, loss and norm kept (no update)
    assert idle["zero_std_group_frac"] == 1.0 and "entropy_mean" not in idle
    assert (idle["loss"], idle["grad_norm"], idle["reward_mean"]) == (0.0, 0.0, 0.0)


def test_a_row_without_a_split_is_refused():
    with pytest.raises(ValueError, match="line 2: a row needs a step and split 'train' or 'val', not 'test'"):
        taoger_metrics.convert([json.loads(VAL0), {"step": 3, "split": "test"}])


def test_the_converted_run_fills_the_catalogue_columns(tmp_path):
    src, out = tmp_path / "metrics.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join((VAL0, TRAIN1, IDLE2)) + "\n")
    assert taoger_metrics.main([str(src), str(out)]) == 0
    store = tmp_path / "store"
    done = ingest_file(store, out, "tg")
    assert (done.format, done.steps) == ("jsonl", 3)
    got = connect(store).execute("SELECT step, reward_mean, correct_frac, zero_std_group_frac, entropy_mean "
                                 "FROM steps WHERE run = 'tg' ORDER BY step").fetchall()
    assert got == [(0, None, None, None, None), (1, 0.00390625, 0.00390625, 0.96875, 0.03015933185815811),
                   (2, 0.0, 0.0, 1.0, None)]
