"""A run with no step recorded (a Monitor that crashed before its first log) is not shown as healthy: ``collapsewatch
runs`` and the dashboard's runs page, sweep and run page show ``no steps`` (``collapsewatch.verdict.NO_STEPS``); it
is in no verdict's count or colour and not on the sweep chart, and the runs page's verdict filter has it as its own
box. Its verdict's status stays healthy (``detect --json``): nothing fell."""

from __future__ import annotations

import json

import pytest
from fixtures.synthetic_store import Shape, SyntheticRun
from typer.testing import CliRunner

from collapsewatch.cli import app
from collapsewatch.dashboard import charts, history, state, sweep
from collapsewatch.dashboard.figures import COLUMNS
from collapsewatch.store.queries import Store
from collapsewatch.store.writer import StoreWriter


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "s"
    run = SyntheticRun(root, "done", n_steps=30, shape=Shape(seqs=4, token_seqs=2, seq_len=12), collapse=False,
                       seed=1, config={"lr": 1e-3})  # a healthy run with steps
    run.write()
    run.close()
    crashed = StoreWriter(root, "crashed", heartbeat_s=3600)  # the run row alone, as a Monitor that crashed leaves
    crashed.set_run_info(config={"lr": 1e-4})
    crashed.flush(status="crashed")
    history.clear()
    yield root
    history.clear()


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_runs_shows_no_steps_for_a_run_without_one(store):
    rows = {r["run"]: r for r in json.loads(_cli("runs", str(store), "--json"))}
    assert rows["crashed"]["verdict"] == "no steps" and rows["done"]["verdict"] == "healthy"
    assert rows["crashed"]["sentence"] == "No steps recorded: nothing to judge."
    line = next(line for line in _cli("runs", str(store)).splitlines() if " crashed " in line)
    assert "no steps" in line and "healthy" not in line


def test_runs_json_and_csv_carry_n_steps_and_the_help_names_the_four_verdicts(store):
    # a script reads n_steps, not the word: the crashed run wrote its run row alone → 0 steps (it was null); the
    # healthy run wrote SyntheticRun's 30 steps → 30
    rows = {r["run"]: r for r in json.loads(_cli("runs", str(store), "--json"))}
    assert (rows["crashed"]["n_steps"], rows["done"]["n_steps"]) == (0, 30)
    csv_rows = {line.split(",")[0]: line for line in _cli("runs", str(store), "--csv").splitlines()[1:]}
    header = _cli("runs", str(store), "--csv").splitlines()[0].split(",")
    assert csv_rows["crashed"].split(",")[header.index("n_steps")] == "0"
    text = " ".join(_cli("runs", "--help").split())
    assert 'healthy, warning, collapsed, or "no steps" for a run with no step recorded' in text
    assert "its n_steps is 0" in text
    # the verdict itself keeps its status: nothing fell
    verdict = json.loads(_cli("detect", str(store), "--run", "crashed", "--json"))[-1]
    assert verdict["type"] == "verdict" and verdict["status"] == "healthy" and verdict["n_steps"] == 0


def test_the_dashboard_counts_and_colours_it_as_no_verdict(store):
    state.configure(store)
    from collapsewatch.dashboard import create_app

    create_app(store)  # the pages register with an app
    from collapsewatch.dashboard.pages import runs as page

    table = history.run_table(Store(store), COLUMNS)
    assert dict(zip(table["run"], table["verdict"], strict=True)) == {"done": "healthy", "crashed": "no steps"}
    every = page.view(table, "status", list(sweep.FILTERS))
    assert {r["name"]: r["verdict"].rstrip("*") for r in every["shown"]}["crashed"] == "no steps"
    # its step count is 0 as in runs --json (not null / NaN), in the summary and the grid; no last step
    runs_json = {r["run"]: r["n_steps"] for r in json.loads(_cli("runs", str(store), "--json"))}
    assert dict(zip(table["run"], table["n_steps"].tolist(), strict=True)) == runs_json == {"done": 30, "crashed": 0}
    assert {r["name"]: (r["steps"], r["last_step"]) for r in every["shown"]} == {"done": (30, 29), "crashed": (0, None)}
    # grouped by status: the crashed run is one of its group's runs, counted under no verdict
    groups = every["groups"].set_index("group")
    assert groups.loc["crashed", ["runs", "healthy", "warning", "collapsed"]].tolist() == [1, 0, 0, 0]
    assert groups.loc["finished", ["runs", "healthy"]].tolist() == [1, 1]
    # the filter: "healthy" alone hides it, "no steps" alone shows it alone
    assert [r["name"] for r in page.view(table, None, ["healthy"])["shown"]] == ["done"]
    assert [r["name"] for r in page.view(table, None, ["no steps"])["shown"]] == ["crashed"]
    # the sweep chart (axis lr: 1e-3, 1e-4) draws the run with steps, not the one without (it was drawn as healthy)
    fig = charts.sweep_figure(sweep.sweep(table))
    dims = {d["label"]: d["values"] for d in fig["data"][0]["dimensions"]}
    assert dims["lr"] == [0.001] and dims["verdict"] == [0]


def test_the_run_page_badge_says_no_steps(store):
    state.configure(store)
    from collapsewatch.dashboard import create_app

    create_app(store)
    from collapsewatch.dashboard.pages import overview

    page = overview.layout(run="crashed").to_plotly_json()
    found = []

    def walk(node):  # the verdict line's badge: its text and class
        if hasattr(node, "to_plotly_json"):
            node = node.to_plotly_json()
        if isinstance(node, (list, tuple)):
            for n in node:
                walk(n)
        elif isinstance(node, dict) and "props" in node:
            props = node["props"]
            if "verdict-badge" in str(props.get("className", "")):
                found.append((props.get("children"), props["className"]))
            walk(props.get("children"))

    walk(page)
    assert found == [("no steps", "badge verdict-badge verdict-no-steps")], found  # (was "healthy", green)
