"""Sweep: which settings collapse. The selected runs (a name prefix or glob) on their config axes — the config keys
whose values differ — with each run's verdict and collapse step: one parallel-coordinates chart coloured by verdict,
and a table of runs × axes, each run linked to its page. Drawn from the runs page's cached table
(``history.run_table``), so a refresh reads only the runs that changed.

URL: ``/sweep?runs=grpo-`` (comma-separated prefixes or globs; every run without)."""

from __future__ import annotations

import dash
import dash_ag_grid as dag
from dash import Input, Output, State, callback, dcc, html, no_update

from .. import charts, history, ids, state, sweep, tables, theme
from ..figures import COLUMNS
from .runs import REFRESH_MS

dash.register_page(__name__, path="/sweep", name="Sweep", title="collapsewatch · sweep", order=4)


def _sweep(runs: str | None) -> sweep.Sweep:
    with state.borrow() as s:
        table = history.run_table(s, COLUMNS)
    return sweep.sweep(sweep.select(table, runs))


def note(sw: sweep.Sweep) -> str:
    """One sentence when there is nothing to chart (said instead of an empty chart), and the runs left off it."""
    configured = int(sw.frame["has_config"].sum()) if len(sw.frame) else 0
    parts = []
    if len(sw.frame) == 0:
        parts.append("No run matches: nothing to compare.")
    elif configured < 2:
        parts.append(f"{configured} of the {len(sw.frame)} selected runs has a config: a sweep needs two or more "
                     "runs with a config to have axes." if len(sw.frame) > 1 else
                     "One run selected: a sweep needs two or more runs to compare their settings.")
    elif not sw.axes:
        parts.append(f"The {configured} selected runs have the same config: no key varies, so there is no axis to "
                     "chart.")
    if sw.unconfigured and configured >= 2:
        parts.append(f"{len(sw.unconfigured)} run{'s' if len(sw.unconfigured) > 1 else ''} without a config, listed "
                     f"below, on no axis: {', '.join(sw.unconfigured)}.")
    return " ".join(parts)


def _facts(sw: sweep.Sweep) -> list:
    counts = sw.frame["verdict"].value_counts() if len(sw.frame) else {}
    return [html.H2("Sweep"), html.Span([html.B(len(sw.frame)), " runs"], className="fact"),
            html.Span([html.B(len(sw.axes)), " config axes"], className="fact"),
            *[html.Span([html.B(int(counts.get(v, 0))), f" {v}"], className="fact",
                        style={"color": theme.VERDICT_COLOURS[v]}) for v in sweep.VERDICTS]]


def _drawn(sw: sweep.Sweep) -> tuple:
    """Figure, note, rows, columns and facts."""
    fig = charts.sweep_figure(sw) if sw.axes else None
    return fig, note(sw), tables.sweep_rows(sw), tables.sweep_columns(sw.axes), _facts(sw)


def layout(runs: str | None = None, **_: str) -> html.Div:
    sw = _sweep(runs)
    fig, text, rows, cols, facts = _drawn(sw)
    return html.Div([
        html.Div(className="bar", children=[
            html.Div(facts, id=ids.SW_SUMMARY, className="bar"),
            dcc.Input(id=ids.SW_FILTER, value=runs or "", debounce=True, placeholder="runs: prefix or glob, e.g. grpo-*",
                      style={"width": 300, "flex": "0 0 auto"}),
            html.Span("each line a run, coloured by verdict; drag along an axis to keep the runs in a range",
                      className="hint")]),
        html.Div(text, id=ids.SW_NOTE, className="note"),
        dcc.Graph(id=ids.SW_GRAPH, figure=fig or {}, config={"displaylogo": False}, className="card",
                  style={} if fig is not None else {"display": "none"}),
        dag.AgGrid(id=ids.SW_GRID, rowData=rows, columnDefs=cols, getRowId="params.data.name",
                   defaultColDef={"sortable": True, "resizable": True},
                   dashGridOptions={"theme": theme.GRID_THEME, "domLayout": "autoHeight", "rowHeight": 30,
                                    "animateRows": False, "suppressFieldDotNotation": True,
                                    "suppressColumnVirtualisation": True},
                   style={"width": "100%"}),
        dcc.Store(id=ids.SW_DIGEST, data=sw.digest),
        dcc.Interval(id=ids.SW_INTERVAL, interval=REFRESH_MS),
    ])


@callback(Output(ids.SW_GRAPH, "figure"), Output(ids.SW_GRAPH, "style"), Output(ids.SW_NOTE, "children"),
          Output(ids.SW_GRID, "rowData"), Output(ids.SW_GRID, "columnDefs"), Output(ids.SW_SUMMARY, "children"),
          Output(ids.SW_DIGEST, "data"), Input(ids.SW_INTERVAL, "n_intervals"), Input(ids.SW_FILTER, "value"),
          State(ids.SW_DIGEST, "data"), prevent_initial_call=True)
def refresh(_: int, runs: str | None, drawn: str | None):
    """Redraw when the selected runs' rows changed (a new run, a verdict, a step); otherwise send nothing, so a
    range dragged on an axis stays."""
    sw = _sweep(runs)
    if sw.digest == drawn:
        return (no_update,) * 7
    fig, text, rows, cols, facts = _drawn(sw)
    style = {} if fig is not None else {"display": "none"}
    return fig or {}, style, text, rows, cols, facts, sw.digest
