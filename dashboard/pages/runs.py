"""Runs page: every run of the store with its status, objective, size, reward level (now, best, a
sparkline), collapse step, worst severity ever and episodes by severity, and one column per config axis (a config
key whose value differs across the runs); tick runs and compare them. Refreshes every few seconds so new and
crashing runs show up without a reload.

Filter and group (AG Grid community: its row grouping is enterprise): the verdicts shown are ticked above the grid;
each config column has the grid's own filter box (number or text); *group by* a verdict, status, objective or config
key sorts the grid by that column, pins it first and counts each group's verdicts above the grid.

URL: ``/?group=lr&verdict=collapsed,warning``."""

from __future__ import annotations

import uuid
from collections import OrderedDict

import dash
import dash_ag_grid as dag
import pandas as pd
from dash import Input, Output, State, callback, clientside_callback, dcc, html, no_update

from .. import history, ids, state, sweep, tables, theme
from ..figures import COLUMNS

dash.register_page(__name__, path="/", name="Runs", title="collapsewatch · runs", order=0)
REFRESH_MS = 3000


def _summary(rows: list[dict], shown: int) -> list:
    running = sum(r["status"] == "running" for r in rows)
    flagged = sum(r["n_active"] > 0 for r in rows)
    return [html.H2("Runs"), html.Span([html.B(len(rows)), " runs"], className="fact"),
            html.Span([html.B(running), " running"], className="fact"),
            html.Span([html.B(flagged), " with episodes open at their last step"], className="fact flag" if flagged else "fact"),
            *([html.Span([html.B(shown), " shown"], className="fact")] if shown != len(rows) else [])]


def _table() -> pd.DataFrame:
    with state.borrow() as s:
        return history.run_table(s, COLUMNS)


_rows: dict[str, tuple[dict, dict, dict]] = {}


def _merged(row: dict, fields: dict) -> dict:
    """A run's grid row with its axis values: made again only when either changed (``runs_rows`` and the sweep give
    the same objects for an unchanged run)."""
    kept = _rows.get(row["name"])
    if kept is not None and kept[0] is row and kept[1] is fields:
        return kept[2]
    merged = {**row, **fields}
    _rows[row["name"]] = (row, fields, merged)
    return merged


history.on_clear(_rows.clear)


_views: OrderedDict[tuple, dict] = OrderedDict()
VIEWS = 16  # views kept: a few browser tabs' (group, verdicts) over the newest frame
history.on_clear(_views.clear)


def view(table: pd.DataFrame, group: str | None, verdicts: list[str] | None) -> dict:
    """What the page shows of ``table`` (``history.run_table``): every run's grid row with its config axes (over all
    runs), only the ``verdicts`` ticked, the grid's columns (the ``group`` column pinned first and sorted), the
    groups' verdict counts and the summary line. A table no run changed in (the same ``FRAME_VERSION``) gives the
    same view object again, made once: a refresh where nothing changed costs no work per run."""
    version = table.attrs.get(history.FRAME_VERSION)
    key = (version, group, tuple(verdicts) if verdicts is not None else None)
    if version is not None and (v := _views.get(key)) is not None:
        return v
    v = _view(table, group, verdicts)
    if version is not None:
        _views[key] = v
        while len(_views) > VIEWS:
            _views.popitem(last=False)
    return v


def _view(table: pd.DataFrame, group: str | None, verdicts: list[str] | None) -> dict:
    sw = sweep.sweep(table)
    keep = set(verdicts) if verdicts is not None else set(sweep.FILTERS)
    rows = [_merged(row, fields) for row, fields in zip(tables.runs_rows(table), sw.fields, strict=True)]
    versions = table[tables.RUNS_VERSION].tolist() if tables.RUNS_VERSION in table.columns else [None] * len(rows)
    picked = [v in keep for v in sw.frame["verdict"].tolist()]
    shown = [r for r, p in zip(rows, picked, strict=True) if p]
    frame = sw.frame[sw.frame["verdict"].isin(keep)] if len(sw.frame) else sw.frame
    axes = [a for a in sw.axes if a.name not in sweep.RUN_FIELDS]  # a config "objective" is the objective column
    options = [*sweep.RUN_FIELDS, *(a.name for a in axes)]
    group = group if group in options else None
    cols = [dict(c) for c in tables.RUNS_COLUMNS] + [tables.axis_column(a) for a in axes]
    if group is not None:
        field = group if group in sweep.RUN_FIELDS else sweep.FIELD + group
        i = next(i for i, c in enumerate(cols) if c["field"] == field)
        cols.insert(1, {**cols.pop(i), "pinned": "left", "sort": "asc", "headerClass": "grouped"})
    return {"rows": rows, "shown": shown, "columns": cols, "options": options, "group": group,
            "groups": sweep.groups(frame, group) if group is not None else None,
            "keys": [k for k, p in zip(versions, picked, strict=True) if p], "summary": _summary(rows, len(shown))}


_held: OrderedDict[str, tuple[tuple[str, ...], dict]] = OrderedDict()
HELD = 64
"""Grids whose rows this server knows (a browser tab's page holds its token): their ids and row keys, the newest
``HELD``; an older token gets every row again."""


def hold(v: dict) -> str:
    """Remember the rows of ``view`` ``v`` as what a grid now holds; returns the token the page keeps."""
    token = uuid.uuid4().hex
    _held[token] = (tuple(r["name"] for r in v["shown"]), dict(zip((r["name"] for r in v["shown"]), v["keys"],
                                                                   strict=True)), v)
    while len(_held) > HELD:
        _held.popitem(last=False)
    return token


