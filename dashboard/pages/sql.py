"""SQL console: read-only queries over the store's views (runs, run_ranks, steps, scalars, sequences,
tokens, events); results in a grid with a quick chart and a CSV download. Writes and DDL are refused with the
store's message. The example query runs when the page opens; Enter or Ctrl/⌘+Enter runs the query (Shift+Enter:
a new line; ``assets/keys.js``); a column browser lists every view's columns and types."""

from __future__ import annotations

import time

import dash
import dash_ag_grid as dag
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from collapsewatch.store import queries
from collapsewatch.store.sandbox import Limits

from .. import charts, ids, state, tables, theme

dash.register_page(__name__, path="/sql", name="SQL", title="collapsewatch · SQL", order=4)
MAX_ROWS = 10_000
LIMITS = Limits(max_rows=MAX_ROWS, max_bytes=32 * 2**20, timeout_s=20.0)
EXAMPLE = """-- views: runs, run_ranks, steps, scalars, sequences, tokens, events (read-only)
SELECT run, step, reward_mean, ratio_p50_pos, ratio_p05_pos, logp_old_mean_correct
FROM steps ORDER BY run, step"""


def column_browser() -> list:
    """One collapsible list per view: its columns with their types."""
    with state.borrow() as s:
        cols = queries.view_columns(s)
    return [html.Details(className="col-view", open=view == "steps", children=[
        html.Summary([html.B(view), html.Span(f" {len(part)}", className="hint")]),
        html.Ul([html.Li([html.Span(c, className="col-name"), html.Span(t.lower(), className="col-type")])
                 for c, t in zip(part["column"], part["type"], strict=True)])])
        for view, part in cols.groupby("view", sort=True)]


def layout(**_: str) -> html.Div:
    return html.Div(className="sql-page", children=[
        html.Div(column_browser(), id=ids.SQL_COLUMNS, className="card col-browser"),
        html.Div(className="sql-main", children=_console()),
    ])


def _console() -> list:
    return [
        html.Div(className="bar", children=[html.H2("SQL"), html.Span(
            f"read-only DuckDB over the store's views · results capped at {MAX_ROWS:,} rows / "
            f"{LIMITS.max_bytes // 2**20} MiB, {LIMITS.timeout_s:g} s · Enter or Ctrl+Enter runs, Shift+Enter: "
            "new line", className="hint")]),
        dcc.Textarea(id=ids.SQL_INPUT, value=EXAMPLE, className="sql-input", spellCheck=False),
        html.Div(className="bar", children=[
            html.Button("Run ⏎", id=ids.SQL_RUN, className="btn", n_clicks=0),
            html.Button("CSV ↓", id=ids.SQL_CSV, className="btn btn-quiet", n_clicks=0,
                        title="download the result shown in the grid as CSV"),
            dcc.Download(id=ids.SQL_DOWNLOAD),
            html.Span("chart:", className="hint"),
            dcc.Dropdown(id=ids.SQL_X, placeholder="x", style={"width": 200}),
            dcc.Dropdown(id=ids.SQL_Y, placeholder="y", multi=True, style={"minWidth": 320}),
            dcc.RadioItems(id=ids.SQL_KIND, options=["line", "scatter", "bar"], value="line", inline=True,
                           className="radio-inline"),
        ]),
        html.Div(id=ids.SQL_MESSAGE, className="msg ok"),
        dag.AgGrid(id=ids.SQL_GRID, rowData=[], columnDefs=[],
                   defaultColDef={"sortable": True, "resizable": True, "filter": True, "minWidth": 90},
                   dashGridOptions={"theme": theme.GRID_THEME, "rowHeight": 26, "animateRows": False},
                   style={"height": 380, "width": "100%"}),
        dcc.Graph(id=ids.SQL_CHART, figure=charts.sql_chart(pd.DataFrame(), None, None), className="card",
                  config={"displaylogo": False}, style={"marginTop": 10}),
    ]


@callback(Output(ids.SQL_GRID, "rowData"), Output(ids.SQL_GRID, "columnDefs"), Output(ids.SQL_MESSAGE, "children"),
          Output(ids.SQL_MESSAGE, "className"), Output(ids.SQL_X, "options"), Output(ids.SQL_X, "value"),
          Output(ids.SQL_Y, "options"), Output(ids.SQL_Y, "value"),
          Input(ids.SQL_RUN, "n_clicks"), State(ids.SQL_INPUT, "value"))
def run_query(_: int, sql: str):
    t0 = time.perf_counter()
    try:
        with state.borrow() as s:
            df, more = queries.user_query(s, sql or "", limits=LIMITS)
    except ValueError as e:  # ReadOnlyQueryError is a ValueError: its message says why
        return [], [], str(e), "msg error", [], None, [], []
    cols, numeric = [str(c) for c in df.columns], charts.numeric_columns(df)
    msg = f"{len(df):,} rows{' (cut at the result limit)' if more else ''} · " \
          f"{(time.perf_counter() - t0) * 1000:.0f} ms"
    x = "step" if "step" in cols else (cols[0] if cols else None)
    ys = [c for c in numeric if c != x][:3]
    return tables.sql_rows(df), tables.sql_columns(df), msg, "msg ok", cols, x, numeric, ys


@callback(Output(ids.SQL_DOWNLOAD, "data"), Input(ids.SQL_CSV, "n_clicks"), State(ids.SQL_GRID, "rowData"),
          State(ids.SQL_GRID, "columnDefs"), prevent_initial_call=True)
def download(_: int, rows: list[dict] | None, cols: list[dict] | None):
    return tables.csv_download(rows, [c["field"] for c in cols or []], "query.csv")


@callback(Output(ids.SQL_CHART, "figure"), Input(ids.SQL_X, "value"), Input(ids.SQL_Y, "value"),
          Input(ids.SQL_KIND, "value"), State(ids.SQL_GRID, "rowData"), prevent_initial_call=True)
def chart(x: str | None, ys: list[str] | None, kind: str, rows: list[dict] | None):
    return charts.sql_chart(pd.DataFrame(rows or []), x, ys, kind)
