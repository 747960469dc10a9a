"""The lab's scoring arithmetic on hand-made label sets, and the reward-collapse rule on hand-made series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collapsewatch.lab.bench import classify
from collapsewatch.lab.labels import (
    RunLabel,
    label_run,
    read_label_file,
    reward_collapse,
    reward_level,
    start_collapse,
)
from collapsewatch.lab.score import score
from collapsewatch.reward import undecided

# a, b: lld drills (onset 10, 50 steps; a collapses at 30); c: isdd drill (onset 20, 40 steps);
# h: healthy (100 steps); u: undrilled with a collapse at 60 (not healthy: its flags are not false flags)
LABELS = [RunLabel("a", "lld", 10, 30, 0, 49), RunLabel("b", "lld", 10, None, 0, 49),
          RunLabel("c", "isdd", 20, None, 0, 39), RunLabel("h", "", None, None, 0, 99),
          RunLabel("u", "", None, 60, 0, 99)]
FLAGS = pd.DataFrame([
    ("a", "lld", "steady_decay", "warning", 5), ("a", "lld", "steady_decay", "warning", 14),
    ("a", "lld", "accelerated_collapse", "critical", 25), ("b", "lld", "stagnation", "info", 12),
    ("c", "lld", "steady_decay", "warning", 3), ("h", "lld", "stagnation", "warning", 50),
    ("u", "lld", "accelerated_collapse", "critical", 70),
], columns=["run", "detector", "phase", "severity", "step_start"])
NEAR_BEST = {"a": {25}, "u": {70}}


def _row(table: pd.DataFrame, phase: str, severity: str) -> dict:
    sel = table[(table["detector"] == "lld") & (table["phase"] == phase) & (table["severity"] == severity)]
    assert len(sel) == 1
    return sel.iloc[0].to_dict()


def test_score_any_phase_by_severity():
    table = score(FLAGS, LABELS, NEAR_BEST)
    assert set(table.loc[table["detector"] == "lld", "drill"]) == {"lld"}  # lld's own drill only
    isdd = table[(table["detector"] == "isdd") & (table["severity"] == "info")].iloc[0]
    assert (isdd["drill"], isdd["drilled_runs"], isdd["flagged_share"]) == ("isdd", 1, 0.0)  # c: no isdd flag
    warn = _row(table, "*", "warning")
    # a: flags ≥ warning start at 5, 14, 25 → first ≥ onset 10 is 14: delay 4, lead 30 − 14 = 16;
    # b: only an info flag → not flagged. share 1/2.
    # before onset: a@5 and c@3 over pre-onset steps 10 + 10 + 20 = 40 → 2/40 × 1000 = 50;
    # healthy: h@50 over 100 steps → 10 per 1k; u is not healthy. Near the best: a@25 and u@70 (both ≥ warning).
    assert warn == {"detector": "lld", "phase": "*", "severity": "warning", "drill": "lld", "drilled_runs": 2,
                    "flagged_share": 0.5, "delay_median": 4.0, "lead_median": 16.0,
                    "false_pre_onset_per_1k": 50.0, "false_healthy_per_1k": 10.0, "critical_near_best": 2}
    info = _row(table, "*", "info")
    # with b's info flag at 12: delays [4, 2] → median 3; leads still only a's 16
    assert (info["flagged_share"], info["delay_median"], info["lead_median"]) == (1.0, 3.0, 16.0)
    crit = _row(table, "*", "critical")
    # critical: a@25 (delay 15, lead 5), b none; no critical before onset or on h; a@25 and u@70 are at the
    # reward's best → 2 critical flags near the best
    assert (crit["flagged_share"], crit["delay_median"], crit["lead_median"]) == (0.5, 15.0, 5.0)
    assert (crit["false_pre_onset_per_1k"], crit["false_healthy_per_1k"], crit["critical_near_best"]) == (0, 0, 2)


def test_score_single_phase_and_other_kinds():
    decay = _row(score(FLAGS, LABELS), "steady_decay", "warning")
    # steady_decay only: a@5 (before onset), a@14 → delay 4, lead 16; h's stagnation is not this phase
    assert (decay["delay_median"], decay["lead_median"], decay["false_pre_onset_per_1k"],
            decay["false_healthy_per_1k"]) == (4.0, 16.0, 50.0, 0.0)
    every = score(FLAGS, LABELS, all_kinds=True)
    vs_isdd = every[(every["phase"] == "*") & (every["severity"] == "warning") & (every["drill"] == "isdd")]
    # c's only flag (3) is before its onset 20: not flagged
    assert vs_isdd.iloc[0]["flagged_share"] == 0.0 and pd.isna(vs_isdd.iloc[0]["delay_median"])


def test_a_drill_with_two_own_detectors_scores_both():
    # blowup's own detectors are grad and entropy: one blowup run (onset 10) flagged by entropy at 16 only.
    # grad row: drilled 1, flagged 0; entropy row: flagged 1/1, delay 6. lld flags nothing of it.
    labels = [RunLabel("x", "blowup", 10, None, 0, 39)]
    flags = pd.DataFrame([("x", "entropy", "blowup", "critical", 16)], columns=FLAGS.columns)
    table = score(flags, labels)
    own = table[(table["phase"] == "*") & (table["severity"] == "warning")].set_index("detector")
    assert set(own.index) == {"grad", "entropy"} and set(own["drill"]) == {"blowup"}
    assert (own.loc["grad", "drilled_runs"], own.loc["grad", "flagged_share"]) == (1, 0.0)
    assert (own.loc["entropy", "flagged_share"], own.loc["entropy", "delay_median"]) == (1.0, 6.0)


def test_a_collapse_before_onset_gives_no_lead():
    labels = [RunLabel("a", "lld", 10, 4, 0, 49)]  # the reward collapsed at 4, before the drill began
    flags = pd.DataFrame([("a", "lld", "steady_decay", "warning", 12)], columns=FLAGS.columns)
    row = _row(score(flags, labels), "*", "warning")
    assert (row["flagged_share"], row["delay_median"]) == (1.0, 2.0) and pd.isna(row["lead_median"])


def test_reward_collapse_rule():
    r = np.array([.1, .3, .5, .5, .5, .5, .5] + [.1] * 18)  # 25 points
    # the rule with a 5-point window (the default, 10, needs longer series); trailing medians of 5: undefined for
    # steps 0-3 (warm-up), .5 for steps 4-8, then .1 from step 9 (steps 7-9 are three .1 of the last five);
    # best .5 ≥ MIN_BEST 0.1 and .1 ≤ 0.5 × .5; the 15 later levels (steps 10-24) are all .1, never above
    # .375 = 0.75 × .5, and 15 ≥ SUSTAIN 10 → collapse at step 9
    assert reward_collapse(np.arange(25), r, smooth=5) == 9
    recovered = np.concatenate([r, [.5] * 10])  # the level returns to .5 > .375: a dip, not a collapse
    assert reward_collapse(np.arange(35), recovered, smooth=5) is None
    # best .5 × .3 = .15 ≥ 0.1 (a run that peaks near 0.15 and scores .03 for good collapsed) …
    assert reward_collapse(np.arange(25), r * 0.3, smooth=5) == 9
    # … best .5 × .15 = .075 < MIN_BEST 0.1: it never learned
    assert reward_collapse(np.arange(25), r * 0.15, smooth=5) is None
    # default window 10: level at 9 = median(.1 .3 .5 .5 .5 .5 .5 .1 .1 .1) = (.3 + .5)/2 = .4, at 10 also .4
    # (.3, five .5, four .1), at 11 .3 (five .5, five .1), at 12 .1 (six .1 of ten) ≤ 0.5 × .4, 12 later levels
    assert reward_collapse(np.arange(25), r) == 12


def test_a_fall_in_the_runs_last_points_is_not_yet_a_collapse():
    # the same fall with the run ending at step 14: the level falls to .1 at step 9 (as above) but only 5 levels
    # follow (steps 10-14) < SUSTAIN 10: it has had no time to recover (a healthy run's end-of-run dip reads so)
    r = np.array([.1, .3, .5, .5, .5, .5, .5] + [.1] * 8)
    assert reward_collapse(np.arange(15), r, smooth=5) is None
    assert reward_collapse(np.arange(15), r, smooth=5, sustain=5) == 9  # exactly 5 later levels: enough for 5
    assert reward_collapse(np.arange(15), r, smooth=5, sustain=6) is None
    # NULL rewards after the fall are not points: ten more NaN rows leave 5 later levels
    assert reward_collapse(np.arange(25), np.r_[r, [np.nan] * 10], smooth=5) is None
    # ten more logged .1 points make 15: sustained, collapse at 9 (the step the level first fell, not 9 + 10)
    assert reward_collapse(np.arange(25), np.r_[r, [.1] * 10], smooth=5) == 9


def test_a_label_the_runs_end_decides_is_undecided():
    # (b) the fall of the test above with the run ending at step 14: level .1 ≤ 0.5 × .5 from step 9, 5 later
    # levels < SUSTAIN 10 → no collapse, and it is the run's end that says so
    r = np.array([.1, .3, .5, .5, .5, .5, .5] + [.1] * 8)
    why = undecided(np.arange(15), r, smooth=5)
    assert "at step 9, with 5 logged point(s) after it: too few to tell a collapse" in why
    # (a) the fall of test_reward_collapse_rule (level .1 from step 9), 18 points at .1, then 3 points at .5:
    # levels (5-point medians) at steps 25, 26 are .1 (≤ two .5 of five), at 27 .5 (three of five) > .375
    # = 0.75 × .5 → a recovery (no collapse), first seen at step 27, the last point (0 points after it):
    # 18 later levels (steps 10-27) ≥ 10, the first above .375 is the 18th, inside the last 10 → undecided
    late = np.r_[.1, .3, [.5] * 5, [.1] * 18, [.5] * 3]
    assert reward_collapse(np.arange(28), late, smooth=5) is None
    assert "came back at step 27, with 0 logged point(s) after it: too few to tell a recovery" in \
        undecided(np.arange(28), late, smooth=5)
    # 13 points at .5 (steps 25-37): the level is back above .375 from step 27 on, 11 levels (27-37); the first of
    # the 28 later levels above it is the 18th, not inside the last 10 (later levels 19-28) → a recovery: decided
    assert undecided(np.arange(38), np.r_[late[:-3], [.5] * 13], smooth=5) == ""
    # decided either way: the sustained collapse (a collapse step, not undecided) and a run that never fell
    assert undecided(np.arange(25), np.r_[.1, .3, [.5] * 5, [.1] * 18], smooth=5) == ""
    assert undecided(np.arange(25), np.full(25, .5), smooth=5) == ""
    # a fall that recovered mid-run (.1 at steps 7-11, .5 at 12-26: level .5 again from step 14, 19 later levels),
    # then six .1 at steps 27-32: the level is .1 from step 29 (three .1 of its five), 3 later levels < 10 → the
    # second fall decides: undecided
    dip = np.r_[.1, .3, [.5] * 5, [.1] * 5, [.5] * 15, [.1] * 6]
    assert reward_collapse(np.arange(len(dip)), dip, smooth=5) is None
    assert "at step 29, with 3 logged point(s) after it: too few to tell a collapse" in \
        undecided(np.arange(len(dip)), dip, smooth=5)


def test_the_first_points_alone_never_set_the_best():
    # one lucky first rollout (.9), then .4: with min_periods=1 the level at step 0 was .9, the best .9, and
    # steps 1-9 (levels .65, .4, .4 …, all ≤ .45 = .5 × .9, never again > .675) read as a collapse at step 2.
    # With the warm-up the first level (step 4, median of .9 .4 .4 .4 .4) is .4: the best is .4, never halved.
    r = np.array([.9] + [.4] * 14)
    assert reward_collapse(np.arange(15), r, smooth=5) is None
    level, best = reward_level(np.arange(15), r, smooth=5)
    assert np.isnan(level[:4]).all() and level[4] == .4 and best[3] == -np.inf and best[-1] == .4
    # NULL rewards are not points: the window counts logged values (steps 0-4 NaN, then .4 ×5 → the fifth logged
    # point, step 9, has the first level)
    gaps = np.array([np.nan] * 5 + [.4] * 5)
    level = reward_level(np.arange(10), gaps, smooth=5)[0]
    assert np.isnan(level[:9]).all() and level[9] == .4


def test_a_collapse_inside_the_first_ten_points_has_a_best_to_fall_from():
    # .9 for 3 points, then 0 (a run that dies at its fourth point, like a public run falling .95 → .03 at step 4):
    # the first level (step 4: median of .9 .9 .9 0 0) is .9, the best; at step 5 the level is the median of its six
    # points, three .9 and
    # three 0 → (.9 + 0) / 2 = .45 ≤ .5 × .9, and no later level exceeds .75 × .9 (from step 6 the zeros are the
    # majority) → collapse at 5. Without the warm-up's short levels the first level (step 9, seven 0s of ten) was
    # already 0: no best, no collapse.
    r = np.array([.9] * 3 + [0.0] * 27)
    assert reward_collapse(np.arange(30), r) == 5
    assert reward_collapse(np.arange(30), r, smooth=10) == 5 and reward_level(np.arange(30), r)[0][5] == .45


def test_the_shipped_drill_runs_do_not_collapse_before_their_onset():
    """The three lld drill sample runs: step 0 earns .875 from one 4 × 4 rollout, then about .4 (issue 25 §2).
    The old rule (a level from one point) labelled them 'collapse at step 3', 21 steps before the drill."""
    from pathlib import Path

    from collapsewatch.lab.labels import drill_of
    from collapsewatch.offline import run_steps
    from collapsewatch.store import Store
    from collapsewatch.store.queries import run_info

    store = Store(Path(__file__).resolve().parents[2] / "sample_runs" / "store")
    try:
        for run in ("drill-lld-grpo", "drill-lld-sapo_search", "drill-lld-llds"):
            kind, onset = drill_of(run_info(store, run)["config"])
            df = run_steps(store, run)
            assert (kind, onset) == ("lld", 24) and df["reward_mean"].iloc[0] == 0.875
            collapse = reward_collapse(df["step"].to_numpy(), df["reward_mean"].to_numpy())
            assert collapse is None or collapse > onset, (run, collapse)
    finally:
        store.close()


def test_labels_from_config_and_user_file(tmp_path):
    steps, reward = np.arange(5), np.full(5, 0.5)
    lab = label_run("x", '{"drill": {"kind": "isdd", "at_step": 4}}', steps, reward)
    assert (lab.kind, lab.onset, lab.collapse, lab.n_steps) == ("isdd", 4, None, 5)
    path = tmp_path / "labels.csv"
    path.write_text("run,kind,onset,collapse\nx,lld,2,\ny,,,7\n")
    user = read_label_file(path)
    assert user == {"x": {"kind": "lld", "onset": 2, "collapse": None},
                    "y": {"kind": "", "onset": None, "collapse": 7}}
    assert label_run("x", None, steps, reward, user["x"]).onset == 2
    path.write_text("run,kind,onset\nx,lld,2\n")
    with pytest.raises(ValueError, match="missing column"):
        read_label_file(path)
    path.write_text("run,kind,onset,collapse\nx,lld,2.5,\n")
    with pytest.raises(ValueError, match="line 2"):
        read_label_file(path)


def test_the_starting_evaluation_witnesses_a_collapse_the_reward_cannot_date():
    # a run that dies inside its warm-up (the natural corpus's GRPO at lr 2e-3): reward .25, .0625, .0625, then 0
    # for 57 points. Its first level (point 5: median of .25 .0625 .0625 0 0) is .0625 and none is higher: the best
    # .0625 < MIN_BEST .1, so the reward rule reads "never learned" — no collapse, and nothing its end decides.
    steps = np.arange(60)
    reward = np.r_[.25, .0625, .0625, np.zeros(57)]
    assert reward_collapse(steps, reward) is None and undecided(steps, reward) == ""
    # an evaluation every 5 steps from step 0 (the starting policy: step 0 ≤ the first reward point): .3125, then 0.
    # .3125 ≥ MIN_BEST is the best; the evaluation at 5 scores 0 ≤ .5 × .3125 = .15625, the 10 after it (steps
    # 10 … 55: ≥ SUSTAIN 10) all 0 ≤ .75 × .3125 → collapsed at 5
    score = np.full(60, np.nan)
    score[::5] = 0.0
    score[0] = .3125
    assert start_collapse(steps, reward, score) == 5
    lab = label_run("w", None, steps, reward, score=score)
    assert (lab.collapse, lab.witness, lab.undecided) == (5, "evaluation", "") and not lab.healthy
    # the bench trusts it: U2 (a best set among the first 20 reward points) reads the reward's best, not this one
    assert classify("natural", lab, steps, reward, csv_label=False).status == "collapsed"
    # the user's word overrides the witness
    given = label_run("w", None, steps, reward, {"kind": "", "onset": None, "collapse": None}, score)
    assert (given.collapse, given.witness) == (None, "") and given.healthy
    # exactly .15625 is a fall (≤); the evaluation at 5 at .16 is not, and the one at 10 then has 9 after it: None
    at_half = score.copy()
    at_half[5] = .15625
    assert start_collapse(steps, reward, at_half) == 5
    above = score.copy()
    above[5] = .16
    assert start_collapse(steps, reward, above) is None
    # one evaluation back above .75 × .3125 = .234 (.25 at step 55): every fall has it after it, or < 10 after → None
    back = score.copy()
    back[55] = .25
    assert start_collapse(steps, reward, back) is None
    # no evaluation of the starting policy (the first at step 5, after the first reward point 0): None
    late = score.copy()
    late[0] = np.nan
    late[5] = .3125
    assert start_collapse(steps, reward, late) is None
    # a starting score under MIN_BEST (.09: within noise of 0) sets no best: None
    weak = score.copy()
    weak[0] = .09
    assert start_collapse(steps, reward, weak) is None
    # a reward with a best (.5 throughout: level .5 ≥ .1) is judged by the reward alone: healthy, the evaluation unread
    held = np.full(60, .5)
    assert start_collapse(steps, held, score) is None
    assert label_run("h", None, steps, held, score=score).healthy
    # one score per row, or a clear error naming the three lengths
    with pytest.raises(ValueError, match="got 60, 60 and 59 rows"):
        start_collapse(steps, reward, score[:-1])
