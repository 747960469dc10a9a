"""Rows and column definitions for the dashboard's grids (pure: DataFrames in, JSON-ready lists out)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from . import theme
from .sweep import BASE, FIELD, Axis, Sweep


def epoch_ms(ts: Any) -> float | None:
    """A time as milliseconds since the epoch (None for a missing one): the grids show it as an age in the browser
    (``runAge`` in ``assets/grid.js``), so a row whose data did not change is never sent again for its age."""
    if ts is None or pd.isna(ts):
        return None
    t = pd.Timestamp(ts)
    return (t.tz_localize("UTC") if t.tzinfo is None else t).value / 1e6


def _clean(v: Any) -> Any:
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


ACTIVE_WINDOW = 5
"""An event is *active* when its phase still held within this many steps of the run's last step."""


def active_flags(events: pd.DataFrame, last_step: int | None) -> tuple[int, str]:
    """(number of active episodes, their 'detector:phase' names, sorted and distinct)."""
    if last_step is None or events.empty:
        return 0, ""
    live = events[events["step_end"] >= last_step - ACTIVE_WINDOW]
    return len(live), ", ".join(sorted({f"{d}:{p}" for d, p in zip(live["detector"], live["phase"], strict=True)}))


RUNS_VERSION = "runs_version"
"""The column of ``history.run_table`` that numbers each run's row: a new number whenever the run's row is read
again, so a memo of what is derived from the row (``runs_rows``) is kept until then."""
_memo: dict[tuple[str, int], dict[str, Any]] = {}


def runs_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """One grid row per run of ``history.run_table``, with links to its overview and tokens pages. A run's row whose
    ``RUNS_VERSION`` was seen before is the one made then (the same object): a refresh makes only the changed runs'
    rows. (Its age is the browser's: ``updated`` holds the time, ``epoch_ms``.)"""
    if df.empty or RUNS_VERSION not in df.columns:
        return _runs_rows(df)
    keys = list(zip(df["run"].tolist(), df[RUNS_VERSION].tolist(), strict=True))  # (tolist: an Arrow-backed
    # column iterated value by value costs a pandas call per value)
    missing = [i for i, k in enumerate(keys) if k not in _memo]
    made = dict(zip(missing, _runs_rows(df.iloc[missing]), strict=True)) if missing else {}
    rows = []
    for i, k in enumerate(keys):
        row = made.get(i) or _memo.get(k)
        if row is None:  # pruned by another refresh meanwhile
            row = _runs_rows(df.iloc[[i]])[0]
        _memo[k] = row
        rows.append(row)
    if len(_memo) > 4 * len(keys) + 1024:  # rows of runs re-read since: kept no longer than needed
        live = set(keys)
        for k in [k for k in _memo if k not in live]:
            del _memo[k]
    return rows


