"""`lab hold`: the held / not-held verdicts and the per-objective table, on hand-made runs."""

from __future__ import annotations

import math

import pandas as pd

from collapsewatch.lab.hold import hold_run, hold_table, objective_of
from collapsewatch.lab.labels import RunLabel


def frame(L_after: float | None, p05_after: float) -> pd.DataFrame:
    """30 steps, reward 0.5 throughout; L −0.1 before step 20 then ``L_after``; A>0 p05 1.0 before 20, then
    ``p05_after`` on odd (off-policy) steps and NULL on even (on-policy) ones."""
    steps = range(30)
    return pd.DataFrame({
        "step": list(steps), "reward_mean": [0.5] * 30,
        "logp_old_mean_correct": [-0.1 if s < 20 else L_after for s in steps],
        "on_policy": [s % 2 == 0 for s in steps],
        "ratio_p05_pos": [None if s % 2 == 0 else (1.0 if s < 20 else p05_after) for s in steps],
    })


def test_verdicts_of_one_run():
    # onset 10: before = steps 0–9, after = steps 20–29. Reward flat 0.5: no collapse → held.
    # L −0.1 → −0.2: −0.2 < −0.1 − 0.05 → not held. p05 1.0 → 0.85 (off-policy steps only; the on-policy
    # NULLs are skipped): 0.85 < 0.9 × 1.0 → not held.
    row = hold_run(RunLabel("a", "lld", 10, None, 0, 29), frame(-0.2, 0.85), "grpo")
    assert (row["reward_held"], row["L_held"], row["ratios_held"]) == (True, False, False)
    assert math.isclose(row["L_after"], -0.2) and math.isclose(row["p05_after"], 0.85)
    # within the margins: L −0.12 ≥ −0.15, p05 0.95 ≥ 0.9 → both held
    row = hold_run(RunLabel("b", "lld", 10, None, 0, 29), frame(-0.12, 0.95), "grpo")
    assert (row["L_held"], row["ratios_held"]) == (True, True)
    # a reward collapse at 15 (after the onset) → not held; at 5 (before it) → no verdict; undrilled → no row
    assert hold_run(RunLabel("c", "lld", 10, 15, 0, 29), frame(-0.1, 1.0), "grpo")["reward_held"] is False
    assert hold_run(RunLabel("d", "lld", 10, 5, 0, 29), frame(-0.1, 1.0), "grpo")["reward_held"] is None
    assert hold_run(RunLabel("h", "", None, None, 0, 29), frame(-0.1, 1.0), "grpo") is None


def test_table_per_objective_and_drill():
    labels = [RunLabel("a", "lld", 10, None, 0, 29), RunLabel("b", "lld", 10, None, 0, 29),
              RunLabel("c", "lld", 10, None, 0, 29), RunLabel("h", "", None, None, 0, 29)]
    # c: no correct response after step 20 (L NULL) → L not held, its p05 held (0.95)
    frames = {"a": frame(-0.2, 0.85), "b": frame(-0.12, 0.95), "c": frame(None, 0.95), "h": frame(-0.1, 1.0)}
    runs, table = hold_table(labels, frames, {"a": "grpo", "b": "grpo", "c": "llds", "h": "grpo"})
    assert list(runs["run"]) == ["a", "b", "c"]
    grpo = table[table["objective"] == "grpo"].iloc[0].to_dict()
    # a and b: reward 2/2, L 1/2 (b), ratios 1/2 (b); medians of two runs: L after (−0.2 − 0.12)/2 = −0.16,
    # p05 after (0.85 + 0.95)/2 = 0.9
    assert (grpo["drill"], grpo["runs"], grpo["reward_held"], grpo["L_held"], grpo["ratios_held"]) == (
        "lld", 2, "2/2", "1/2", "1/2")
    assert math.isclose(grpo["L_after"], -0.16) and math.isclose(grpo["p05_after"], 0.9)
    llds = table[table["objective"] == "llds"].iloc[0].to_dict()
    assert (llds["L_held"], llds["ratios_held"]) == ("0/1", "1/1") and pd.isna(llds["L_after"])


def test_objective_of_a_stored_config():
    assert objective_of('{"objective": "llds"}') == "llds"
    assert objective_of("not json") == objective_of(None) == objective_of({}) == "?"
    # a recipe is told from its bare loss: non-default advantages and dynamic sampling are named
    assert objective_of({"objective": "sampo", "advantages": "gigpo", "dynamic_sampling": 3}) == (
        "sampo (gigpo, dynamic_sampling 3)")
    assert objective_of({"objective": "sampo", "advantages": "group_norm", "dynamic_sampling": 0}) == "sampo"
