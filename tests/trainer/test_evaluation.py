"""The built-in trainer's evaluation: held-out questions every ``eval_every`` steps, logged as eval/reward and
eval/accuracy (→ ``eval_score``), without touching the training's random streams."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest

from collapsewatch import connect
from collapsewatch.trainer import setup
from collapsewatch.trainer.config import load_config
from collapsewatch.trainer.evaluation import unscored
from collapsewatch.trainer.loop import train

SMALL = ["prompts_per_rollout=2", "group_size=4", "max_turn_tokens=24", "max_response_tokens=120"]
TIMED = ("step_time", "rollout_time", "sentinel_time", "weight_sync_time", "ts")
"""Wall times: the only step values two identical runs may differ in."""


def _steps(store, run: str) -> list[dict]:
    df = connect(store).execute("SELECT * FROM steps WHERE run = ? ORDER BY step", [run]).df()
    return df.drop(columns=[c for c in df.columns if c in TIMED or c.startswith("time")]).to_dict("records")


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_evaluations_are_logged_and_leave_training_as_it_was(store):
    # 3 steps with eval_every 2: evaluations at steps 0 and 2 (the policy each starts from), 6 held-out questions
    plain = load_config(overrides=SMALL, steps=3, store=str(store), run="plain", progress=False)
    evald = load_config(overrides=[*SMALL, "eval_every=2", "eval_tasks=6"], steps=3, store=str(store), run="evald",
                        progress=False)
    train(plain)
    train(evald)
    con = connect(store)
    rows = con.execute("SELECT step, key, value FROM scalars WHERE run = 'evald' AND key IN "
                       "('eval/reward', 'eval/accuracy', 'eval/num_examples', 'eval_score', 'eval_size') "
                       "ORDER BY step, key").fetchall()
    assert [(s, k) for s, k, _ in rows] == [(s, k) for s in (0, 2) for k in (
        "eval/accuracy", "eval/num_examples", "eval/reward", "eval_score", "eval_size")]
    by = {(s, k): v for s, k, v in rows}
    for s in (0, 2):
        # the set's size: the 6 questions asked, logged and read as eval_size
        assert by[(s, "eval/num_examples")] == by[(s, "eval_size")] == 6.0
        # accuracy: a share of 6 answers (k / 6), the eval_score (the accuracy family wins over the reward)
        assert by[(s, "eval_score")] == by[(s, "eval/accuracy")]
        assert round(by[(s, "eval/accuracy")] * 6, 9) == round(by[(s, "eval/accuracy")] * 6)
        assert 0.0 <= by[(s, "eval/accuracy")] <= 1.0 and by[(s, "eval/reward")] >= by[(s, "eval/accuracy")] - 1e-9
    assert by[(0, "eval/accuracy")] > 0  # the warm-started agent answers some held-out questions right
    # the training itself is the same run: every stored step value but wall times and the evaluation's own columns
    a, b = _steps(store, "plain"), _steps(store, "evald")
    assert len(a) == len(b) == 3
    for x, y in zip(a, b, strict=True):
        diff = {c: (x[c], y[c]) for c in x if c not in ("run", "eval_score", "eval_size") and not _same(x[c], y[c])}
        assert not diff, f"step {x['step']}: {diff}"
    # the steps view: the score at the evaluated steps, NULL (NaN in the frame) at step 1
    assert b[0]["eval_score"] == by[(0, "eval_score")] and b[2]["eval_score"] == by[(2, "eval_score")]
    assert math.isnan(b[1]["eval_score"]) and all(math.isnan(x["eval_score"]) for x in a)


class _Ungraded:
    """A held-out question's episode whose grader fails: the built-in search env's turns, each reward NaN."""

    def __init__(self, env) -> None:
        self.env, self.task = env, env.task

    def step(self, text: str):
        return dataclasses.replace(self.env.step(text), reward=math.nan)

    @property
    def reward(self) -> float:
        return math.nan


def test_an_evaluation_with_no_finite_reward_logs_no_score_and_warns_once(store, monkeypatch, caplog):
    # the real trainer on the tiny built-in model, its environment the built-in one except that the held-out
    # questions (what evaluations ask; sentinels off) get NaN rewards: the training questions are graded as usual
    real = setup.make_env_factory

    def held_out_ungraded(kb, config=None):
        make, held = real(kb, config), {t.id for t in kb.split()[1]}
        return lambda task: _Ungraded(make(task)) if task.id in held else make(task)

    monkeypatch.setattr(setup, "make_env_factory", held_out_ungraded)
    cfg = load_config(overrides=[*SMALL, "eval_every=2", "eval_tasks=4", "sentinels=0"], steps=3, store=str(store),
                      run="ungraded", progress=False)
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        train(cfg)
    con = connect(store)
    rows = con.execute("SELECT step, key, value FROM scalars WHERE run = 'ungraded' AND key LIKE 'eval%' "
                       "ORDER BY step, key").fetchall()
    # evaluations at steps 0 and 2 (eval_every 2 over steps 0..2): 0 of the 4 answers scored, so no eval/reward or
    # eval/accuracy (it logged eval/reward NaN and eval/accuracy 0.0, read as an eval_score of 0), no eval_score and
    # no eval_size (0 examples is no size)
    assert [(s, k) for s, k, _ in rows] == [(s, k) for s in (0, 2) for k in ("eval/num_examples", "eval/time")]
    assert [v for _, k, v in rows if k == "eval/num_examples"] == [0.0, 0.0]
    assert con.execute("SELECT count(*) FROM steps WHERE run = 'ungraded' AND eval_score IS NOT NULL").fetchone() == (0,)
    # said once, naming the first such evaluation's step and its 4 answers
    said = [r.getMessage() for r in caplog.records if "no finite reward" in r.getMessage()]
    assert said == [f"collapsewatch: {unscored(0, 4)}"]
    assert said[0].startswith("collapsewatch: the evaluation at step 0 got no finite reward for any of its 4 answers")
    # the training questions were graded: finite rewards at each step
    assert all(math.isfinite(r) for (r,) in con.execute("SELECT reward_mean FROM steps WHERE run = 'ungraded'"
                                                        ).fetchall())


def test_eval_settings_are_checked():
    with pytest.raises(ValueError, match="eval_every"):
        load_config(overrides=["eval_every=-1"])
    with pytest.raises(ValueError, match="eval_tasks"):
        load_config(overrides=["eval_every=5", "eval_tasks=0"])
