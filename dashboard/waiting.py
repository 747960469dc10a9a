"""The page shown for a run the store does not hold (yet): it says so and polls, and reloads itself once the run
appears — the demo opens its run's page before the trainer has written anything (while the model is built: the
page shows the build's progress lines the demo writes to ``<store>/_notes/<run>.txt``, and links to the runs already
there), and a person may type a run name before starting the run."""

from __future__ import annotations

from dash import MATCH, Input, Output, State, callback, clientside_callback, dcc, html, no_update

from collapsewatch.store import queries
from collapsewatch.store.writer import valid_run_name

from . import state

NOTES_DIR = "_notes"
"""The store folder of the runs' start notes (one home: the demo writes there, this page reads)."""
WAIT_MS = 1500
"""How often a waiting page asks whether its run has appeared."""


NOTE_LINES = 4
"""Lines of the run's start notes shown (the newest)."""


def waiting_page(run: str, page: str) -> html.Div:
    """``page``: the page kind ('run', 'tokens'), so two waiting pages never share component ids."""
    with state.borrow() as s:
        others = [r for r in queries.run_names(s) if r != run]
    return html.Div(className="waiting", children=[
        html.H2(["Waiting for run ", html.Code(run), " …"]),
        html.P(["No run of that name in this store yet. This page checks every "
                f"{WAIT_MS / 1000:g} s and opens the run as soon as it starts, before its first step is written; its "
                "page then follows it live."]),
        html.Div(notes_block(run), id={"type": "wait-notes", "page": page}),
        *([html.P(["Meanwhile, the runs already here: ",
                   *[x for r in others for x in (dcc.Link(r, href=f"/run/{r}"), " ")]], className="wait-runs")]
          if others else []),
        html.P(dcc.Link("← all runs", href="/")),
        dcc.Interval(id={"type": "wait-interval", "page": page}, interval=WAIT_MS),
        dcc.Store(id={"type": "wait-run", "page": page}, data=run),
        dcc.Store(id={"type": "wait-found", "page": page}, data=False),
    ])


def start_notes(run: str) -> list[str]:
    """What the run's start printed so far (``<store>/_notes/<run>.txt``, written by the demo: the model build's
    progress), the newest ``NOTE_LINES`` lines; [] when there is none."""
    if not valid_run_name(run):
        return []
    with state.borrow() as s:
        path = s.root / NOTES_DIR / f"{run}.txt"
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return []
    return lines[-NOTE_LINES:]


def notes_block(run: str) -> list:
    lines = start_notes(run)
    if not lines:
        return []
    return [html.P(html.B("The model is being built before the first step (once; cached for later runs):")),
            html.Pre("\n".join(lines), className="wait-notes")]


def run_exists(run: str) -> bool:
    with state.borrow() as s:
        return s.has_run(run)


@callback(Output({"type": "wait-found", "page": MATCH}, "data"), Output({"type": "wait-notes", "page": MATCH},
          "children"), Input({"type": "wait-interval", "page": MATCH}, "n_intervals"),
          State({"type": "wait-run", "page": MATCH}, "data"), prevent_initial_call=True)
def check(_: int, run: str):
    return (True if run_exists(run) else no_update), notes_block(run)


# found: reload the same address, so the page renders again, now with the run
clientside_callback("function(found) { if (found) { window.location.reload(); } return window.dash_clientside.no_update; }",
                    Output({"type": "wait-interval", "page": MATCH}, "disabled"),
                    Input({"type": "wait-found", "page": MATCH}, "data"), prevent_initial_call=True)
