"""`lab mismatch`: a grid's mismatch metrics per run and arm over windows, on hand-made step rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collapsewatch.lab.labels import RunLabel
from collapsewatch.lab.mismatch import arm_windows, run_windows

STEPS = np.arange(6)
# none-s0: no correction (truncated / masked never logged); |log ρ| 0.001 in steps 0–2, 0.004 in 3–5; ESS 0.9999
# then 0.999 except one 0.99 at step 5
NONE0 = pd.DataFrame({"step": STEPS, "reward_mean": [0.1, 0.2, 0.3, 0.0, 0.0, 0.3],
                      "is_log_ratio_abs_mean": [0.001] * 3 + [0.004] * 3,
                      "is_ess": [0.9999] * 3 + [0.999, 0.999, 0.99]})
# none-s1: the same with reward 0.4 everywhere and |log ρ| 0.002 / 0.006; one NULL |log ρ| at step 4
NONE1 = NONE0.assign(reward_mean=0.4, is_log_ratio_abs_mean=[0.002] * 3 + [0.006, np.nan, 0.006])
# tis-s0: TIS stores is_truncated_frac (0 then 0.01); rs_masked_frac absent
TIS0 = NONE0.assign(is_truncated_frac=[0.0] * 3 + [0.01] * 3)
LABELS = [RunLabel("healthy-grpo-bf16-none-s0", "", None, None, 0, 5),
          RunLabel("healthy-grpo-bf16-none-s1", "", None, None, 0, 5),
          RunLabel("healthy-grpo-bf16-tis-s0", "", None, None, 0, 5),
          RunLabel("lld-grpo-s0", "lld", 2, None, 0, 5)]  # a drill: left out
FRAMES = {"healthy-grpo-bf16-none-s0": NONE0, "healthy-grpo-bf16-none-s1": NONE1,
          "healthy-grpo-bf16-tis-s0": TIS0, "lld-grpo-s0": NONE0}


def test_run_windows_are_window_means_per_run():
    t = run_windows(FRAMES, LABELS, window=3).set_index(["run", "window"])
    assert sorted({r for r, _ in t.index}) == ["healthy-grpo-bf16-none-s0", "healthy-grpo-bf16-none-s1",
                                                "healthy-grpo-bf16-tis-s0"]  # the drill is not a grid run
    a0, a1 = t.loc[("healthy-grpo-bf16-none-s0", 0)], t.loc[("healthy-grpo-bf16-none-s0", 1)]
    assert (a0["arm"], a0["steps"], a1["steps"]) == ("bf16-none", "0–2", "3–5")
    # window 0: reward (0.1 + 0.2 + 0.3) / 3 = 0.2; window 1: 0.3 / 3 = 0.1
    assert (a0["reward"], a1["reward"]) == pytest.approx((0.2, 0.1))
    # |log ρ| 0.001 → 0.004; ESS mean (0.999 + 0.999 + 0.99) / 3 = 0.996, min 0.99
    assert (a0["abs_log_ratio"], a1["abs_log_ratio"]) == pytest.approx((0.001, 0.004))
    assert (a1["ess"], a1["ess_min"]) == pytest.approx((0.996, 0.99))
    assert pd.isna(a0["truncated"]) and pd.isna(a0["masked"])  # never logged: NULL, not 0
    # the NULL at step 4 is skipped: (0.006 + 0.006) / 2
    assert t.loc[("healthy-grpo-bf16-none-s1", 1), "abs_log_ratio"] == pytest.approx(0.006)
    assert t.loc[("healthy-grpo-bf16-tis-s0", 1), "truncated"] == pytest.approx(0.01)


def test_arm_windows_average_the_runs_and_keep_the_lowest_ess():
    t = arm_windows(run_windows(FRAMES, LABELS, window=3)).set_index(["arm", "window"])
    none1 = t.loc[("bf16-none", 1)]
    # two runs: reward (0.1 + 0.4) / 2 = 0.25; |log ρ| (0.004 + 0.006) / 2 = 0.005; ESS min min(0.99, 0.99)
    assert none1["runs"] == 2 and none1["reward"] == pytest.approx(0.25)
    assert none1["abs_log_ratio"] == pytest.approx(0.005) and none1["ess_min"] == pytest.approx(0.99)
    assert t.loc[("bf16-tis", 1), "runs"] == 1 and t.loc[("bf16-tis", 1), "truncated"] == pytest.approx(0.01)
    assert pd.isna(t.loc[("bf16-none", 0), "truncated"])


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="--window must be ≥ 1"):
        run_windows(FRAMES, LABELS, window=0)
