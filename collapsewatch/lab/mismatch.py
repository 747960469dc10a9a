"""`lab mismatch`: a grid's train–inference mismatch over time, per run and per correction arm.

A run's *arm* is its setting (``natural.setting_of``: ``healthy-grpo-bf16-tis-s1`` → ``bf16-tis``). Its steps are cut
into consecutive windows of ``window`` steps counted from its first step (window w holds steps
first + w·window … first + (w+1)·window − 1). Per run and window, over the window's non-NULL values:

* ``reward`` = mean ``reward_mean``;
* ``abs_log_ratio`` = mean ``is_log_ratio_abs_mean`` (mean |logp_old − logp_rollout| per token, nats);
* ``ess`` = mean ``is_ess``, ``ess_min`` = its minimum (1 = sampler and trainer agree);
* ``truncated`` = mean ``is_truncated_frac`` (TIS), ``masked`` = mean ``rs_masked_frac`` (MIS); NULL in an arm
  without that correction (the trainer stores NULL there).

Per arm and window: the mean over the arm's runs of each column (``ess_min``: the minimum), and ``runs``, how many
runs have steps in that window. A metric the runs never logged stays NULL (never 0).
"""

from __future__ import annotations

import pandas as pd

from .labels import RunLabel
from .natural import setting_of

WINDOW = 40
METRICS = {"reward": "reward_mean", "abs_log_ratio": "is_log_ratio_abs_mean", "ess": "is_ess",
           "ess_min": "is_ess", "truncated": "is_truncated_frac", "masked": "rs_masked_frac"}
RUN_COLUMNS = ["run", "arm", "window", "steps", *METRICS]
ARM_COLUMNS = ["arm", "window", "steps", "runs", *METRICS]


def _stat(values: pd.Series, name: str) -> float | None:
    v = pd.to_numeric(values, errors="coerce").dropna()
    if not len(v):
        return None
    return float(v.min()) if name == "ess_min" else float(v.mean())


def run_windows(frames: dict[str, pd.DataFrame], labels: list[RunLabel], window: int = WINDOW) -> pd.DataFrame:
    """One row per undrilled run and window (columns ``RUN_COLUMNS``; ``steps`` = 'first–last' of the window)."""
    if window < 1:
        raise ValueError(f"--window must be ≥ 1, got {window}")
    rows = []
    for lab in sorted((lab for lab in labels if not lab.kind), key=lambda lab: lab.run):
        df = frames[lab.run]
        idx = (df["step"].astype(int) - lab.first_step) // window
        for w, g in df.groupby(idx, sort=True):
            lo = lab.first_step + int(w) * window
            rows.append({"run": lab.run, "arm": setting_of(lab.run), "window": int(w),
                         "steps": f"{lo}–{lo + window - 1}",
                         **{name: _stat(g[col], name) if col in g else None for name, col in METRICS.items()}})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def arm_windows(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per arm and window (columns ``ARM_COLUMNS``): the runs' window values averaged (``ess_min``: minimum)."""
    out = []
    for (arm, w), g in per_run.groupby(["arm", "window"], sort=True) if len(per_run) else []:
        row: dict[str, object] = {"arm": arm, "window": int(w), "steps": g["steps"].iat[0], "runs": len(g)}
        for name in METRICS:
            v = pd.to_numeric(g[name], errors="coerce").dropna()
            row[name] = None if not len(v) else float(v.min() if name == "ess_min" else v.mean())
        out.append(row)
    return pd.DataFrame(out, columns=ARM_COLUMNS)
