"""Rows and column definitions for the dashboard's grids (pure: DataFrames in, JSON-ready lists out)."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from . import theme


def age(ts: Any, now: datetime | None = None) -> str:
    """'12 s ago', '4 min ago', '3 h ago', '2 d ago' (empty for a missing time)."""
    if ts is None or pd.isna(ts):
        return ""
    now = now or datetime.now(timezone.utc)
    secs = max(0.0, (now - pd.Timestamp(ts).to_pydatetime()).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if secs >= size:
            return f"{int(secs // size)} {unit} ago"
    return f"{int(secs)} s ago"


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


def runs_rows(df: pd.DataFrame, now: datetime | None = None) -> list[dict[str, Any]]:
    """One grid row per run of ``queries.run_list``, with links to its overview and tokens pages."""
    rows = []
    for r in df.to_dict("records"):
        rows.append({
            "run": f"[{r['run']}](/run/{r['run']})", "name": r["run"], "status": r["status"],
            "objective": _clean(r["objective"]) or "", "steps": int(r["n_steps"] or 0),
            "last_step": _clean(r["last_step"]), "last_reward": _clean(r["last_reward"]),
            "ratio_p50_pos": _clean(r.get("last_ratio_p50_pos")), "logp_old_correct": _clean(r.get("last_logp_old_correct")),
            "entropy": _clean(r.get("last_entropy")),
            "flags": _clean(r["active_flags"]) or "", "n_active": int(r["n_active"] or 0),
            "events": int(r["n_events"] or 0), "policy": "on-policy" if r["on_policy"] else "off-policy",
            "updated": age(r["updated_at"], now), "tokens": f"[tokens](/tokens/{r['run']})",
        })
    return rows


def _status_style() -> dict[str, Any]:
    return {"styleConditions": [{"condition": f"params.value == '{k}'", "style": {"color": c, "fontWeight": 700}}
                                for k, c in theme.STATUS_COLOURS.items()]}


def _num(field: str, header: str, fmt: str, width: int = 100, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": header, "type": "numericColumn", "width": width,
            "valueFormatter": {"function": f"params.value == null ? '—' : d3.format('{fmt}')(params.value)"}, **extra}


RUNS_COLUMNS: list[dict[str, Any]] = [
    {"field": "run", "headerName": "run", "cellRenderer": "markdown", "flex": 2, "minWidth": 170},
    {"field": "status", "headerName": "status", "cellStyle": _status_style(), "width": 95},
    {"field": "objective", "headerName": "objective", "width": 115},
    {"field": "steps", "headerName": "steps", "type": "numericColumn", "width": 80},
    {"field": "last_step", "headerName": "last step", "type": "numericColumn", "width": 90},
    _num("last_reward", "reward", ".3f", 85, headerTooltip="reward_mean at the last step"),
    _num("ratio_p50_pos", "r̃ A>0", ".3f", 80, headerTooltip="ratio_p50_pos at the last step (ISDD: drifts below 1)",
         cellStyle={"styleConditions": [{"condition": "params.value != null && params.value < 0.9",
                                         "style": {"color": theme.DETECTOR_COLOURS["isdd"], "fontWeight": 700}}]}),
    _num("logp_old_correct", "logp_old ✓", ".3f", 100,
         headerTooltip="logp_old_mean_correct at the last step (LLD: falls)"),
    _num("entropy", "entropy", ".2f", 80, headerTooltip="entropy_mean at the last step"),
    {"field": "flags", "headerName": "active flags", "flex": 2, "minWidth": 200,
     "cellStyle": {"color": theme.DETECTOR_COLOURS["isdd"], "fontWeight": 600}},
    {"field": "events", "headerName": "events", "type": "numericColumn", "width": 80},
    {"field": "policy", "headerName": "policy", "width": 95},
    {"field": "updated", "headerName": "updated", "width": 100},
    {"field": "tokens", "headerName": "", "cellRenderer": "markdown", "width": 75, "sortable": False},
]


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
