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


def _counts(store) -> tuple[list[tuple], list[tuple]]:
    with connect(store) as con:
        seqs = con.execute("SELECT step, count(*), count(DISTINCT seq_id) FROM sequences WHERE run = 'r' "
                           "GROUP BY step ORDER BY step").fetchall()
        loss = con.execute("SELECT step, count(*) FROM scalars WHERE run = 'r' AND key = 'loss' "
                           "GROUP BY step ORDER BY step").fetchall()
    return seqs, loss


def test_resume_continues_after_the_checkpoint_or_refuses(tmp_path):
    store, out = tmp_path / "store", str(tmp_path / "out")
    # 3 steps, a checkpoint after step 2; each step trains one generation of 4 completions (batch 4, G = 4)
    first = tiny_grpo_trainer(out, max_steps=3, save_strategy="steps", save_steps=2)
    watch(first, store, "r")
    first.train()
    before = _counts(store)
    assert before == ([(1, 4, 4), (2, 4, 4), (3, 4, 4)], [(1, 1), (2, 1), (3, 1)])

    # the same name without resume: refused by watch() itself (before train()), and the message says how to continue
    named = tiny_grpo_trainer(str(tmp_path / "named"), max_steps=3)
    with pytest.raises(ValueError, match=r"already exists.*watch\(\.\.\., resume=True\)"):
        watch(named, store, "r")

    # a fresh trainer (no checkpoint loaded) would start at step 1 and write steps 1-3 over: refused, store untouched
    fresh = tiny_grpo_trainer(str(tmp_path / "fresh"), max_steps=3)
    watch(fresh, store, "r", resume=True)
    with pytest.raises(ValueError, match=r"holds steps up to 3 .*resume_from_checkpoint"):
        fresh.train()
    assert _counts(store) == before
    with connect(store) as con:
        assert con.execute("SELECT status FROM runs WHERE run = 'r'").fetchall() == [("finished",)]

    # from the step-2 checkpoint, to step 4: step 3 is replayed (replacing the stored one), step 4 is new; each step
    # once, 4 sequences and one loss row each, and no sequence id of the new steps reuses one of steps 1-2
    again = tiny_grpo_trainer(out, max_steps=4)
    watch(again, store, "r", resume=True)
    again.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    assert _counts(store) == ([(1, 4, 4), (2, 4, 4), (3, 4, 4), (4, 4, 4)], [(1, 1), (2, 1), (3, 1), (4, 1)])
    with connect(store) as con:
        assert con.execute("SELECT count(DISTINCT seq_id) FROM sequences WHERE run = 'r'").fetchone() == (16,)
