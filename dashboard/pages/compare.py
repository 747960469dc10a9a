"""Compare: chosen step metrics of several runs overlaid, one panel per metric, one colour per run."""

from __future__ import annotations

import dash
import pandas as pd
from dash import Input, Output, callback, dcc, html

from collapsewatch.catalogue import ALL_STEP_COLUMNS, by_name
from collapsewatch.store import queries

from .. import charts, history, ids, state
from ..figures import COLUMNS
from ..series import SMOOTHING

dash.register_page(__name__, path="/compare", name="Compare", title="collapsewatch · compare", order=3)
DEFAULT_METRICS = ("reward_mean", "ratio_p50_pos", "logp_old_mean_correct", "entropy_mean")
NUMERIC = [c for c in ALL_STEP_COLUMNS if by_name("step")[c].dtype in ("DOUBLE", "INTEGER", "BIGINT")]


def layout(runs: str | None = None, metrics: str | None = None, smooth: str | None = None, **_: str) -> html.Div:
    with state.borrow() as s:
        names = queries.run_names(s)
    chosen = [r for r in runs.split(",") if r in names] if runs else names[:3]
    picked = [m for m in metrics.split(",") if m in NUMERIC] if metrics else list(DEFAULT_METRICS)
    window = int(smooth) if smooth and smooth.isdigit() and int(smooth) in SMOOTHING else 1
    return html.Div([
        html.Div(className="bar", children=[
            html.H2("Compare"),
            dcc.Dropdown(id=ids.CMP_RUNS, options=names, value=chosen, multi=True, placeholder="runs",
                         style={"minWidth": 380}),
            dcc.Dropdown(id=ids.CMP_METRICS, options=NUMERIC, value=picked, multi=True, placeholder="metrics",
                         style={"minWidth": 520}),
            dcc.Dropdown(id=ids.CMP_SMOOTH, value=window, clearable=False, style={"minWidth": 190},
                         options=[{"label": "raw" if w == 1 else f"{w}-step mean", "value": w}
                                  for w in SMOOTHING]),
        ]),
        dcc.Graph(id=ids.CMP_GRAPH, config={"displaylogo": False}, className="card"),
    ])


@callback(Output(ids.CMP_GRAPH, "figure"), Input(ids.CMP_RUNS, "value"), Input(ids.CMP_METRICS, "value"),
          Input(ids.CMP_SMOOTH, "value"))
def draw(runs: list[str] | None, metrics: list[str] | None, smooth: int | None = 1):
    runs, metrics = runs or [], [m for m in (metrics or []) if m in NUMERIC]
    smooth = smooth if smooth in SMOOTHING else 1
    if not runs or not metrics:
        return charts.compare_figure(pd.DataFrame(), runs, metrics)
    with state.borrow() as s:
        df = _rows(s, runs, metrics)
    return charts.compare_figure(df, runs, metrics, smooth)


def _rows(s, runs: list[str], metrics: list[str]) -> pd.DataFrame:
    """Metrics of the overview come from the runs' cached histories; others are read from the store."""
    if not set(metrics) <= set(COLUMNS):
        return queries.compare_rows(s, runs, metrics)
    parts = []
    for run in runs:
        info = queries.run_info(s, run)
        if info is not None:
            rows = history.step_history(s, run, info["rank"], COLUMNS).rows_for(s, info["status"] == "running")
            parts.append(rows[["step", *metrics]].assign(run=run))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run", "step", *metrics])
