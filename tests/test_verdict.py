"""The run verdict (collapsewatch.verdict) on hand-made reward series and episode rows, and the reader order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from collapsewatch.detectors.events import Event
from collapsewatch.verdict import reader_order, verdict


def _events(*specs: tuple[str, str, int, int, str]) -> pd.DataFrame:
    rows = [Event(d, p, a, b, sev, None, None, None, None, "m").as_row() for d, p, a, b, sev in specs]
    return pd.DataFrame(rows, columns=list(Event("d", "p", 0, 0, "info", None, None, None, None, "").as_row()))


def test_collapsed_run_names_the_collapse_the_first_warning_and_the_first_critical():
    steps = np.arange(40)
    reward = np.r_[np.full(20, .5), np.full(20, .05)]
    # level = median of the last 10 points: .5 from step 9; at 24 five .5 and five .05 → .275 (> .25 = .5 × .5);
    # at 25 four .5, six .05 → .05 ≤ .25 and never again above .375: collapse at 25; best .5, last level .05
    ev = _events(("entropy", "blowup", 18, 30, "critical"), ("length", "blowup", 5, 8, "warning"),
                 ("grad", "explosion", 3, 3, "info"))
    v = verdict(ev, steps, reward)
    assert (v.status, v.collapse_step, v.reward_before, v.reward_after) == ("collapsed", 25, .5, .05)
    assert (v.first_warning_step, v.first_warning, v.lead_steps, v.worst, v.n_steps) == (5, "length blow-up", 20,
                                                                                          "critical", 40)
    assert v.sentence == ("Collapsed at step 25 (reward 0.50 → 0.05). First warning at 5: length blow-up, 20 steps "
                          "earlier. First critical at 18: entropy blow-up, 7 steps earlier. Worst: critical.")


def test_an_episode_that_turned_warning_later_is_dated_when_it_did():
    # the collapse of the first test (25). One entropy episode opened at 5 as info, stood at warning from 12 and at
    # critical from 21 (its evidence's `reached`): the first warning is at 12 (lead 13), not at its start 5, and the
    # same episode's critical at 21 is named too (4 steps earlier)
    steps, reward = np.arange(40), np.r_[np.full(20, .5), np.full(20, .05)]
    row = Event("entropy", "blowup", 5, 30, "critical", None, None, None, None, "m",
                {"reached": {"info": 5, "warning": 12, "critical": 21}}).as_row()
    v = verdict(pd.DataFrame([row]), steps, reward)
    assert (v.first_warning_step, v.lead_steps) == (12, 13)
    assert v.sentence == ("Collapsed at step 25 (reward 0.50 → 0.05). First warning at 12: entropy blow-up, 13 steps "
                          "earlier. First critical at 21: entropy blow-up, 4 steps earlier. Worst: critical.")


def test_the_reward_now_is_the_last_level_when_the_last_step_logged_no_reward():
    # TRL with steps_per_generation 2 (or a rollout every k optimizer steps) logs the reward on every other step:
    # 40 logged points at steps 0, 2, …, 78 (.5 ×20 then .05 ×20), NaN at the odd steps, and the run ends on 79.
    # The level is the median of the last 10 logged points: .05 at the last logged step 78 — not NaN at step 79.
    steps = np.arange(80)
    reward = np.full(80, np.nan)
    reward[::2] = np.r_[np.full(20, .5), np.full(20, .05)]
    v = verdict(_events(), steps, reward)
    # collapse as in the first test, on logged point 25 = step 50
    assert (v.collapse_step, v.reward_before, v.reward_after) == (50, .5, .05)
    assert v.sentence.startswith("Collapsed at step 50 (reward 0.50 → 0.05).")


def test_a_warning_after_the_collapse_says_so():
    steps, reward = np.arange(40), np.r_[np.full(20, .5), np.full(20, .05)]
    v = verdict(_events(("lld", "steady_decay", 26, 30, "warning")), steps, reward)
    assert v.lead_steps == -1 and "First warning at 26: LLD steady decay, 1 step after it. Worst: warning." in v.sentence


def test_healthy_and_warning_runs_and_a_drill():
    steps, reward = np.arange(100), np.full(100, .8)
    v = verdict(_events(), steps, reward)
    # the first level (the warm-up's median of 5 points) ends at step 4: best .8 there (the first step reaching the
    # running max)
    assert (v.status, v.sentence) == ("healthy", "No warning in 100 steps; reward best 0.80 at 4.")
    v = verdict(_events(("starvation", "starvation", 50, 60, "info")), steps, reward, ("lld", 24))
    assert v.status == "healthy" and v.sentence == ("No warning in 100 steps; reward best 0.80 at 4. 1 info "
                                                    "episode(s). Drill: lld from step 24; no warning after it.")
    v = verdict(_events(("isdd", "drift", 70, 80, "warning")), steps, reward)
    assert (v.status, v.sentence) == ("warning", "Warning from step 70: ISDD drift. No reward collapse in 100 "
                                                 "steps (reward best 0.80 at 4). Worst: warning.")
    # five points: the first level (the median of all five) is .8, at step 4
    v = verdict(_events(), np.arange(5), np.full(5, .8))
    assert v.sentence == "No warning in 5 steps; reward best 0.80 at 4." and v.reward_before == .8
    # four points: no level, no best, nothing to judge the reward by
    v = verdict(_events(), np.arange(4), np.full(4, .8))
    assert v.sentence == "No warning in 4 steps; too few reward points to judge." and v.reward_before is None


def test_reader_order_groups_episodes_and_puts_the_cause_first_and_the_noise_last():
    ev = _events(("length", "blowup", 14, 20, "warning"), ("grad", "explosion", 3, 3, "info"),
                 ("lld", "accelerated_collapse", 90, 99, "critical"), ("entropy", "blowup", 54, 60, "critical"),
                 ("entropy", "blowup", 85, 86, "warning"), ("length", "blowup", 70, 72, "critical"))
    got = reader_order(ev)[["detector", "step_start"]].values.tolist()
    # three critical groups, placed by their first critical episode: entropy (54), length (70: its warning at 14
    # does not pull it forward), lld (90); each group in order of start; the info group last
    assert got == [["entropy", 54], ["entropy", 85], ["length", 14], ["length", 70], ["lld", 90], ["grad", 3]]


def test_a_length_budget_is_named_once_as_a_note_never_as_a_warning():
    # A run truncated at its cap from the start: the detectors' length/budget episode (info, evidence from the
    # real rule) — the run stays healthy and the sentence ends with one note: the episode's value 0.95 → "95 %",
    # the evidence's length level 127.6 → "128 tokens".
    from collapsewatch.detectors import DetectorConfig
    from tests.detectors.series import feed, rows

    _, suite = feed(rows(100, truncated_frac=0.95, response_length_mean=127.6), DetectorConfig(enabled=("length",)))
    ev = pd.DataFrame([e.as_row() for e in suite.episodes()])
    steps, reward = np.arange(100), np.full(100, .8)
    v = verdict(ev, steps, reward)
    assert v.status == "healthy"
    assert v.sentence == ("No warning in 100 steps; reward best 0.80 at 4. 1 info episode(s). Note: 95% of responses "
                          "hit the length budget from the start (responses 128 tokens on average): raise the "
                          "completion length.")
    assert verdict(_events(), steps, reward).sentence == "No warning in 100 steps; reward best 0.80 at 4."


def test_a_short_warning_run_says_why_it_is_a_warning_and_never_prints_none():
    # 3 steps (a TRL quick start): fewer than the 5 points of a first reward level, so no best to print; a critical
    # length blow-up at 2-3 and no collapse: the status (and the dashboard's badge) is warning
    v = verdict(_events(("length", "blowup", 2, 3, "critical")), np.arange(1, 4), np.full(3, .05))
    assert (v.status, v.worst, v.reward_before) == ("warning", "critical", None)
    assert v.sentence == ("Warning from step 2: length blow-up. No reward collapse in 3 steps (too few reward points "
                          "to judge). Worst: critical. The run is marked warning, not collapsed, because its reward "
                          "has not collapsed.")
    assert "None" not in v.sentence and "—" not in v.sentence


def test_a_log_without_early_signals_says_only_the_reward_is_watched():
    # A reward-only log (what kimi3-align's or Trinity-RFT's logs hold): none of the signal columns, so "No warning"
    # is read with the note; with response_length_mean the note names the length too; any one signal column (here
    # grad_norm, or zero_std_group_frac) and no note; logged unknown (None) and no note either.
    from collapsewatch.verdict import signal_columns

    steps, reward = np.arange(30), np.full(30, .5)
    note = (" Note: the log has no entropy, gradient norm, group statistics or log-probs, the signals that come "
            "before a collapse: only the reward is watched.")
    v = verdict(_events(), steps, reward, logged={"reward_mean"})
    assert v.blind and v.sentence == "No warning in 30 steps; reward best 0.50 at 4." + note
    v = verdict(_events(), steps, reward, logged={"reward_mean", "response_length_mean"})
    assert v.sentence.endswith("only the reward and the response length are watched.")
    # an evaluation score is an outcome like the reward, no early signal: still blind, and the note names it
    v = verdict(_events(), steps, reward, logged={"reward_mean", "eval_score"})
    assert v.blind and v.sentence.endswith("only the reward and the evaluation score are watched.")
    v = verdict(_events(), steps, reward, logged={"reward_mean", "response_length_mean", "eval_score"})
    assert v.sentence.endswith("only the reward, the response length and the evaluation score are watched.")
    assert "eval_score" not in signal_columns()
    # keys ingest does not know fill no column: no reward (all NaN) and nothing logged → the reward clause says so
    # (not "too few reward points") and the note watches nothing, naming where the known keys are listed
    v = verdict(_events(), steps, np.full(30, np.nan), logged=set())
    assert v.blind and v.sentence == (
        "No warning in 30 steps; no reward logged. Note: the log has no entropy, gradient norm, group statistics or "
        "log-probs, the signals that come before a collapse, and no reward: nothing is watched (its keys may have "
        "names ingest does not know: docs/ingest.md lists the ones it reads; ingest --map KEY=COLUMN reads others).")
    # a run that recorded no step (a Monitor that crashed before its first log): nothing to judge, said so
    v = verdict(_events(), np.arange(0), np.arange(0.0))
    assert v.sentence == "No steps recorded: nothing to judge." and v.n_steps == 0
    # its status stays healthy (nothing fell); the runs table and the dashboard show "no steps"
    assert v.status == "healthy" and v.shown == "no steps" and verdict(_events(), steps, reward).shown == "healthy"
    for col in ("grad_norm", "zero_std_group_frac", "entropy_mean", "logp_old_mean_correct"):
        assert col in signal_columns()
        v = verdict(_events(), steps, reward, logged={"reward_mean", col})
        assert not v.blind and "Note" not in v.sentence
    assert not verdict(_events(), steps, reward).blind
    # a run with no step yet (a live run just started) says nothing of what its log holds
    assert not verdict(_events(), [], [], logged=set()).blind
    # the note follows a collapse sentence as it does a healthy one: 20 points at .5, 20 at 0 → collapsed
    v = verdict(_events(), np.arange(40), np.r_[np.full(20, .5), np.zeros(20)], logged=set())
    assert v.status == "collapsed" and v.sentence.endswith(note) and "No warning before it." in v.sentence


def test_a_reward_that_just_fell_or_just_came_back_is_named_not_hidden():
    # the first test's fall with the run ending at step 30: level .05 ≤ .25 = 0.5 × .5 from step 25 (as there), and
    # only 5 levels follow (26-30) < SUSTAIN 10 → no collapse yet, a warning run; the note says how far it fell, when,
    # and what would make it a collapse (best .5 first reached at step 4: the warm-up's 5-point median). The rule's
    # best is net of noise (reward.rule_best): the median |step-to-step difference| of these flat series is 0, so no
    # noise and the rule's best is the level's, .5
    steps = np.arange(31)
    reward = np.r_[np.full(20, .5), np.full(11, .05)]
    v = verdict(_events(("entropy", "blowup", 18, 30, "warning")), steps, reward)
    assert (v.status, v.collapse_step) == ("warning", None)
    assert v.sentence == ("Warning from step 18: entropy blow-up. No reward collapse in 31 steps (reward best 0.50 at "
                          "4). Worst: warning. Note: the reward level fell to 0.05 (≤ 0.5 × its best 0.50, net of "
                          "noise) at step 25, with 5 logged point(s) after it: a collapse once it has stayed down 10 points.")
    # 20 points at .5, 20 at .05 (steps 20-39), 10 at .5 (40-49): level .05 from step 25; at 45 the last ten (36-45)
    # hold six .5 → .5 > .375 = 0.75 × .5: back at 45. Of the 24 levels after 25 (26-49) the first above .375 is the
    # 20th, inside the last 10 → no collapse by the rule, and too early to call it a recovery: 4 points after it
    back = np.r_[np.full(20, .5), np.full(20, .05), np.full(10, .5)]
    v = verdict(_events(), np.arange(50), back)
    assert v.status == "healthy" and v.sentence.endswith(
        "Note: the reward level fell to 0.05 (≤ 0.5 × its best 0.50, net of noise) at step 25 and came back at step "
        "45, with 4 logged point(s) after it: too early to tell whether the recovery holds.")
    # a recovery that held (20 points at .5 after the fall) and a run that never fell: no note
    held = np.r_[np.full(20, .5), np.full(20, .05), np.full(20, .5)]
    assert "Note" not in verdict(_events(), np.arange(60), held).sentence
    assert "Note" not in verdict(_events(), np.arange(40), np.full(40, .5)).sentence


def test_one_step_is_said_in_the_singular():
    # s33 #13: a 1-step run read "No warning in 1 steps"; the trainer's summary line used the same words
    from collapsewatch.verdict import n_steps_text

    assert (n_steps_text(1), n_steps_text(0), n_steps_text(2)) == ("1 step", "0 steps", "2 steps")
    v = verdict(_events(), np.arange(1), np.array([.5]))
    assert v.sentence.startswith("No warning in 1 step; "), v.sentence
    w = verdict(_events(("grad", "explosion", 0, 0, "warning")), np.arange(1), np.array([.5]))
    assert "No reward collapse in 1 step (" in w.sentence, w.sentence


def test_a_signed_reward_is_named_where_the_rule_judges_it_and_where_it_cannot():
    # −1, then .5 × 19, then .05 × 20 (steps 0-39): the differences are 0 but two, so the point noise is 0 and the
    # rule's best is the level's .5 (from step 4: median of −1 and four .5); the level .05 ≤ .25 from step 25 (six
    # .05 of ten) and stays there → collapsed at 25, and the reward went below 0 (lowest −1.00): the note says the
    # rule measured from 0
    reward = np.r_[-1, np.full(19, .5), np.full(20, .05)]
    v = verdict(_events(), np.arange(40), reward)
    assert v.collapse_step == 25 and v.sentence == (
        "Collapsed at step 25 (reward 0.50 → 0.05). No warning before it. Note: the reward goes below 0 (lowest "
        "-1.00), and the collapse rule measures its fall to half the best from 0, not from that lowest: on a signed "
        "reward (a ±1 grade, a penalty), confirm the fall on the reward chart.")
    # all below 0: −1 × 5 then −.4 × 35 → the best level −.40, first at step 10 (six −.4 of the last ten; at 9 five
    # of each: −.7), under MIN_BEST .1: nothing to fall from, said so
    v = verdict(_events(), np.arange(40), np.r_[np.full(5, -1.), np.full(35, -.4)])
    assert v.status == "healthy" and v.sentence == (
        "No warning in 40 steps; reward best -0.40 at 10. Note: the reward's best level is -0.40 (lowest -1.00): the "
        "collapse rule needs a best of at least 0.1 to fall from, so it cannot judge this signed reward — read the "
        "reward chart.")
    # a signed reward the rule judged "no collapse" with a best ≥ .1 gets no note, nor does a reward ≥ 0 that fell
    assert "Note" not in verdict(_events(), np.arange(40), np.r_[-1, np.full(39, .5)]).sentence
    assert "below 0" not in verdict(_events(), np.arange(40), np.r_[0, np.full(19, .5), np.full(20, .05)]).sentence
