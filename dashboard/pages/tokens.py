"""Token drill-down: pick a step and a sequence (from the sampled token rows, ranked: worst repetition, highest
entropy, lowest ratio …); its text token by token, coloured by ratio (symmetric in log r), displacement or
entropy, tool observations set apart, values on hover; and a step × position heatmap of the same metric (colour
scale of this run or fixed for every run; click a cell to jump to that step).

URL: ``/tokens/<run>?step=180&seq=61&rank=repetition&metric=ratio`` — a step without token rows opens the
nearest stored one; ``rank`` orders the sequences and, without ``seq``, opens the first (the events table links
here with the ranking that explains its detector's flag); without ``metric`` the tokens are coloured by what
``rank`` ranks (entropy by entropy, displacement by log_ratio, else the ratio)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, Patch, State, callback, ctx, dcc, html, no_update

from collapsewatch.store import queries

from .. import history, ids, state, theme, token_view
from ..waiting import waiting_page
from .overview import run_picker

dash.register_page(__name__, path_template="/tokens/<run>", name="Tokens", title="collapsewatch · tokens", order=2)


def _token_steps(run: str) -> list[dict[str, Any]]:
    with state.borrow() as s:
        df = history.token_index(s, run).steps(s)
    return [{"label": f"step {int(r.step)} ({int(r.n_seqs)} seqs)", "value": int(r.step)} for r in df.itertuples()]


def _labelled(row: Any, multi_rank: bool, by: str = "seq") -> str:
    mark = "✓" if row.correct is True else ("✗" if row.correct is False else "")
    reward = "" if row.reward != row.reward else f" · R={row.reward:.2f}{mark}"
    adv = "" if row.advantage != row.advantage else f" · A={row.advantage:+.2f}"
    where = f"rank {row.rank} " if multi_rank else ""
    column = token_view.RANKINGS.get(by, token_view.RANKINGS["seq"])[0]
    key = getattr(row, column, None) if by != "seq" else None
    ranked = f" · {column} {key:.3g}" if isinstance(key, float) and key == key else ""
    return f"{where}seq {row.seq_id}{reward}{adv}{ranked} · {row.n_token_rows} tok"


def nearest(values: list[int], step: int | None) -> int | None:
    """The stored step closest to ``step`` (the earlier one on a tie); the last one when ``step`` is None."""
    if not values:
        return None
    if step is None:
        return values[-1]
    return min(values, key=lambda v: (abs(v - step), v))


def layout(run: str | None = None, step: str | None = None, seq: str | None = None, metric: str | None = None,
           rank: str = "seq", **_: str) -> html.Div:
    if run is None:
        return html.Div("Pick a run on the Runs page.", className="note")
    with state.borrow() as s:
        if not s.has_run(run):
            return waiting_page(run, "tokens")
    steps = _token_steps(run)
    chosen = nearest([o["value"] for o in steps], int(step) if step is not None and step.isdigit() else None)
    by = rank if rank in token_view.RANKINGS else "seq"
    metric = metric if metric in token_view.METRICS else token_view.RANK_METRIC.get(by, "ratio")
    # the options of the chosen step come with the page, so a sequence named in the URL shows as picked
    seq_options, seq_value = _seq_options(run, chosen, f"0:{seq}" if seq and seq.isdigit() else seq, by)
    return html.Div([
        html.Div(className="bar", children=[
            run_picker(ids.TK_RUN, run),
            dcc.Dropdown(id=ids.TK_STEP, options=steps, value=chosen, clearable=False, placeholder="step",
                         style={"width": 200}),
            dcc.Dropdown(id=ids.TK_RANK, value=by, clearable=False, style={"width": 190},
                         options=[{"label": label, "value": k} for k, (_, _, label) in token_view.RANKINGS.items()]),
            dcc.Dropdown(id=ids.TK_SEQ, options=seq_options, value=seq_value, clearable=False,
                         placeholder="sequence", style={"width": 420}),
            dcc.RadioItems(id=ids.TK_METRIC, options=[{"label": v, "value": k} for k, v in token_view.METRICS.items()],
                           value=metric, inline=True,
                           className="radio-inline"),
            dcc.Link("← overview", href=f"/run/{run}"),
        ]),
        html.Div(id=ids.TK_SEQ_INFO, className="seq-info"),
        html.Div(id=ids.TK_LEGEND, className="tok-legend"),
        html.Div(id=ids.TK_TEXT, className="tok-text",
                 children="no token rows stored for this run" if not steps else "pick a sequence"),
        dcc.RadioItems(id=ids.TK_SCALE, value="run", inline=True, className="radio-inline", options=[
            {"label": "colour scale of this run", "value": "run"},
            {"label": "fixed scale (same for every run)", "value": "fixed"}]),
        dcc.Graph(id=ids.TK_HEATMAP, config={"displaylogo": False}, className="card", style={"marginTop": 10}),
    ])


@callback(Output(ids.NAV_URL, "href", allow_duplicate=True), Input(ids.TK_RUN, "value"), State(ids.NAV_URL, "pathname"),
          prevent_initial_call=True)
def pick_run(run: str | None, path: str | None):
    # the dropdown reports its value when it mounts: navigate only when a different run was picked
    return f"/tokens/{run}" if run and path != f"/tokens/{run}" else no_update


@callback(Output(ids.TK_STEP, "value"), Input(ids.TK_HEATMAP, "clickData"), State(ids.TK_STEP, "options"),
          prevent_initial_call=True)
def step_from_heatmap(click: dict | None, options: list[dict]):
    if not click or not options:
        return no_update
    y = click["points"][0]["y"]
    return min((o["value"] for o in options), key=lambda v: (abs(v - y), v))


@callback(Output(ids.TK_SEQ, "options"), Output(ids.TK_SEQ, "value"), Input(ids.TK_STEP, "value"),
          Input(ids.TK_RANK, "value"), State(ids.TK_RUN, "value"), State(ids.TK_SEQ, "value"))
def sequences(step: int | None, by: str, run: str, current: str | None):
    # a new ranking opens its first (worst) sequence; a new step keeps the sequence if it is stored there
    return _seq_options(run, step, None if ctx.triggered_id == ids.TK_RANK else current, by)


def _seq_options(run: str, step: int | None, current: str | None, by: str = "seq") -> tuple[list[dict], str | None]:
    """The sequence picker's options at ``step``, ranked ``by``, and its value: ``current`` if stored there,
    else the first in that order."""
    if step is None:
        return [], None
    with state.borrow() as s:
        df = queries.token_sequences(s, run, step, files=history.token_index(s, run).files_for(s, step))
    multi = df["rank"].nunique() > 1
    df = token_view.rank_sequences(df, by)
    options = [{"label": _labelled(r, multi, by), "value": f"{r.rank}:{r.seq_id}"} for r in df.itertuples()]
    values = [o["value"] for o in options]
    return options, current if current in values else (values[0] if values else None)


@callback(Output(ids.TK_TEXT, "children"), Output(ids.TK_SEQ_INFO, "children"), Output(ids.TK_LEGEND, "children"),
          Input(ids.TK_SEQ, "value"), Input(ids.TK_METRIC, "value"), State(ids.TK_STEP, "value"),
          State(ids.TK_RUN, "value"), prevent_initial_call=True)
def render(seq: str | None, metric: str, step: int | None, run: str):
    if seq is None or step is None:
        return "pick a step and a sequence", "", legend(metric)
    rank, seq_id = (int(v) for v in seq.split(":"))
    with state.borrow() as s:
        info = queries.run_info(s, run) or {"config": {}}
        files = history.token_index(s, run).files_for(s, step)["tokens"]
        toks = queries.sequence_tokens(s, run, step, seq_id, rank, files=files)
        run_dir = s.root / run  # an object store's run folder in its local mirror
    decode = state.decoder_for(info["config"], run_dir)
    cells = token_view.token_cells(toks, metric, token_view.token_texts(toks["token_id"], decode))
    kind = "tok" if decode else "tok id"  # ids get a gap between them; decoded text carries its own spaces
    spans = [html.Span(c["text"], className=f"{kind} obs" if c["observation"] else kind,
                       style=None if c["observation"] else {"backgroundColor": c["background"]},
                       **{"data-tip": c["tip"]}) for c in cells]
    n_obs = sum(c["observation"] for c in cells)
    facts = [f"step {step} · seq {seq_id} · {len(cells)} tokens ({n_obs} tool-observation) · ",
             html.B("decoded" if decode else "token ids (no tokenizer in the run config or the run folder)")]
    note = token_view.zero_advantage_note(toks)
    if note:
        facts += [" · ", html.Span(note, className="flag")]
    return spans or "no tokens stored for this sequence", facts, legend(metric)


def legend(metric: str) -> list:
    if metric == "entropy":
        swatch = f"linear-gradient(90deg, {theme.rgba(token_view.HOT, 0.08)}, {theme.rgba(token_view.HOT, 0.8)})"
        ends = ("0", f"≥ {token_view.ENTROPY_SPAN:g} nats")
    else:
        swatch = (f"linear-gradient(90deg, {theme.rgba(token_view.DOWN, 0.85)}, {theme.rgba(token_view.DOWN, 0.06)}, "
                  f"{theme.rgba(token_view.UP, 0.06)}, {theme.rgba(token_view.UP, 0.85)})")
        ends = (("r ≤ 1/4: likelihood down (r < 1)", "r ≥ 4: up (r > 1)") if metric == "ratio" else
                ("≤ −1 nat: likelihood down", "≥ +1 nat: up"))
    return [html.Span([ends[0], html.Span(className="swatch", style={"background": swatch}), ends[1]]),
            html.Span("tool observation (mask 0)", className="tok obs"), html.Span("hover a token for its values")]


@callback(Output(ids.TK_HEATMAP, "figure"), Input(ids.TK_METRIC, "value"), Input(ids.TK_STEP, "value"),
          Input(ids.TK_SCALE, "value"), State(ids.TK_RUN, "value"))
def heatmap(metric: str, step: int | None, scale: str, run: str):
    if ctx.triggered_id == ids.TK_STEP and step is not None:
        return move_marker(run, metric, step)  # a new step only moves the outline: the grid stays
    return heatmap_for(run, metric, step, scale == "fixed")


def heatmap_for(run: str, metric: str, step: int | None, fixed: bool = False):
    grid, step_bin = _grid(run, metric)
    return token_view.heatmap_figure(grid, metric, step, step_bin, fixed)


def move_marker(run: str, metric: str, step: int) -> Patch:
    step_bin, _ = _bins(run)
    p = Patch()
    p["layout"]["shapes"] = [token_view.step_marker(step, step_bin)]
    return p


def _bins(run: str) -> tuple[int, int]:
    """(step_bin, pos_bin) of the run's heatmap, from its token-step index."""
    with state.borrow() as s:
        steps = history.token_index(s, run).steps(s)
    return token_view.bins(steps["step"].tolist(), int(steps["max_pos"].max()) if len(steps) else 0)


def _grid(run: str, metric: str):
    step_bin, pos_bin = _bins(run)
    with state.borrow() as s:
        grid = history.token_index(s, run).heatmap(s, metric, step_bin, pos_bin, base_pos_bin=pos_bin)
    return grid, step_bin
