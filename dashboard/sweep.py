"""Sweeps over the runs page's table (pure: ``history.run_table`` rows in, frames out): each run's config flattened
to dotted names, the config *axes* of a set of runs (the keys whose values differ; constant keys are not axes),
each run's place on them with its verdict and collapse step, the runs selected by a name pattern, and the runs
grouped by a key with their verdicts counted.

One home for a config's flat names: nested keys dotted (``{"opt": {"lr": 1}}`` → ``opt.lr``); the compare page's
config diff reads them from here too."""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

SAME_BY_NATURE = ("run", "store")
"""Config keys never an axis: they differ between any two runs (the run's own name) or say where, not how."""
MISSING = "—"
"""A config key a run's config lacks (an axis value: missing is a setting too)."""
VERDICTS = ("healthy", "warning", "collapsed")
"""The verdict's statuses (``collapsewatch.verdict``), mildest first: the order of counts and colour codes."""
RUN_FIELDS = ("verdict", "status", "objective")
"""Run-row fields the runs page groups by besides the config axes."""


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``config`` with nested mappings flattened to dotted names; an empty mapping contributes nothing, a list stays
    one value."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, name + "."))
        else:
            out[name] = v
    return out


@lru_cache(maxsize=4096)
def _flat_text(text: str) -> tuple[tuple[str, Any], ...] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    return tuple(flatten(value).items())


def flat_config(config: Any) -> dict[str, Any] | None:
    """A run row's config (JSON text as the store keeps it, or a dict) flattened; None when the run has none (no
    config, an empty one, or text that is not a JSON object). Parsed once per distinct text."""
    if isinstance(config, Mapping):
        return flatten(config) if config else None
    if not isinstance(config, str) or not config:
        return None
    items = _flat_text(config)
    return None if items is None else dict(items)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def label(v: Any) -> str:
    """A config value as text: numbers with up to 6 significant digits, lists and dicts as JSON."""
    if v is None:
        return "null"
    if v == "":
        return '""'
    if is_number(v):
        return f"{v:.6g}" if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, default=str)
    return str(v)


@dataclass(frozen=True)
class Axis:
    """A config key whose value differs across runs. ``numeric``: every configured run has a number there (an int
    or float, not a bool); otherwise categorical, a missing value being ``MISSING``. ``values``: the distinct
    values, ascending (numbers) or by text."""

    name: str
    numeric: bool
    values: tuple[Any, ...]


def config_axes(configs: Mapping[str, Mapping[str, Any] | None]) -> list[Axis]:
    """The axes of runs' flat configs (``flat_config``), by name. Runs without a config take no part (they have no
    setting to compare); fewer than two runs with a config have no axes."""
    flat = {run: {k: v for k, v in c.items() if k not in SAME_BY_NATURE} for run, c in configs.items() if c}
    if len(flat) < 2:
        return []
    axes = []
    for key in sorted(set().union(*flat.values())):
        values = [f.get(key, MISSING) for f in flat.values()]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < 2:
            continue  # the same in every run: not an axis
        if all(is_number(v) for v in values):
            axes.append(Axis(key, True, tuple(sorted(set(values)))))
        else:
            axes.append(Axis(key, False, tuple(sorted({v if v is MISSING else label(v) for v in values}))))
    return axes


def axis_value(axis: Axis, config: Mapping[str, Any] | None) -> Any:
    """A run's value on ``axis``: the number, the text (``label``), ``MISSING`` where its config lacks the key, None
    when the run has no config at all."""
    if config is None:
        return None
    if axis.name not in config:
        return MISSING
    v = config[axis.name]
    if axis.numeric:
        return float(v) if isinstance(v, float) and not math.isfinite(v) else v
    return label(v)


def select(table: pd.DataFrame, runs: str | None) -> pd.DataFrame:
    """The rows whose run name matches ``runs``: comma-separated patterns, each a prefix or a glob (``*``, ``?``,
    ``[``); every row when empty."""
    patterns = [p.strip() for p in (runs or "").split(",") if p.strip()]
    if not patterns or table.empty:
        return table

    def hit(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) if any(c in p for c in "*?[") else name.startswith(p)
                   for p in patterns)

    return table[table["run"].map(hit)].reset_index(drop=True)


@dataclass(frozen=True)
class Sweep:
    """Runs × axes: ``frame`` has run, status, verdict, collapse_step, last_step, has_config and one column per axis
    (``axes``, by name); ``unconfigured``: the runs without a config (listed in ``frame``, on no axis)."""

    axes: list[Axis]
    frame: pd.DataFrame
    unconfigured: list[str]


BASE = ("run", "status", "verdict", "collapse_step", "last_step", "has_config")


def sweep(table: pd.DataFrame) -> Sweep:
    """The sweep of ``table`` (``history.run_table`` rows, or a ``select`` of them), in its row order."""
    if table.empty:
        return Sweep([], pd.DataFrame(columns=list(BASE)), [])
    configs = {r: flat_config(c) for r, c in zip(table["run"], table["config"], strict=True)}
    axes = config_axes(configs)
    rows = []
    for r in table.to_dict("records"):
        cfg = configs[r["run"]]
        step = r.get("collapse_step")
        rows.append({"run": r["run"], "status": r.get("status"), "verdict": r.get("verdict") or "",
                     "collapse_step": None if step is None or pd.isna(step) else int(step),
                     "last_step": None if pd.isna(r.get("last_step")) else int(r["last_step"]),
                     "has_config": cfg is not None, **{a.name: axis_value(a, cfg) for a in axes}})
    frame = pd.DataFrame(rows, columns=[*BASE, *(a.name for a in axes)])
    return Sweep(axes, frame, [r for r, c in configs.items() if c is None])


def group_key(frame: pd.DataFrame, key: str) -> pd.Series:
    """Each run's group under ``key`` (a ``RUN_FIELDS`` field or an axis of ``frame``) as text: ``MISSING`` where its
    config lacks the key, "no config" for a run without one."""
    if key in RUN_FIELDS:
        return frame[key].fillna("").astype(str)
    return pd.Series([("no config" if not has else label(v) if v is not MISSING else MISSING)
                      for v, has in zip(frame[key], frame["has_config"], strict=True)], index=frame.index)


def groups(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One row per value of ``key``: runs, the count of each verdict, the earliest collapse step. Numeric groups in
    numeric order, others by text."""
    cols = ["group", "runs", *VERDICTS, "first_collapse"]
    if frame.empty or (key not in RUN_FIELDS and key not in frame.columns):
        return pd.DataFrame(columns=cols)
    g = frame.assign(group=group_key(frame, key))
    out = []
    for value, part in g.groupby("group", sort=False):
        steps = part["collapse_step"].dropna()
        out.append({"group": value, "runs": len(part), **{v: int((part["verdict"] == v).sum()) for v in VERDICTS},
                    "first_collapse": int(steps.min()) if len(steps) else None})
    df = pd.DataFrame(out, columns=cols)
    df["first_collapse"] = pd.Series([o["first_collapse"] for o in out], dtype=object)  # None, not NaN
    order = pd.to_numeric(df["group"], errors="coerce")
    return df.assign(_n=order).sort_values(["_n", "group"], na_position="last", kind="stable").drop(
        columns="_n").reset_index(drop=True)
