"""`lab hold`: does an objective hold the reward, L and the A>0 ratios under a drill?

The seed papers claim that a regulariser (SAPO-search, LLDS, BAPO …) keeps a run alive where GRPO falls. On
drilled runs the lab can test that: per run with drill onset N, over two windows of ``WINDOW`` steps —
*before* = the ``WINDOW`` steps before N, *after* = the run's last ``WINDOW`` steps:

* **reward held** — no reward collapse at or after the onset (:func:`.labels.reward_collapse`, the lab's
  one rule); a run whose reward collapsed before the onset gives no verdict;
* **L held** — mean L (``logp_old_mean_correct``) after ≥ mean L before − ``L_DROP`` nats/token (the LLD
  detector's default ``decay_change``); no correct response in the after window (L NULL) → not held;
* **ratios held** — median ``ratio_p05_pos`` over the after window's off-policy steps ≥ ``RATIO_FRAC`` × the
  before window's (the lower tail of the A>0 ratios is where ISDD shows); NULL either side → no verdict.

Per (objective, drill kind): the runs, how many held each, and the medians of the window means.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from .labels import RunLabel

WINDOW = 10
L_DROP = 0.05
RATIO_FRAC = 0.9
RUN_COLUMNS = ["run", "objective", "drill", "reward_held", "L_held", "ratios_held", "reward_before",
               "reward_after", "L_before", "L_after", "p05_before", "p05_after"]
TABLE_COLUMNS = ["objective", "drill", "runs", "reward_held", "L_held", "ratios_held", "reward_before",
                 "reward_after", "L_before", "L_after", "p05_before", "p05_after"]


def _mean(values: pd.Series) -> float | None:
    v = values.dropna()
    return float(v.mean()) if len(v) else None


def _median(values: pd.Series) -> float | None:
    v = values.dropna()
    return float(v.median()) if len(v) else None


def hold_run(label: RunLabel, frame: pd.DataFrame, objective: str) -> dict[str, Any] | None:
    """The verdicts and window means of one drilled run (None for an undrilled run)."""
    if not label.kind or label.onset is None:
        return None
    df = frame.sort_values("step")
    before = df[(df["step"] >= label.onset - WINDOW) & (df["step"] < label.onset)]
    after = df[df["step"] > int(df["step"].max()) - WINDOW]
    off_policy = lambda d: d[d["on_policy"].fillna(False) == False]  # noqa: E712, E731 (NULL: off-policy)
    out: dict[str, Any] = {
        "run": label.run, "objective": objective, "drill": label.kind,
        "reward_before": _mean(before["reward_mean"]), "reward_after": _mean(after["reward_mean"]),
        "L_before": _mean(before["logp_old_mean_correct"]), "L_after": _mean(after["logp_old_mean_correct"]),
        "p05_before": _median(off_policy(before)["ratio_p05_pos"]),
        "p05_after": _median(off_policy(after)["ratio_p05_pos"]),
    }
    out["reward_held"] = (True if label.collapse is None
                          else None if label.collapse < label.onset else False)
    lb, la = out["L_before"], out["L_after"]
    out["L_held"] = None if lb is None else (la is not None and la >= lb - L_DROP)
    pb, pa = out["p05_before"], out["p05_after"]
    out["ratios_held"] = None if pb is None or pa is None else pa >= RATIO_FRAC * pb
    return out


def _count(values: pd.Series) -> str:
    known = [bool(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return f"{sum(known)}/{len(known)}"


def hold_table(labels: Iterable[RunLabel], frames: dict[str, pd.DataFrame],
               objectives: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run rows, per (objective, drill) table). Held counts are "held/runs with a verdict"."""
    rows = [r for lab in labels
            if (r := hold_run(lab, frames[lab.run], objectives.get(lab.run, "?"))) is not None]
    runs = pd.DataFrame(rows, columns=RUN_COLUMNS)
    table = []
    for (objective, drill), g in runs.groupby(["objective", "drill"], sort=True):
        table.append({"objective": objective, "drill": drill, "runs": len(g),
                      **{k: _count(g[k]) for k in ("reward_held", "L_held", "ratios_held")},
                      **{k: _median(g[k].astype("float64")) for k in TABLE_COLUMNS[6:]}})
    return runs, pd.DataFrame(table, columns=TABLE_COLUMNS)


def objective_of(config: Any) -> str:
    """The objective a run's stored config names, with the trainer settings that make a recipe of it
    (advantages other than group_norm, dynamic sampling) — ``sampo (gigpo, dynamic_sampling 3)`` — so a recipe
    and its bare loss are told apart; "?" when unknown (an ingested or TRL run)."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return "?"
    config = config or {}
    name = str(config.get("objective") or "?")
    extra = [str(config["advantages"])] if config.get("advantages", "group_norm") != "group_norm" else []
    if config.get("dynamic_sampling"):
        extra.append(f"dynamic_sampling {config['dynamic_sampling']}")
    return f"{name} ({', '.join(extra)})" if extra else name
