"""The page shown for a run the store does not hold (yet): it says so and polls, and reloads itself once the run
appears — the demo opens its run's page before the trainer has written anything, and a person may type a run
name before starting the run."""

from __future__ import annotations

from dash import MATCH, Input, Output, State, callback, clientside_callback, dcc, html, no_update

from . import state

WAIT_MS = 1500
"""How often a waiting page asks whether its run has appeared."""


def waiting_page(run: str, page: str) -> html.Div:
    """``page``: the page kind ('run', 'tokens'), so two waiting pages never share component ids."""
    return html.Div(className="waiting", children=[
        html.H2(["Waiting for run ", html.Code(run), " …"]),
        html.P(["No run of that name in this store yet. This page checks every "
                f"{WAIT_MS / 1000:g} s and opens the run as soon as its first step is written."]),
        html.P(dcc.Link("← all runs", href="/")),
        dcc.Interval(id={"type": "wait-interval", "page": page}, interval=WAIT_MS),
        dcc.Store(id={"type": "wait-run", "page": page}, data=run),
        dcc.Store(id={"type": "wait-found", "page": page}, data=False),
    ])


def run_exists(run: str) -> bool:
    with state.borrow() as s:
        return s.has_run(run)


@callback(Output({"type": "wait-found", "page": MATCH}, "data"), Input({"type": "wait-interval", "page": MATCH},
          "n_intervals"), State({"type": "wait-run", "page": MATCH}, "data"), prevent_initial_call=True)
def check(_: int, run: str):
    return True if run_exists(run) else no_update


# found: reload the same address, so the page renders again, now with the run
clientside_callback("function(found) { if (found) { window.location.reload(); } return window.dash_clientside.no_update; }",
                    Output({"type": "wait-interval", "page": MATCH}, "disabled"),
                    Input({"type": "wait-found", "page": MATCH}, "data"), prevent_initial_call=True)
