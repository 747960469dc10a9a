"""`lab natural`: detectors scored on natural reward collapses, on a hand-made label and flag set."""

from __future__ import annotations

import pandas as pd
import pytest

from collapsewatch.lab.labels import RunLabel
from collapsewatch.lab.natural import run_table, score_natural

# n1 collapses at 300, n2 at 100, n3 never (400 steps), n4 never (200 steps); d is a drill (left out)
LABELS = [RunLabel("n1", "", None, 300, 0, 399), RunLabel("n2", "", None, 100, 0, 399),
          RunLabel("n3", "", None, None, 0, 399), RunLabel("n4", "", None, None, 0, 199),
          RunLabel("d", "lld", 50, 80, 0, 99)]
FLAGS = pd.DataFrame([
    ("n1", "entropy", "blowup", "warning", 250), ("n1", "lld", "steady_decay", "warning", 290),
    ("n1", "lld", "accelerated_collapse", "critical", 310),
    ("n2", "entropy", "blowup", "info", 50), ("n2", "lld", "steady_decay", "warning", 120),
    ("n3", "entropy", "blowup", "critical", 40), ("n3", "entropy", "collapse", "warning", 200),
    ("n4", "lld", "early_stagnation", "info", 20), ("d", "lld", "steady_decay", "warning", 10),
], columns=["run", "detector", "phase", "severity", "step_start"])


def test_natural_scores_per_detector_and_any():
    t = score_natural(FLAGS, LABELS).set_index("detector")
    # entropy: n1 flagged at 250 = 50 ≥ 20 steps before 300 (lead 50); n2's only flag is info → 1 of 2 early.
    # never collapsed: n3's two flags over 400 + 200 steps → 2 / 600 × 1000 = 3.33; one of them critical.
    ent = t.loc["entropy"]
    assert (ent["collapsed_runs"], ent["flagged_early_share"], ent["lead_median"]) == (2, 0.5, 50.0)
    assert ent["false_per_1k"] == pytest.approx(1000 * 2 / 600) and ent["critical_never_collapsed"] == 1
    # lld: n1 at 290 (lead 10: before the collapse but not 20 steps before); n2 only after the collapse (120 > 100)
    lld = t.loc["lld"]
    assert (lld["flagged_early_share"], lld["lead_median"], lld["false_per_1k"]) == (0.0, 10.0, 0.0)
    # any: n1's first flag 250 → early, lead 50; n2 none before → 1 of 2
    assert (t.loc["any", "flagged_early_share"], t.loc["any", "lead_median"]) == (0.5, 50.0)
    assert t.loc["any", "critical_never_collapsed"] == 1


def test_a_run_its_end_decides_is_scored_nowhere():
    # n5: no collapse by the rule, but only because its last points rose (reward.undecided): its critical is neither
    # a false flag on a never-collapsed run nor a flag on a collapse → the figures of the test above, and 1 undecided
    why = "the reward level fell to 0 … came back at step 397, with 2 logged point(s) after it"
    labels = [*LABELS, RunLabel("n5", "", None, None, 0, 399, why)]
    flags = pd.concat([FLAGS, pd.DataFrame([("n5", "entropy", "blowup", "critical", 300)], columns=FLAGS.columns)])
    t = score_natural(flags, labels).set_index("detector")
    ent = t.loc["entropy"]
    assert ent["never_collapsed_runs"] == 2 and ent["false_per_1k"] == pytest.approx(1000 * 2 / 600)
    assert ent["critical_never_collapsed"] == 1 and ent["undecided_runs"] == 1 and t.loc["any", "undecided_runs"] == 1
    runs = run_table(flags, labels).set_index("run")
    assert runs.loc["n5", "collapse"] == "cannot tell" and runs.loc["n5", "undecided"] == why
    assert runs.loc["n5", "entropy"] == "blowup@300(critical)"  # still shown: what fired where
    assert runs.loc["n3", "undecided"] == "" and runs.loc["n1", "collapse"] == 300


def test_run_table_says_what_fired_where():
    t = run_table(FLAGS, LABELS).set_index("run")
    assert list(t.index) == ["n1", "n2", "n3", "n4"]  # the drill is not a natural run
    assert t.loc["n1", "lld"] == "steady_decay@290(warning)" and t.loc["n1", "collapse"] == 300
    assert t.loc["n2", "entropy"] == "" and t.loc["n3", "entropy"] == "blowup@40(critical)"
    assert (t["witness"] == "").all()  # every collapse of LABELS is the reward rule's
    # every critical episode, by detector/phase and the step it stood at critical: n1's LLD at 310, n3's blow-up at 40
    assert t["criticals"].to_dict() == {"n1": "lld/accelerated_collapse@310", "n2": "", "n3": "entropy/blowup@40",
                                        "n4": ""}
    # a collapse the starting evaluation dated says so
    dated = run_table(FLAGS, [*LABELS, RunLabel("n6", "", None, 10, 0, 399, "", "evaluation")]).set_index("run")
    assert (dated.loc["n6", "collapse"], dated.loc["n6", "witness"]) == (10, "evaluation")


