"""Compare: chosen step metrics of several runs overlaid, one panel per metric, one colour per run (kept
whatever else is selected), each run's warning / critical episodes marked; align the runs at step 0, their first
episode or their collapse step; any panel on a log scale; and the config keys that differ between the runs.

URL: ``/compare?runs=a,b&metrics=reward_mean,grad_norm&smooth=16&align=collapse&log=grad_norm``."""

from __future__ import annotations

from collections.abc import Callable

import dash
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from collapsewatch.catalogue import ALL_STEP_COLUMNS, by_name
from collapsewatch.judge import judge
from collapsewatch.reward import reward_collapse
from collapsewatch.store import queries

from .. import charts, history, ids, state, tables
from ..events_view import first_critical_step, first_event_step
from ..figures import COLUMNS, DEFAULT_SMOOTH
from ..series import SMOOTHING

dash.register_page(__name__, path="/compare", name="Compare", title="collapsewatch · compare", order=3)
DEFAULT_METRICS = ("reward_mean", "ratio_p50_pos", "logp_old_mean_correct", "entropy_mean")
NUMERIC = [c for c in ALL_STEP_COLUMNS if by_name("step")[c].dtype in ("DOUBLE", "INTEGER", "BIGINT")]
ALIGN = {"start": "step 0", "first": "first episode", "critical": "first critical episode",
         "collapse": "reward collapse"}
ANCHORED = ("first", "critical", "collapse")
"""Alignments at a point a run may lack: such a run is not drawn, and the chart names it."""


