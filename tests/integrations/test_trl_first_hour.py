"""What a TRL user meets first with ``watch``, on real ``GRPOTrainer`` runs (tiny offline model, CPU): the note that
an on-policy schedule records no ratios, and ``resume=True``, which continues a run or refuses, never duplicates."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("trl")

from collapsewatch import connect  # noqa: E402
from collapsewatch.integrations.trl import watch  # noqa: E402
from tests.integrations.trl_tiny import tiny_grpo_trainer  # noqa: E402


def _notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "on-policy" in r.getMessage()]


def test_watch_says_once_that_an_on_policy_run_records_no_ratios(tmp_path, caplog):
    # TRL's defaults here: gradient_accumulation_steps = 1, steps_per_generation = 1 (it defaults to the former),
    # num_iterations = 1: 1 % (1 · 1) == 0, so every step is on-policy and TRL computes no old log-probs
    trainer = tiny_grpo_trainer(str(tmp_path / "on"), max_steps=2)
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        watch(trainer, tmp_path / "store", "on")
        assert len(_notes(caplog)) == 1  # said at watch() time, before train()
        trainer.train()
    (note,) = _notes(caplog)  # and only once
    for words in ("'on'", "ratio", "NULL", "num_iterations > 1", "steps_per_generation > gradient_accumulation_steps",
                  "entropy", "sentinels"):
        assert words in note, words
    # what it says holds in the store: no ratio quantile or clip fraction on any step, entropy on every one
    with connect(tmp_path / "store") as con:
        rows = con.execute("SELECT ratio_p05_pos, clip_region_frac, ppo_kl, entropy_mean FROM steps "
                           "WHERE run = 'on' ORDER BY step").fetchall()
    assert len(rows) == 2 and all(r[:3] == (None, None, None) and r[3] is not None for r in rows)


def test_no_note_when_the_schedule_makes_ratios(tmp_path, caplog):
    # steps_per_generation = 2 with gradient_accumulation_steps = 1: 1 % (2 · 1) = 1 ≠ 0, off-policy
    trainer = tiny_grpo_trainer(str(tmp_path / "off"), steps_per_generation=2)
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        watch(trainer, tmp_path / "store", "off")
    assert _notes(caplog) == []