def test_a_critical_after_a_warning_of_the_same_detector_shows():
    # n7: an entropy blow-up at warning from 137, then another episode that stood at critical from 281 (opened at
    # 249 as a warning: its critical_at dates it). The detector's cell is its first flag, the warning at 137; the
    # criticals column still says entropy/blowup@281 (the session-47 misreading: "no critical" off the first cell).
    flags = pd.DataFrame([
        ("n7", "entropy", "blowup", "warning", 137, 137, None),
        ("n7", "entropy", "blowup", "critical", 249, 249, 281),
    ], columns=[*FLAGS.columns, "warning_at", "critical_at"])
    t = run_table(flags, [RunLabel("n7", "", None, None, 0, 599)]).set_index("run")
    assert t.loc["n7", "entropy"] == "blowup@137(warning)" and t.loc["n7", "criticals"] == "entropy/blowup@281"


def test_claim_table_compares_the_first_and_last_windows():
    import numpy as np

    from collapsewatch.lab.natural import claim_table, setting_of

    steps = np.arange(100)
    # grpo: reward 0.4 then 0.05 from step 50; sentinel L every 10 steps, -0.3 in the first 40 steps, -1.5 at the end
    grpo = pd.DataFrame({"step": steps, "reward_mean": np.where(steps < 50, 0.4, 0.05), "on_policy": steps % 2 == 0,
                         "sentinel_logp_correct_mean": np.where(steps % 10 == 0, np.where(steps < 50, -0.3, -1.5),
                                                                np.nan),
                         "ratio_p05_pos": np.where(steps % 2 == 1, np.where(steps < 50, 0.8, 0.4), np.nan)})
    llds = grpo.assign(reward_mean=0.4, sentinel_logp_correct_mean=np.where(steps % 10 == 0, -0.3, np.nan))
    labels = [RunLabel("healthy-grpo-nll04-s0", "", None, 50, 0, 99), RunLabel("healthy-llds-nll04-s0", "", None,
                                                                                None, 0, 99)]
    frames = {"healthy-grpo-nll04-s0": grpo, "healthy-llds-nll04-s0": llds}
    t = claim_table(frames, labels, {"healthy-grpo-nll04-s0": "grpo", "healthy-llds-nll04-s0": "llds"})
    g, lds = t.iloc[0], t.iloc[1]
    assert (g["setting"], g["objective"], g["collapsed"]) == ("nll04", "grpo", "1/1")
    # best level 0.4 (trailing median of 10); last 40 steps (60–99) all at 0.05; sentinel points 0–30 → -0.3,
    # 60–90 → -1.5; p05 over off-policy (odd) steps: first window 0.8, last 0.4
    assert (g["reward_best"], g["reward_last"]) == pytest.approx((0.4, 0.05))
    assert (g["sentinel_L_first"], g["sentinel_L_last"]) == pytest.approx((-0.3, -1.5))
    assert (g["p05_pos_first"], g["p05_pos_last"]) == pytest.approx((0.8, 0.4))
    assert (lds["collapsed"], lds["sentinel_L_last"], lds["sentinel_I_first"]) == ("0/1", pytest.approx(-0.3), None)
    assert setting_of("healthy-sapo_search-nll04-lr2e-3-s1") == "nll04-lr2e-3"


def test_restrict_source_nulls_the_higher_sources_only():
    from collapsewatch.lab.natural import restrict_source

    df = pd.DataFrame({"step": [0], "sentinel_logp_correct_mean": [-0.3], "model_tokens_correct": [5.0],
                       "logp_old_token_mean_correct": [-0.2], "logp_old_mean_correct": [-0.25]})
    pooled = restrict_source({"r": df}, "pooled")["r"]
    assert pooled["sentinel_logp_correct_mean"].isna().all() and pooled["model_tokens_correct"].iat[0] == 5.0
    batch = restrict_source({"r": df}, "batch")["r"]
    assert batch[["model_tokens_correct", "logp_old_token_mean_correct"]].isna().all().all()
    assert batch["logp_old_mean_correct"].iat[0] == -0.25 and df["sentinel_logp_correct_mean"].iat[0] == -0.3
    with pytest.raises(ValueError, match="--l-source"):
        restrict_source({"r": df}, "oracle")