def _events(s, runs: list[str]) -> pd.DataFrame:
    """The runs' episodes as the run page shows them (collapsewatch.judge: today's rules')."""
    parts = [judge(s, run).events.assign(run=run) for run in runs if s.has_run(run)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def default_runs(names: list[str], critical: Callable[[str], bool], n: int = 3) -> list[str]:
    """The ``n`` newest runs, with a healthy baseline (a run never critical) among them when the store has one.
    ``critical(run)`` is asked newest first and only until a healthy run is found: opening the page judges the
    newest runs, not the store."""
    chosen = names[:n]
    if any(not critical(r) for r in chosen):
        return chosen
    healthy = next((r for r in names[n:] if not critical(r)), None)
    return chosen if healthy is None else chosen[:n - 1] + [healthy]


def _critical(s, run: str) -> bool:
    events = judge(s, run).events
    return bool(len(events)) and bool((events["severity"] == "critical").any())


def layout(runs: str | None = None, metrics: str | None = None, smooth: str | None = None, align: str = "start",
           log: str | None = None, **_: str) -> html.Div:
    with state.borrow() as s:
        names = queries.run_names(s)
        chosen = [r for r in runs.split(",") if r in names] if runs else default_runs(names, lambda r: _critical(s, r))
    picked = [m for m in metrics.split(",") if m in NUMERIC] if metrics else list(DEFAULT_METRICS)
    window = int(smooth) if smooth and smooth.isdigit() and int(smooth) in SMOOTHING else DEFAULT_SMOOTH
    return html.Div([
        html.Div(className="bar", children=[
            html.H2("Compare"),
            dcc.Dropdown(id=ids.CMP_RUNS, options=names, value=chosen, multi=True, placeholder="runs",
                         style={"minWidth": 380}),
            dcc.Dropdown(id=ids.CMP_METRICS, options=NUMERIC, value=picked, multi=True, placeholder="metrics",
                         style={"minWidth": 480}),
            dcc.Dropdown(id=ids.CMP_SMOOTH, value=window, clearable=False, style={"minWidth": 150},
                         options=[{"label": "raw" if w == 1 else f"{w}-step mean", "value": w}
                                  for w in SMOOTHING]),
        ]),
        html.Div(className="bar", children=[
            html.Span("align at", className="hint"),
            dcc.RadioItems(id=ids.CMP_ALIGN, value=align if align in ALIGN else "start", inline=True,
                           className="radio-inline", options=[{"label": v, "value": k} for k, v in ALIGN.items()]),
            html.Span("log scale", className="hint"),
            dcc.Dropdown(id=ids.CMP_LOG, options=picked, value=[m for m in (log or "").split(",") if m in picked],
                         multi=True, placeholder="panels on a log y axis", style={"minWidth": 280}),
            html.Button("data CSV ↓", id=ids.CMP_CSV, className="btn btn-quiet", n_clicks=0),
            dcc.Download(id=ids.CMP_DOWNLOAD),
        ]),
        html.Div(id=ids.CMP_NOTE, className="hint"),
        dcc.Graph(id=ids.CMP_GRAPH, config={"displaylogo": False}, className="card"),
        html.Div(id=ids.CMP_CONFIG, className="card"),
    ])


@callback(Output(ids.CMP_GRAPH, "figure"), Output(ids.CMP_NOTE, "children"), Output(ids.CMP_CONFIG, "children"),
          Output(ids.CMP_LOG, "options"), Input(ids.CMP_RUNS, "value"), Input(ids.CMP_METRICS, "value"),
          Input(ids.CMP_SMOOTH, "value"), Input(ids.CMP_ALIGN, "value"), Input(ids.CMP_LOG, "value"))
def draw(runs: list[str] | None, metrics: list[str] | None, smooth: int | None = 1, align: str = "start",
         log: list[str] | None = None):
    runs, metrics = runs or [], [m for m in (metrics or []) if m in NUMERIC]
    smooth = smooth if smooth in SMOOTHING else 1
    if not runs or not metrics:
        return charts.compare_figure(pd.DataFrame(), runs, metrics), "", "", metrics
    with state.borrow() as s:
        infos = queries.run_infos(s, runs)
        df = _rows(s, runs, metrics, infos)
        events = _events(s, runs)
        colours = charts.run_colours(list(reversed(queries.run_names(s))))
        configs = {r: (infos[r] or {}).get("config") or {} for r in runs}
        anchors = _rows(s, runs, ["reward_mean"], infos) if align == "collapse" else events
    offsets, note = _offsets(runs, anchors, align)
    unaligned = {r: ALIGN[align] for r in runs if align in ANCHORED and r not in offsets}
    fig = charts.compare_figure(df, runs, metrics, smooth, colours, offsets, events, log or [], unaligned)
    return fig, note, config_table(charts.config_diff(configs)), metrics


def _offsets(runs: list[str], frame: pd.DataFrame, align: str) -> tuple[dict[str, int], str]:
    """Step to subtract per run, and a note naming runs that have no such point (left unshifted). ``frame`` holds
    the runs' episodes, or their reward rows when aligning at the reward collapse."""
    if align not in ANCHORED:
        return {}, ""
    anchor = {"first": first_event_step, "critical": first_critical_step, "collapse": _reward_collapse}[align]
    offsets, missing = {}, []
    for run in runs:
        step = anchor(frame[frame["run"] == run] if not frame.empty else frame)
        if step is None:
            missing.append(run)
        else:
            offsets[run] = step
    note = f"aligned at each run's {ALIGN[align]} (step 0 of the axis)"
    return offsets, note + (f"; no {ALIGN[align]} in {', '.join(missing)}: not drawn" if missing else "")


def _reward_collapse(rows: pd.DataFrame) -> int | None:
    rows = rows.dropna(subset=["reward_mean"]) if len(rows) else rows
    return reward_collapse(rows["step"].to_numpy(), rows["reward_mean"].to_numpy()) if len(rows) else None


def config_table(diff: pd.DataFrame) -> list:
    if diff.empty:
        return [html.B("config: "), html.Span("the selected runs' configs do not differ", className="note")]
    head = html.Tr([html.Th(c) for c in diff.columns])
    body = [html.Tr([html.Td(str(v), className="mono") for v in row]) for row in diff.itertuples(index=False)]
    return [html.B("config keys that differ"), html.Table([html.Thead(head), html.Tbody(body)], className="ev-table")]


@callback(Output(ids.CMP_DOWNLOAD, "data"), Input(ids.CMP_CSV, "n_clicks"), State(ids.CMP_RUNS, "value"),
          State(ids.CMP_METRICS, "value"), prevent_initial_call=True)
def download(_: int, runs: list[str] | None, metrics: list[str] | None):
    metrics = [m for m in (metrics or []) if m in NUMERIC]
    with state.borrow() as s:
        df = _rows(s, runs or [], metrics) if runs and metrics else pd.DataFrame(columns=["run", "step"])
    cols = ["run", "step", *metrics]
    return tables.csv_download(df[cols].to_dict("records") if len(df) else [], cols, "compare.csv")


def _rows(s, runs: list[str], metrics: list[str], infos: dict[str, dict | None] | None = None) -> pd.DataFrame:
    """Metrics of the overview come from the runs' cached histories; others are read from the store. ``infos``:
    each run's ``queries.run_info`` when the caller has read it already."""
    if not set(metrics) <= set(COLUMNS):
        return queries.compare_rows(s, runs, metrics)
    parts = []
    for run in runs:
        info = infos[run] if infos is not None and run in infos else queries.run_info(s, run)
        if info is not None:
            rows = history.step_history(s, run, info["rank"], COLUMNS).rows_for(s, info["status"] == "running")
            parts.append(rows[["step", *metrics]].assign(run=run))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run", "step", *metrics])
