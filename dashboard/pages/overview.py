"""Run overview: reward, entropy, ratio fans by advantage sign, clip fractions, likelihood of correct vs
incorrect responses, displacement, grad norm, length, train–inference mismatch, with detector phases as
shaded bands and a timeline. A running run is polled every ``POLL_MS``; only new steps are read and sent.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, callback, dcc, html, no_update

from collapsewatch.store import queries

from .. import ids, live, state
from ..series import SMOOTHING

dash.register_page(__name__, path_template="/run/<run>", name="Run overview", title="collapsewatch · run",
                   order=1)


def run_picker(component_id: str, current: str | None) -> dcc.Dropdown:
    with state.borrow() as s:
        names = queries.run_names(s)
    return dcc.Dropdown(id=component_id, options=names, value=current, clearable=False, className="picker",
                        style={"width": 260})


def header(run: str, info: dict[str, Any], st: dict[str, Any]) -> list:
    status = info["status"]
    summary = st["summary"]
    facts = [html.Span(status, className=f"badge {status}" + (" live" if status == "running" else "")),
             html.Span(["objective ", html.B(info.get("objective") or "—")], className="fact"),
             html.Span(["steps ", html.B(summary["rows"])], className="fact"),
             html.Span(["last step ", html.B(st["last"] if st["last"] >= 0 else "—")], className="fact")]
    if info.get("world_size", 1) > 1:
        facts.append(html.Span(["rank ", html.B(st["rank"]), f" of {info['world_size']}"], className="fact"))
    if summary["on_policy"]:
        facts.append(html.Span("on-policy: ratio metrics not applicable", className="note"))
    facts.append(dcc.Link("token drill-down →", href=f"/tokens/{run}"))
    return facts


def smooth_picker(component_id: str, window: int) -> dcc.Dropdown:
    return dcc.Dropdown(id=component_id, value=window, clearable=False, style={"width": 150},
                        options=[{"label": "raw" if w == 1 else f"{w}-step mean", "value": w} for w in SMOOTHING])


def parse_smooth(smooth: str | None) -> int:
    return int(smooth) if smooth and smooth.isdigit() and int(smooth) in SMOOTHING else 1


def layout(run: str | None = None, smooth: str | None = None, **_: str) -> html.Div:
    if run is None:
        return html.Div("Pick a run on the Runs page.", className="note")
    window = parse_smooth(smooth)
    loaded = live.load(run, window)
    if loaded is None:
        return html.Div([html.H2(f"No run named {run!r} in this store."), dcc.Link("← runs", href="/")])
    fig, st, info = loaded
    return html.Div([
        html.Div(className="bar", children=[
            run_picker(ids.OV_RUN, run),
            smooth_picker(ids.OV_SMOOTH, window),
            html.Div(header(run, info, st), id=ids.OV_HEADER, className="bar"),
        ]),
        dcc.Graph(id=ids.OV_GRAPH, figure=fig, config={"displaylogo": False, "scrollZoom": False},
                  className="card"),
        dcc.Store(id=ids.OV_STATE, data=st),
        dcc.Interval(id=ids.OV_INTERVAL, interval=live.POLL_MS, disabled=info["status"] == "finished"),
    ])


@callback(Output(ids.OV_GRAPH, "figure"), Output(ids.OV_STATE, "data"), Output(ids.OV_HEADER, "children"),
          Output(ids.OV_INTERVAL, "disabled"),
          Input(ids.OV_INTERVAL, "n_intervals"), State(ids.OV_STATE, "data"), prevent_initial_call=True)
def poll(_: int, st: dict[str, Any]):
    patch, new_st, info = live.poll(st)
    head = header(st["run"], info, new_st) if info is not None else no_update
    done = new_st["status"] == "finished"
    return (patch if patch is not None else no_update), new_st, head, done


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.OV_RUN, "value"), Input(ids.OV_SMOOTH, "value"),
          State(ids.NAV_URL, "pathname"), State(ids.NAV_URL, "search"), prevent_initial_call=True)
def pick_run(run: str | None, smooth: int | None, path: str | None, search: str | None):
    # the pickers report their values when they mount: navigate only when the run or the smoothing changed
    if not run or (path == f"/run/{run}" and parse_smooth(_query(search)) == (smooth or 1)):
        return no_update
    return f"/run/{run}" + (f"?smooth={smooth}" if smooth and smooth > 1 else "")


def _query(search: str | None) -> str | None:
    from urllib.parse import parse_qs

    return (parse_qs((search or "").lstrip("?")).get("smooth") or [None])[0]
