"""Runs page: every run of the store with its status, objective, size, reward level (now, best, a
sparkline), collapse step, worst severity ever and episodes by severity; tick runs and compare them. Refreshes
every few seconds so new and crashing runs show up without a reload."""

from __future__ import annotations

import dash
import dash_ag_grid as dag
from dash import Input, Output, State, callback, dcc, html, no_update

from .. import history, ids, state, tables, theme
from ..figures import COLUMNS

dash.register_page(__name__, path="/", name="Runs", title="collapsewatch · runs", order=0)
REFRESH_MS = 3000


def _summary(rows: list[dict]) -> list:
    running = sum(r["status"] == "running" for r in rows)
    flagged = sum(r["n_active"] > 0 for r in rows)
    return [html.H2("Runs"), html.Span([html.B(len(rows)), " runs"], className="fact"),
            html.Span([html.B(running), " running"], className="fact"),
            html.Span([html.B(flagged), " with active flags"], className="fact flag" if flagged else "fact")]


def _rows() -> list[dict]:
    with state.borrow() as s:
        return tables.runs_rows(history.run_table(s, COLUMNS))


def layout(**_: str) -> html.Div:
    rows = _rows()
    return html.Div([
        html.Div(_summary(rows), id=ids.RUNS_SUMMARY, className="bar"),
        dag.AgGrid(id=ids.RUNS_GRID, rowData=rows, columnDefs=tables.RUNS_COLUMNS, getRowId="params.data.name",
                   defaultColDef={"sortable": True, "resizable": True},
                   dashGridOptions={"theme": theme.GRID_THEME, "domLayout": "autoHeight", "rowHeight": 30,
                                    "animateRows": False, "rowSelection": "multiple",
                                    "suppressRowClickSelection": True},
                   style={"width": "100%"}),
        html.Div(className="bar", children=[
            html.Button("Compare ticked runs →", id=ids.RUNS_COMPARE, className="btn", n_clicks=0),
            html.Span("Open a run for its story (events, phases, live charts), or its token drill-down.",
                      className="hint")]),
        dcc.Interval(id=ids.RUNS_INTERVAL, interval=REFRESH_MS),
    ])


@callback(Output(ids.RUNS_GRID, "rowData"), Output(ids.RUNS_SUMMARY, "children"),
          Input(ids.RUNS_INTERVAL, "n_intervals"), prevent_initial_call=True)
def refresh(_: int) -> tuple[list[dict], list]:
    rows = _rows()
    return rows, _summary(rows)


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.RUNS_COMPARE, "n_clicks"),
          State(ids.RUNS_GRID, "selectedRows"), prevent_initial_call=True)
def compare(_: int, selected: list[dict] | None):
    names = [r["name"] for r in selected or []]
    return "/compare?runs=" + ",".join(names) if names else no_update