def sent(v: dict, held: str | None, columns_changed: bool) -> dict | None:
    """What a refresh sends to show view ``v`` in a grid holding the rows of token ``held`` (``tables.grid_changes``):
    None — every row; ``{}`` — nothing (also, without comparing a row, when the page holds this very view); else a
    transaction."""
    prior = None if columns_changed else _held.get(held or "")
    if prior is not None and prior[2] is v:
        return {}
    return tables.grid_changes(prior[:2] if prior is not None else None, [r["name"] for r in v["shown"]], v["keys"],
                               v["shown"])


def groups_table(groups: pd.DataFrame | None, key: str | None) -> list:
    """One line per group: its value, runs and each verdict's count in the verdict's colour."""
    if groups is None or key is None:
        return []
    head = html.Tr([html.Th(key), html.Th("runs"), *[html.Th(v) for v in sweep.VERDICTS], html.Th("first collapse")])
    body = [html.Tr([html.Td(g.group, className="mono"), html.Td(g.runs, className="num"),
                     *[html.Td(getattr(g, v), className="num",
                               style={"color": theme.VERDICT_COLOURS[v]} if getattr(g, v) else {}) for v in sweep.VERDICTS],
                     html.Td("—" if pd.isna(g.first_collapse) else int(g.first_collapse), className="num")],
                    className="grp-row") for g in groups.itertuples(index=False)]
    return [html.B(f"runs by {key}"), html.Table([html.Thead(head), html.Tbody(body)], className="ev-table grp-table")]


def layout(group: str | None = None, verdict: str | None = None, **_: str) -> html.Div:
    picked = [v for v in (verdict or "").split(",") if v in sweep.FILTERS] or list(sweep.FILTERS)
    v = view(_table(), group, picked)
    return html.Div([
        html.Div(v["summary"], id=ids.RUNS_SUMMARY, className="bar"),
        html.Div(className="bar", children=[
            html.Span("verdict", className="hint"),
            dcc.Checklist(id=ids.RUNS_VERDICT, options=list(sweep.FILTERS), value=picked, inline=True,
                          className="radio-inline"),
            html.Span("group by", className="hint"),
            dcc.Dropdown(id=ids.RUNS_GROUP, options=v["options"], value=v["group"], placeholder="none",
                         style={"minWidth": 220}),
            dcc.Link("Sweep view →", href="/sweep", className="nav-link")]),
        html.Div(groups_table(v["groups"], v["group"]), id=ids.RUNS_GROUPS, className="grp-box"),
        dag.AgGrid(id=ids.RUNS_GRID, rowData=v["shown"], columnDefs=v["columns"], getRowId="params.data.name",
                   defaultColDef={"sortable": True, "resizable": True},
                   dashGridOptions={"theme": theme.GRID_THEME, "domLayout": "autoHeight", "rowHeight": 30,
                                    "animateRows": False, "rowSelection": "multiple", "suppressColumnVirtualisation": True,
                                    "suppressRowClickSelection": True, "suppressFieldDotNotation": True},
                   style={"width": "100%"}),
        html.Div(className="bar", children=[
            html.Button("Compare ticked runs →", id=ids.RUNS_COMPARE, className="btn", n_clicks=0),
            html.Span("Open a run for its story (events, phases, live charts), or its token drill-down.",
                      className="hint")]),
        dcc.Interval(id=ids.RUNS_INTERVAL, interval=REFRESH_MS),
        dcc.Store(id=ids.RUNS_HELD, data=hold(v)),
    ])


@callback(Output(ids.RUNS_GRID, "rowData"), Output(ids.RUNS_GRID, "rowTransaction"), Output(ids.RUNS_HELD, "data"),
          Output(ids.RUNS_SUMMARY, "children"),
          Output(ids.RUNS_GRID, "columnDefs"), Output(ids.RUNS_GROUP, "options"), Output(ids.RUNS_GROUPS, "children"),
          Input(ids.RUNS_INTERVAL, "n_intervals"), Input(ids.RUNS_GROUP, "value"), Input(ids.RUNS_VERDICT, "value"),
          State(ids.RUNS_GRID, "columnDefs"), State(ids.RUNS_GROUP, "options"), State(ids.RUNS_HELD, "data"),
          prevent_initial_call=True)
def refresh(_: int, group: str | None, verdicts: list[str] | None, columns: list[dict] | None,
            options: list[str] | None, held: str | None):
    """The rows again (only changed runs are read, ``history.run_table``), sent as a transaction of the rows that
    changed since what the page holds (``tables.grid_changes``; every row when the columns changed or the server does
    not know the page's rows); the columns and group options are sent only when they changed, so the grid keeps its
    filters, widths and sort."""
    v = view(_table(), group, verdicts)
    changed = v["columns"] != columns
    change = sent(v, held, changed)
    if change == {}:
        rows, transaction, token = no_update, no_update, no_update
    else:
        rows, transaction, token = (v["shown"], no_update, hold(v)) if change is None else (no_update, change, hold(v))
    return (rows, transaction, token, v["summary"], v["columns"] if changed else no_update,
            v["options"] if v["options"] != options else no_update, groups_table(v["groups"], v["group"]))


clientside_callback(  # the ages of rows not sent again, redrawn by this browser's clock (tables.RUNS_COLUMNS)
    "function(n) { dash_ag_grid.getApiAsync('" + ids.RUNS_GRID + "').then(function (api) {"
    " api.refreshCells({columns: ['updated'], force: true}); }); return window.dash_clientside.no_update; }", Input(ids.RUNS_INTERVAL, "n_intervals"), prevent_initial_call=True)


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.RUNS_COMPARE, "n_clicks"),
          State(ids.RUNS_GRID, "selectedRows"), prevent_initial_call=True)
def compare(_: int, selected: list[dict] | None):
    names = [r["name"] for r in selected or []]
    return "/compare?runs=" + ",".join(names) if names else no_update
