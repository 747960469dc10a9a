"""Sweeps over the runs page's table (pure: ``history.run_table`` rows in, frames out): each run's config flattened
to dotted names, the config *axes* of a set of runs (the keys whose values differ; constant keys are not axes),
each run's place on them with its verdict and collapse step, the runs selected by a name pattern, and the runs
grouped by a key with their verdicts counted.

One home for a config's flat names: nested keys dotted (``{"opt": {"lr": 1}}`` → ``opt.lr``); the compare page's
config diff reads them from here too."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import pandas as pd

from collapsewatch.verdict import NO_STEPS

SAME_BY_NATURE = ("run", "store")
"""Config keys never an axis: they differ between any two runs (the run's own name) or say where, not how."""
MISSING = "—"
"""A config key a run's config lacks (an axis value: missing is a setting too)."""
VERDICTS = ("healthy", "warning", "collapsed")
"""The verdict's statuses (``collapsewatch.verdict``), mildest first: the order of counts and colour codes."""
FILTERS = (*VERDICTS, NO_STEPS)
"""The runs page's verdict filter: the statuses, and the runs with no step recorded (``verdict.NO_STEPS``: no
verdict to judge, so in no verdict's count or colour and not on the sweep chart; a group's ``runs`` counts them)."""
RUN_FIELDS = ("verdict", "status", "objective")
"""Run-row fields the runs page groups by besides the config axes."""
FIELD = "config."
"""A config axis's field in the dashboard's grids: ``config.<dotted key>`` (the grids set ``suppressFieldDotNotation``)."""


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
        if len({_same(v) for v in values}) < 2:
            continue  # the same in every run: not an axis
        if all(is_number(v) for v in values):
            axes.append(Axis(key, True, tuple(sorted(set(values)))))
        else:
            axes.append(Axis(key, False, tuple(sorted({v if v is MISSING else label(v) for v in values}))))
    return axes


def _same(v: Any) -> Any:
    """A hashable stand-in of a config value, equal only for equal values of the same kind (1 ≠ True ≠ "1")."""
    if isinstance(v, (list, tuple, dict)):
        return ("json", json.dumps(v, sort_keys=True, default=str))
    return (type(v).__name__, v)


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
    (``axes``, by name); ``unconfigured``: the runs without a config (listed in ``frame``, on no axis); ``digest``:
    of the rows it was computed from (a page redraws when it changes)."""

    axes: list[Axis]
    frame: pd.DataFrame
    unconfigured: list[str]
    digest: str = ""
    fields: list[dict[str, Any]] = field(default_factory=list)
    """Each run's axis values under their grid fields (``FIELD`` + name), JSON-safe: computed with the axes."""


BASE = ("run", "status", "verdict", "collapse_step", "last_step", "has_config")


_sweeps: dict[tuple, Sweep] = {}
KEPT = 8  # sweeps kept (the runs page's and a few sweep-page selections)


def sweep(table: pd.DataFrame) -> Sweep:
    """The sweep of ``table`` (``history.run_table`` rows, or a ``select`` of them), in its row order. The same rows
    again (a refresh where nothing changed) give the sweep computed before."""
    if table.empty:
        return Sweep([], pd.DataFrame(columns=list(BASE)), [])
    cols = [table[c].tolist() if c in table.columns else [None] * len(table)
            for c in ("run", "status", "verdict", "collapse_step", "last_step", "config")]
    cols[3:5] = [[_int(v) for v in c] for c in cols[3:5]]  # NaN ≠ NaN: the key holds ints and None
    cols[5] = [c if isinstance(c, str) else None for c in cols[5]]
    key = tuple(map(tuple, cols))
    if key not in _sweeps:
        while len(_sweeps) >= KEPT:
            del _sweeps[next(iter(_sweeps))]
        _sweeps[key] = replace(_computed(*cols), digest=hashlib.sha1(repr(key).encode()).hexdigest())
    return _sweeps[key]


def _int(v: Any) -> int | None:
    if type(v) is int:
        return v
    return None if v is None or pd.isna(v) else int(v)


def _computed(runs: list, status: list, verdict: list, collapse: list, last: list, config: list) -> Sweep:
    axes, columns, has, fields = _placed(tuple(runs), tuple(config))
    data = {"run": runs, "status": status, "verdict": [v or "" for v in verdict],
            "collapse_step": pd.Series(collapse, dtype=object), "last_step": pd.Series(last, dtype=object),
            "has_config": has, **columns}
    frame = pd.DataFrame(data, columns=[*BASE, *(a.name for a in axes)])
    return Sweep(axes, frame, [r for r, h in zip(runs, has, strict=True) if not h], fields=fields)


@lru_cache(maxsize=KEPT)
def _placed(runs: tuple, config: tuple) -> tuple[list[Axis], dict[str, list], list[bool], list[dict]]:
    """The axes of the runs' configs and each run's values on them: computed again only when a run or a config
    changes (a running run's steps and verdict do not)."""
    configs = [flat_config(c) for c in config]
    axes = config_axes(dict(zip(runs, configs, strict=True)))
    columns = {a.name: [axis_value(a, c) for c in configs] for a in axes}
    safe = {FIELD + k: [None if isinstance(v, float) and not math.isfinite(v) else v for v in vs]
            for k, vs in columns.items()}
    fields = [{f: vs[i] for f, vs in safe.items()} for i in range(len(runs))]
    return axes, columns, [c is not None for c in configs], fields


def group_key(frame: pd.DataFrame, key: str) -> list[str]:
    """Each run's group under ``key`` (a ``RUN_FIELDS`` field or an axis of ``frame``) as text: ``MISSING`` where its
    config lacks the key, "no config" for a run without one."""
    if key in RUN_FIELDS:
        return ["" if v is None or v != v else str(v) for v in frame[key].tolist()]
    return ["no config" if not has else MISSING if v is MISSING else label(v)
            for v, has in zip(frame[key].tolist(), frame["has_config"].tolist(), strict=True)]


def _order(group: str) -> tuple:
    try:
        return (0, float(group), group)
    except ValueError:
        return (1, 0.0, group)


def groups(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """One row per value of ``key``: runs, the count of each verdict, the earliest collapse step. Numeric groups in
    numeric order, then the others by text."""
    cols = ["group", "runs", *VERDICTS, "first_collapse"]
    if frame.empty or (key not in RUN_FIELDS and key not in frame.columns):
        return pd.DataFrame(columns=cols)
    out: dict[str, dict[str, Any]] = {}
    for group, verdict, step in zip(group_key(frame, key), frame["verdict"].tolist(), frame["collapse_step"].tolist(),
                                    strict=True):
        g = out.setdefault(group, {"group": group, "runs": 0, **dict.fromkeys(VERDICTS, 0), "first_collapse": None})
        g["runs"] += 1
        if verdict in VERDICTS:
            g[verdict] += 1
        if step is not None and step == step and (g["first_collapse"] is None or step < g["first_collapse"]):
            g["first_collapse"] = int(step)
    rows = [out[k] for k in sorted(out, key=_order)]
    df = pd.DataFrame(rows, columns=cols)
    df["first_collapse"] = pd.Series([r["first_collapse"] for r in rows], dtype=object)  # None, not NaN
    return df
