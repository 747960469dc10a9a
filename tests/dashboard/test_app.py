"""The app: pages registered, every page's layout renders over a store, callbacks answer."""

from __future__ import annotations

import inspect

import dash
import pytest

from collapsewatch.dashboard import app as app_module
from collapsewatch.dashboard import create_app, ids, serve


@pytest.fixture(scope="module")
def app(synth_store):
    return create_app(synth_store)


def _text(component) -> str:
    """Every prop of a component tree as text (children walked, not cut short by a repr)."""
    if isinstance(component, (list, tuple)):
        return " ".join(_text(c) for c in component)
    if hasattr(component, "to_plotly_json"):
        props = component.to_plotly_json()["props"]
        return " ".join(f"{k}={_text(v) if k == 'children' else v}" for k, v in props.items())
    return str(component)


def test_pages_and_localhost_default(app):
    paths = {p["module"].rsplit(".", 1)[-1]: p.get("path_template") or p["path"] for p in dash.page_registry.values()}
    assert paths == {"runs": "/", "overview": "/run/<run>", "tokens": "/tokens/<run>", "compare": "/compare",
                     "sweep": "/sweep", "sql": "/sql"}
    assert inspect.signature(serve).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(serve).parameters["port"].default == 8050
    assert isinstance(app, dash.Dash)


def test_layouts_render(app, served):
    from collapsewatch.dashboard.pages import compare, overview, runs, sql, tokens

    assert "collapse" in _text(runs.layout()) and "isdd:drift" in _text(runs.layout())
    ov = _text(overview.layout(run="collapse"))
    assert ids.OV_GRAPH in ov and ids.OV_TIMELINE in ov and "'name': 'band:0'" in ov
    assert "isdd · drift" in ov and "/tokens/collapse?step=" in ov and "episode=" in ov  # the events table
    assert "ev-selected" not in ov and _text(overview.layout(run="collapse", episode="1")).count("ev-selected") == 1
    assert "max_response_tokens" not in ov or "run config" in ov
    assert "on-policy: ratio metrics not applicable" in _text(overview.layout(run="onpolicy"))
    assert "Waiting for run" in _text(overview.layout(run="missing"))
    assert "Waiting for run" in _text(tokens.layout(run="missing"))
    tk = tokens.layout(run="collapse", step="119")
    assert "step 119" in _text(tk)
    assert "step 119" in _text(tokens.layout(run="collapse", step="1000"))  # a step without tokens: the nearest
    assert ids.CMP_GRAPH in _text(compare.layout(runs="collapse,healthy"))
    assert ids.SQL_INPUT in _text(sql.layout())
    from collapsewatch.dashboard.pages import sweep

    assert ids.SW_GRID in _text(sweep.layout()) and "[healthy](/run/healthy)" in _text(sweep.layout(runs="heal"))


def test_compare_default_runs_judge_the_newest_until_a_healthy_one(app):
    from collapsewatch.dashboard.pages import compare

    asked: list[str] = []

    def critical(run: str) -> bool:
        asked.append(run)
        return run.startswith("c")

    # newest first: c1, c2, h1 are the 3 newest and h1 is healthy: they are the default, and only they are judged
    assert compare.default_runs(["c1", "c2", "h1", "h2", "c3"], critical) == ["c1", "c2", "h1"]
    assert asked == ["c1", "c2", "h1"]
    # the 3 newest all critical: the newest healthy run (h1) replaces the third; c5 is never judged
    asked.clear()
    assert compare.default_runs(["c1", "c2", "c3", "c4", "h1", "c5"], critical) == ["c1", "c2", "h1"]
    assert asked == ["c1", "c2", "c3", "c4", "h1"]
    # no healthy run at all: the 3 newest; fewer runs than 3: all of them
    assert compare.default_runs(["c1", "c2", "c3", "c4"], critical) == ["c1", "c2", "c3"]
    assert compare.default_runs(["h1"], critical) == ["h1"]
    assert ids.CMP_GRAPH in _text(compare.layout())  # the page over a store, with its default runs