def grid_changes(held: tuple[tuple[str, ...], dict[str, Any]] | None, names: list[str], keys: list[Any],
                 rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What a grid whose rows are ``held`` (their ids in order and each row's key, e.g. its ``RUNS_VERSION``) must be
    sent to show ``rows`` (ids ``names``, keys ``keys``): None — send every row (nothing is known of what it holds,
    the order of the rows it keeps changed, or a row joins elsewhere than at the top); ``{}`` — nothing changed;
    else an AG Grid transaction: ``add`` (new rows, at the top), ``update`` (rows whose key changed, or is None),
    ``remove`` (rows gone). Ids are the grids' ``getRowId`` field, ``name``."""
    if held is None:
        return None
    order, before = held
    now = dict(zip(names, keys, strict=True))
    if [n for n in names if n in before] != [n for n in order if n in now]:
        return None
    added = [n for n in names if n not in before]
    if names[:len(added)] != added:
        return None
    at = {n: i for i, n in enumerate(names)}
    out: dict[str, Any] = {}
    if added:
        out.update(add=[rows[at[n]] for n in added], addIndex=0)
    update = [rows[at[n]] for n in names if n in before and (now[n] is None or now[n] != before[n])]
    if update:
        out["update"] = update
    remove = [{"name": n} for n in order if n not in now]
    if remove:
        out["remove"] = remove
    return out


def _runs_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for r in df.to_dict("records"):
        best, at = _clean(r.get("reward_best")), _clean(r.get("reward_best_step"))
        rows.append({
            "run": f"[{r['run']}](/run/{r['run']})", "name": r["run"], "status": r["status"],
            "objective": _clean(r["objective"]) or "", "steps": int(r["n_steps"] or 0),
            "last_step": _clean(r["last_step"]), "last_reward": _clean(r["last_reward"]),
            "reward_now": _clean(r.get("reward_now")), "reward_best": best,
            "reward_best_at": f"step {at}" if at is not None else "", "spark": r.get("reward_spark") or "",
            "collapse_step": _clean(r.get("collapse_step")), "worst": _clean(r.get("worst_severity")) or "none",
            "verdict": (r.get("verdict") or "") + ("*" if r.get("events_computed") else ""),
            "verdict_sentence": r.get("verdict_sentence") or "",
            "episodes": " · ".join(f"{int(r.get('n_' + s) or 0)} {s}" for s in ("critical", "warning", "info")
                                   if r.get("n_" + s)),
            "ratio_p50_pos": _clean(r.get("last_ratio_p50_pos")), "logp_old_correct": _clean(r.get("last_logp_old_correct")),
            "entropy": _clean(r.get("last_entropy")),
            "flags": _clean(r["active_flags"]) or "", "n_active": int(r["n_active"] or 0),
            "events": int(r["n_events"] or 0), "policy": "on-policy" if r["on_policy"] else "off-policy",
            "updated": epoch_ms(r["updated_at"]), "tokens": f"[tokens](/tokens/{r['run']})",
        })
    return rows


def _status_style() -> dict[str, Any]:
    return {"styleConditions": [{"condition": f"params.value == '{k}'", "style": {"color": c, "fontWeight": 700}}
                                for k, c in theme.STATUS_COLOURS.items()]}


def _verdict_style() -> dict[str, Any]:
    return {"styleConditions": [{"condition": f"(params.value || '').startsWith('{k}')",
                                 "style": {"color": c, "fontWeight": 700}} for k, c in theme.VERDICT_COLOURS.items()]}


def _severity_style() -> dict[str, Any]:
    return {"styleConditions": [{"condition": f"params.value == '{k}'", "style": {"color": c, "fontWeight": 700}}
                                for k, c in theme.SEVERITY_COLOURS.items()]}


def _num(field: str, header: str, fmt: str, width: int = 100, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": header, "type": "numericColumn", "width": width,
            "valueFormatter": {"function": f"params.value == null ? '—' : d3.format('{fmt}')(params.value)"}, **extra}


RUNS_COLUMNS: list[dict[str, Any]] = [
    {"field": "run", "headerName": "run", "cellRenderer": "markdown", "flex": 2, "minWidth": 170,
     "checkboxSelection": True, "headerCheckboxSelection": True},
    {"field": "verdict", "headerName": "verdict", "cellStyle": _verdict_style(), "width": 105,
     "tooltipField": "verdict_sentence",
     "headerTooltip": "healthy / warning / collapsed (collapsewatch.verdict; hover for the sentence). *: episodes "
                      "computed on read with today's detector rules, the stored ones came from other rules"},
    {"field": "status", "headerName": "status", "cellStyle": _status_style(), "width": 95},
    {"field": "objective", "headerName": "objective", "width": 110},
    {"field": "steps", "headerName": "steps", "type": "numericColumn", "width": 75},
    _num("reward_now", "reward now", ".3f", 100,
         headerTooltip="the reward level at the last step: median of the last 10 logged reward_mean points (the "
                       "verdict's, collapsewatch.reward.reward_level)"),
    _num("reward_best", "best reward", ".3f", 100,
         headerTooltip="the highest reward level (median of the last 10 reward_mean points, of all of them from the "
                       "5th while fewer): the verdict's 'reward best'"),
    {"field": "reward_best_at", "headerName": "best at", "width": 90},
    {"field": "spark", "headerName": "reward over the run", "width": 190, "sortable": False,
     "cellStyle": {"fontFamily": "monospace", "color": theme.METRIC_COLOURS["reward_mean"], "letterSpacing": "-1px"},
     "headerTooltip": "the reward level (median of the last 10 reward_mean points), from the 5th point to the last step "
                      "(▁ lowest, █ highest of this run)"},
    _num("collapse_step", "collapse step", "d", 105,
         headerTooltip="reward collapse: the 10-point median reward falls to ≤ 0.5 × its best (net of noise) and "
                       "never recovers above 0.75 ×, for ≥ 10 more points (collapsewatch.reward, the one rule)"),
    {"field": "worst", "headerName": "worst severity", "cellStyle": _severity_style(), "width": 110,
     "headerTooltip": "the worst severity any detector episode ever had in this run"},
    {"field": "episodes", "headerName": "episodes by severity", "width": 190},
    {"field": "flags", "headerName": "open at the last step", "flex": 1, "minWidth": 150,
     "headerTooltip": f"episodes still open within {ACTIVE_WINDOW} steps of the last step",
     "cellStyle": {"color": theme.DETECTOR_COLOURS["isdd"], "fontWeight": 600}},
    _num("ratio_p50_pos", "A>0 ratio median", ".3f", 120,
         headerTooltip="ratio_p50_pos at the last step (ISDD: drifts below 1)",
         cellStyle={"styleConditions": [{"condition": "params.value != null && params.value < 0.9",
                                         "style": {"color": theme.DETECTOR_COLOURS["isdd"], "fontWeight": 700}}]}),
    {"field": "policy", "headerName": "policy", "width": 95},
    {"field": "updated", "headerName": "updated", "width": 95, "type": "numericColumn",
     "valueFormatter": {"function": "runAge(params.value)"},
     "headerTooltip": "time since the run last wrote (its run row's updated_at), as this browser's clock reads it"},
    {"field": "tokens", "headerName": "", "cellRenderer": "markdown", "width": 75, "sortable": False},
]


def axis_column(axis: Axis) -> dict[str, Any]:
    """A config axis as a grid column with the grid's own filter (AG Grid community): a number filter on a numeric
    axis, a text filter otherwise, both with a filter box under the header."""
    col: dict[str, Any] = {"field": FIELD + axis.name, "headerName": axis.name, "width": 110,
                           "floatingFilter": True, "headerTooltip": f"config key {axis.name}"}
    if axis.numeric:
        col.update(type="numericColumn", filter="agNumberColumnFilter",
                   valueFormatter={"function": "params.value == null ? '' : d3.format('.4~g')(params.value)"})
    else:
        col.update(filter="agTextColumnFilter")
    return col


def sweep_rows(sw: Sweep) -> list[dict[str, Any]]:
    """The sweep table: each run linked to its page, its verdict, collapse step, status, last step and axis values."""
    return [{"run": f"[{r['run']}](/run/{r['run']})", "name": r["run"], "verdict": r["verdict"], "status": r["status"],
             "collapse_step": _clean(r["collapse_step"]), "last_step": _clean(r["last_step"]),
             "config": "" if r["has_config"] else "none", **fields}
            for r, fields in zip(sw.frame[list(BASE)].to_dict("records"), sw.fields, strict=True)]


def sweep_columns(axes: list[Axis]) -> list[dict[str, Any]]:
    return [{"field": "run", "headerName": "run", "cellRenderer": "markdown", "minWidth": 170, "flex": 1},
            {"field": "verdict", "headerName": "verdict", "cellStyle": _verdict_style(), "width": 105,
             "filter": "agTextColumnFilter", "floatingFilter": True},
            _num("collapse_step", "collapse step", "d", 110, filter="agNumberColumnFilter", floatingFilter=True),
            *[axis_column(a) for a in axes],
            {"field": "status", "headerName": "status", "cellStyle": _status_style(), "width": 95},
            _num("last_step", "last step", "d", 90),
            {"field": "config", "headerName": "config", "width": 80,
             "headerTooltip": "none: the run has no config (on no axis, not on the chart)"}]


def sql_columns(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Column definitions for a query result: numbers right-aligned with 6 significant digits."""
    cols = []
    for c in df.columns:
        d: dict[str, Any] = {"field": str(c), "headerName": str(c)}
        if pd.api.types.is_float_dtype(df[c]):
            d.update(type="numericColumn", valueFormatter={"function": "params.value == null ? 'NULL' : "
                                                                        "d3.format('.6~g')(params.value)"})
        elif pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]):
            d.update(type="numericColumn")
        cols.append(d)
    return cols


def sql_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Records with JSON-safe values (timestamps as ISO text, NaN as null, nested values as text)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_datetime64_any_dtype(out[c]):
            out[c] = out[c].astype(str)
        elif out[c].dtype == object:
            out[c] = out[c].map(lambda v: v if v is None or isinstance(v, (str, int, float, bool)) else str(v))
    out.columns = [str(c) for c in out.columns]
    return [{k: _clean(v) for k, v in r.items()} for r in out.to_dict("records")]


def csv_download(rows: list[dict[str, Any]] | None, columns: list[str], filename: str) -> dict[str, Any]:
    """A ``dcc.Download`` payload: ``rows`` as CSV with ``columns`` in that order (missing values empty)."""
    df = pd.DataFrame(rows or [], columns=columns or None)
    return {"content": df.to_csv(index=False), "filename": filename, "type": "text/csv", "base64": False}
