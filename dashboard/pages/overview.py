"""Run overview: the run's story first — its detector episodes as a table (step range, detector · phase,
severity, the evidence in a sentence, links to the steps and to the sequence that explains the flag) and a phase
timeline aligned with the panels — then reward, entropy, ratio fans by advantage sign, clip fractions, likelihood
of correct vs incorrect responses (with the LLD spiral), displacement, grad norm, length, train–inference
mismatch. A running run is polled every ``POLL_MS``; only new steps are read and sent.

URL: ``/run/<run>?smooth=16&from=40&to=120&episode=3`` — smoothing window (default 16, 1 = raw), zoom (kept
in the URL as you zoom) and the episode whose band is shown.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import dash
from dash import ClientsideFunction, Input, Output, State, callback, clientside_callback, dcc, html, no_update

from collapsewatch.store import queries

from .. import ids, live, state, tables, theme
from ..events_view import severity_counts
from ..figures import DEFAULT_SMOOTH
from ..series import SMOOTHING
from ..waiting import waiting_page

dash.register_page(__name__, path_template="/run/<run>", name="Run overview", title="collapsewatch · run",
                   order=1)
GRAPH_CONFIG = {"displaylogo": False, "scrollZoom": False}


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


SHOWN_ROWS = 12
"""Episode rows shown at once (the cause first); the rest — mostly the same phases again, and info — fold away."""


def verdict_line(v: dict[str, Any], run: str) -> list:
    """The run's verdict (``live.verdict_view``: :mod:`collapsewatch.verdict`) as the page's first line, and a note
    when the stored episodes came from other detector rules, with a link to show them."""
    shown = v.get("shown", v["status"])  # "no steps" for a run with none (collapsewatch.verdict.NO_STEPS)
    kind = shown.replace(" ", "-")
    out: list = [html.Div(id=ids.OV_VERDICT, className=f"verdict verdict-{kind}", children=[
        html.Span(shown, className=f"badge verdict-badge verdict-{kind}"), " ",
        html.Span(v["sentence"])])]
    if v["note"]:
        out.append(html.Div(id=ids.OV_RULES_NOTE, className="note rules-note", children=[
            v["note"] + " ", dcc.Link("show the recorded episodes", href=f"/run/{run}?events=recorded")]))
    return out


def events_table(rows: list[dict[str, Any]], selected: int | None = None, recorded: str | None = None) -> list:
    """The run's episodes grouped by detector · phase, the cause first (``collapsewatch.verdict.reader_order``);
    severity as a coloured badge, links to charts and tokens; the ``selected`` episode's row (its band is the one
    shown) highlighted. ``recorded``: the run, when these are its stored episodes shown on request."""
    if not rows:
        return [html.Div("No detector episodes in this run.", className="note")]
    counts = severity_counts_of(rows)
    head = html.Div(className="ev-head", children=[
        html.B(f"{len(rows)} episode{'s' if len(rows) != 1 else ''}" + (" as recorded" if recorded else "")),
        *[html.Span(f"{n} {sev}", className=f"sev sev-{sev}") for sev, n in counts.items() if n],
        *([dcc.Link("show today's rules' episodes", href=f"/run/{recorded}")] if recorded else []),
        html.Span("cause first; click a row's steps to zoom the charts there and show its band; hover a timeline "
                  "bar to show its band", className="hint")])
    body = [_event_row(r, selected, i > 0 and rows[i - 1]["what"] == r["what"]) for i, r in enumerate(rows)]

    def table(trs: list) -> html.Table:
        return html.Table(className="ev-table", children=[
            html.Thead(html.Tr([html.Th(h) for h in ("steps", "detector · phase", "severity", "evidence", "")])),
            html.Tbody(trs)])

    out = [head, table(body[:SHOWN_ROWS])]
    if len(body) > SHOWN_ROWS:
        out.append(html.Details(className="ev-more", children=[
            html.Summary(f"{len(body) - SHOWN_ROWS} more episode(s)"), table(body[SHOWN_ROWS:])]))
    return out


def _event_row(r: dict[str, Any], selected: int | None, same_group: bool) -> html.Tr:
    what = [html.Span("●", style={"color": theme.detector_colour(r["detector"])}), " ", r["what"]]
    return html.Tr(className=f"ev-row sev-row-{r['severity']}" + (" ev-selected" if r["episode"] == selected else "")
                   + (" ev-cont" if same_group else ""), children=[
        html.Td(dcc.Link(r["steps"], href=r["chart"], className="ev-steps"), className="num"),
        html.Td(what, className="ev-what"),
        html.Td(html.Span(r["severity"], className=f"sev sev-{r['severity']}")),
        html.Td([r["sentence"], html.Div(r.get("trust", ""), className="ev-trust note")], className="ev-sentence"),
        html.Td(dcc.Link("tokens →", href=r["tokens"], className="ev-tokens")),
    ])


def severity_counts_of(rows: list[dict[str, Any]]) -> dict[str, int]:
    import pandas as pd

    return severity_counts(pd.DataFrame({"severity": [r["severity"] for r in rows]}))


def config_block(config: dict[str, Any]) -> html.Details:
    lines = [f"{k} = {json.dumps(v)}" for k, v in sorted(config.items())] if config else ["(no config recorded)"]
    return html.Details(id=ids.OV_CONFIG, className="config", children=[
        html.Summary("run config"), html.Pre("\n".join(lines))])


def smooth_picker(component_id: str, window: int) -> dcc.Dropdown:
    return dcc.Dropdown(id=component_id, value=window, clearable=False, style={"width": 150},
                        options=[{"label": "raw" if w == 1 else f"{w}-step mean", "value": w} for w in SMOOTHING])


def parse_smooth(smooth: str | None) -> int:
    return int(smooth) if smooth and smooth.isdigit() and int(smooth) in SMOOTHING else DEFAULT_SMOOTH


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def layout(run: str | None = None, smooth: str | None = None, episode: str | None = None, **q: str) -> html.Div:
    if run is None:
        return html.Div("Pick a run on the Runs page.", className="note")
    window = parse_smooth(smooth)
    lo, hi = _int(q.get("from")), _int(q.get("to"))
    x_range = [lo - 0.5, hi + 0.5] if lo is not None and hi is not None and hi >= lo else None
    recorded = q.get("events") == "recorded"
    loaded = live.load(run, window, _int(episode), x_range, recorded=recorded)
    if loaded is None:
        return waiting_page(run, "run")
    st, info = loaded["state"], loaded["info"]
    return html.Div([
        html.Div(verdict_line(loaded["verdict"], run), id=ids.OV_VERDICT_BOX),
        html.Div(className="bar", children=[
            run_picker(ids.OV_RUN, run),
            smooth_picker(ids.OV_SMOOTH, window),
            html.Div(header(run, info, st), id=ids.OV_HEADER, className="bar"),
            html.Button("data CSV ↓", id=ids.OV_CSV, className="btn btn-quiet", n_clicks=0,
                        title="every step of the series on this page (raw values), as CSV"),
            dcc.Download(id=ids.OV_DOWNLOAD),
        ]),
        html.Div(events_table(loaded["events"], _int(episode), run if recorded else None), id=ids.OV_EVENTS,
                 className="card events"),
        html.Div(className="card", children=[
            dcc.Graph(id=ids.OV_TIMELINE, figure=loaded["timeline"], config=dict(GRAPH_CONFIG, displayModeBar=False)),
            dcc.Graph(id=ids.OV_GRAPH, figure=live.for_the_wire(loaded["figure"]), config=GRAPH_CONFIG,
                      clear_on_unhover=True),
        ]),
        config_block(info.get("config") or {}),
        dcc.Store(id=ids.OV_STATE, data=st),
        dcc.Store(id=ids.OV_BAND), dcc.Store(id=ids.OV_ZOOM), dcc.Store(id=ids.OV_CROSSHAIR),
        dcc.Interval(id=ids.OV_INTERVAL, interval=live.POLL_MS, disabled=info["status"] == "finished"),
    ])


@callback(Output(ids.OV_GRAPH, "figure"), Output(ids.OV_STATE, "data"), Output(ids.OV_HEADER, "children"),
          Output(ids.OV_INTERVAL, "disabled"), Output(ids.OV_TIMELINE, "figure"), Output(ids.OV_EVENTS, "children"),
          Output(ids.OV_VERDICT_BOX, "children"),
          Input(ids.OV_INTERVAL, "n_intervals"), State(ids.OV_STATE, "data"), prevent_initial_call=True)
def poll(_: int, st: dict[str, Any]):
    got = live.poll(st)
    new_st, info = got["state"], got["info"]
    head = header(st["run"], info, new_st) if info is not None else no_update
    done = new_st["status"] == "finished"
    view = st.get("view") or {}
    return (got["patch"] if got["patch"] is not None else no_update), new_st, head, done, \
        (got["timeline"] if got["timeline"] is not None else no_update), \
        (events_table(got["events"], view.get("selected"), st["run"] if view.get("recorded") else None)
         if got["events"] is not None else no_update), \
        (verdict_line(got["verdict"], st["run"]) if got["verdict"] is not None else no_update)


@callback(Output(ids.OV_DOWNLOAD, "data"), Input(ids.OV_CSV, "n_clicks"), State(ids.OV_STATE, "data"),
          prevent_initial_call=True)
def download(_: int, st: dict[str, Any]):
    rows = live.history_rows(st["run"])
    return tables.csv_download(rows.to_dict("records"), list(rows.columns), f"{st['run']}-steps.csv")


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.OV_RUN, "value"), Input(ids.OV_SMOOTH, "value"),
          State(ids.NAV_URL, "pathname"), State(ids.NAV_URL, "search"), prevent_initial_call=True)
def pick_run(run: str | None, smooth: int | None, path: str | None, search: str | None):
    # the pickers report their values when they mount: navigate only when the run or the smoothing changed
    query = parse_qs((search or "").lstrip("?"))
    if not run or (path == f"/run/{run}" and parse_smooth((query.get("smooth") or [None])[0]) == smooth):
        return no_update
    keep = {k: v[0] for k, v in query.items() if k in ("from", "to", "episode")} if path == f"/run/{run}" else {}
    params = ({"smooth": smooth} if smooth and smooth != DEFAULT_SMOOTH else {}) | keep
    return f"/run/{run}" + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.OV_TIMELINE, "clickData"),
          State(ids.OV_EVENTS, "children"), prevent_initial_call=True)
def open_episode(click: dict | None, table: list):
    """A click on a timeline bar opens what that episode's row links to: its steps, its band shown."""
    if not click:
        return no_update
    k = click["points"][0].get("customdata")
    links = [a for a in _links(table) if "episode=" in a]
    return links[k] if isinstance(k, int) and 0 <= k < len(links) else no_update