def test_callbacks(app, served):
    from collapsewatch.dashboard.pages import compare, overview, sql, tokens

    options, value = tokens._seq_options("collapse", 119, None)
    assert value == "0:0" and len(options) == 2
    spans, facts, _ = tokens.render("0:0", "ratio", 119, "collapse")
    assert len(spans) == 24 and sum("obs" in s.className for s in spans) == 4
    assert "token ids" in _text(facts)
    heat = tokens.heatmap_for("collapse", "entropy", 119)
    assert heat.data[0].type == "heatmap" and heat.data[0].colorscale[0][1] == "#000004"  # Inferno
    moved = tokens.move_marker("collapse", "entropy", 7).to_plotly_json()["operations"]
    assert moved[0]["location"] == ["layout", "shapes"] and moved[0]["params"]["value"][0]["y0"] == 6.5
    fig, note, config, _ = compare.draw(["collapse", "healthy"], ["reward_mean"], 1, "collapse")
    # healthy has no reward collapse: it is not drawn against collapse's (step 99), and the chart says so
    assert [t.name for t in fig.data] == ["collapse"]
    assert [a.text for a in fig.layout.annotations if a.name == "unaligned"] == \
        ["not drawn: healthy (no reward collapse)"]
    assert "aligned at each run's reward collapse" in note and "no reward collapse in healthy: not drawn" in note
    _, note, _, _ = compare.draw(["collapse", "healthy"], ["reward_mean"], 1, "critical")
    assert "aligned at each run's first critical episode" in note
    # the synthetic runs differ only by seed and length: the config table lists what differs, or says none does
    assert "config" in _text(config)
    first = sql.run_query(0, sql.EXAMPLE)  # the example query runs when the page opens (n_clicks 0)
    assert first[3] == "msg ok" and len(first[0]) > 0
    csv = sql.download(1, [{"run": "a", "n": 1}], [{"field": "run"}, {"field": "n"}])
    assert csv["content"] == "run,n\na,1\n"
    assert "steps" in _text(sql.column_browser()) and "ratio_p50_pos" in _text(sql.column_browser())
    data = overview.download(1, {"run": "collapse"})
    assert data["filename"] == "collapse-steps.csv" and data["content"].count("\n") == 121  # header + 120 steps
    out = sql.run_query(1, "DELETE FROM steps")
    assert out[2].startswith("refused") and out[3] == "msg error"
    rows, cols, msg, cls, *_ = sql.run_query(1, "SELECT run, count(*) AS n FROM steps GROUP BY run ORDER BY run")
    assert rows == [{"run": "collapse", "n": 120}, {"run": "healthy", "n": 60}, {"run": "onpolicy", "n": 60}]
    assert cls == "msg ok" and msg.startswith("3 rows")


def test_second_app_in_process_gets_the_callbacks(app, synth_store):
    assert app.server.test_client().get("/").status_code == 200  # the first request hands callbacks over
    again = create_app(synth_store)
    assert again.server.test_client().get("/sql").status_code == 200
    for a in (app, again):
        outputs = " ".join(a.callback_map)
        assert f"{ids.OV_GRAPH}.figure" in outputs and f"{ids.SQL_GRID}.rowData" in outputs
    assert app_module._page_callbacks is not None


def test_serve_waits_for_a_store_a_run_has_not_created_yet(tmp_path):
    import threading

    from fixtures.synthetic_store import Shape, SyntheticRun

    from collapsewatch.dashboard.app import wait_for_store

    root = tmp_path / "not-yet"
    said: list[str] = []

    def start_run() -> None:  # the trainer starts after the dashboard, creating the store
        while not said:
            threading.Event().wait(0.05)
        run = SyntheticRun(root, "late", n_steps=3, shape=Shape(seqs=2, token_seqs=1, seq_len=4))
        run.write()
        run.close()

    writer = threading.Thread(target=start_run)
    writer.start()
    assert wait_for_store(root, poll_s=0.05, say=said.append) == root.resolve()
    writer.join()
    assert len(said) == 1 and "waiting for a run to create it" in said[0]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError, match="is a file"):
        wait_for_store(tmp_path / "file")


def test_serve_refuses_a_busy_port(synth_store):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(RuntimeError, match="already in use"):
            serve(synth_store, port=held.getsockname()[1])


def test_the_waiting_page_shows_the_model_build_and_links_to_the_runs_already_there(app, served):
    from collapsewatch.dashboard import waiting

    page = _text(waiting.waiting_page("demo-late", "run"))
    assert "Waiting for run" in page and "/run/collapse" in page and "being built" not in page  # no notes yet
    # what it does: run_exists is the run's folder (written when the trainer starts the run, before its first step),
    # so the page says it opens then — not "as soon as its first step is written" (s32 #14)
    assert "opens the run as soon as it starts, before its first step is written" in page
    notes = served / waiting.NOTES_DIR / "demo-late.txt"
    notes.parent.mkdir(exist_ok=True)
    notes.write_text("building the built-in model once\n" + "".join(f"warm start: step {10 * i}/600\n"
                                                                  for i in range(1, 6)))
    try:
        page = _text(waiting.waiting_page("demo-late", "run"))
        # the newest 4 lines: steps 20 … 50 (the first line and step 10 scrolled off)
        assert "being built" in page and "warm start: step 50/600" in page and "step 10/600" not in page
        assert _text(waiting.check(1, "demo-late")[1]) == _text(waiting.notes_block("demo-late"))  # polls refresh it
    finally:
        notes.unlink()