def _links(node: Any) -> list[str]:
    """Every dcc.Link href under a serialised component tree, in document order."""
    out: list[str] = []
    if isinstance(node, list):
        for n in node:
            out += _links(n)
    elif isinstance(node, dict):
        props = node.get("props", {})
        if node.get("type") == "Link" and "href" in props:
            out.append(props["href"])
        out += _links(props.get("children"))
    return out


# hover on a timeline bar: show that episode's band across the panels (all bands are in the figure, hidden)
clientside_callback("""function(hover) {
    const gd = document.querySelector('#GRAPH .js-plotly-plot');
    if (!hover || !gd || !gd.layout.shapes) { return window.dash_clientside.no_update; }
    const k = hover.points[0].customdata, upd = {};
    gd.layout.shapes.forEach((s, i) => {
        if ((s.name || '').startsWith('band:')) { upd['shapes[' + i + '].visible'] = s.name === 'band:' + k; }
    });
    Plotly.relayout(gd, upd);
    return k;
}""".replace("GRAPH", ids.OV_GRAPH), Output(ids.OV_BAND, "data"), Input(ids.OV_TIMELINE, "hoverData"), prevent_initial_call=True)

# zoom on the panels: the timeline follows, and the URL keeps the range (from/to), without a reload
clientside_callback("""function(rel) {
    if (!rel) { return window.dash_clientside.no_update; }
    let lo = null, hi = null, reset = false;
    for (const [key, v] of Object.entries(rel)) {
        if (/^xaxis\\d*\\.range\\[0\\]$/.test(key)) { lo = v; }
        else if (/^xaxis\\d*\\.range\\[1\\]$/.test(key)) { hi = v; }
        else if (/^xaxis\\d*\\.range$/.test(key)) { lo = v[0]; hi = v[1]; }
        else if (/^xaxis\\d*\\.autorange$/.test(key)) { reset = true; }
    }
    const tl = document.querySelector('#TIMELINE .js-plotly-plot'), gd = document.querySelector('#GRAPH .js-plotly-plot');
    const url = new URL(window.location.href);
    if (lo !== null && hi !== null) {
        url.searchParams.set('from', Math.round(lo + 0.5)); url.searchParams.set('to', Math.round(hi - 0.5));
    } else if (reset) { url.searchParams.delete('from'); url.searchParams.delete('to'); }
    else { return window.dash_clientside.no_update; }
    window.history.replaceState(window.history.state, '', url.toString());
    if (tl && gd) {
        const r = gd._fullLayout.xaxis.range.slice();
        Plotly.relayout(tl, {'xaxis.range': r});
        return r;
    }
    return window.dash_clientside.no_update;
}""".replace("TIMELINE", ids.OV_TIMELINE).replace("GRAPH", ids.OV_GRAPH), Output(ids.OV_ZOOM, "data"), Input(ids.OV_GRAPH, "relayoutData"),
                    prevent_initial_call=True)

# hover a step on one panel: a line at that step on every panel and the timeline (assets/crosshair.js)
clientside_callback(ClientsideFunction("collapsewatch", "crosshair"), Output(ids.OV_CROSSHAIR, "data"),
                    Input(ids.OV_GRAPH, "hoverData"), State(ids.OV_GRAPH, "id"), State(ids.OV_TIMELINE, "id"),
                    prevent_initial_call=True)
