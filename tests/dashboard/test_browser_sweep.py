"""The sweep view and the runs page's grouping and filters in a real browser (headless Debian Chromium), on a store
written through the public Monitor API: three shipped sample runs (real trainer runs) and a drill run replayed
step by step with their own configs (``fixtures.replay``; the drill run without one), so the verdicts and collapse
steps are what the recorder and the detectors make of recorded data."""

from __future__ import annotations

import re

import pytest
from fixtures.replay import replay, sample_copy, source_config

from collapsewatch.dashboard import ids
from collapsewatch.demo import start_dashboard
from collapsewatch.judge import judge
from collapsewatch.store import Store
from tests.ports import free_port

from .test_browser import browser, context, page  # noqa: F401  (the shared Chromium fixtures)

pytestmark = pytest.mark.browser
SOURCES = {"grpo-collapse": "grpo-collapse", "grpo-healthy": "grpo-healthy", "sapo_search": "sapo_search",
           "no-config": "drill-lld-grpo"}
# The sample runs' verdicts (docs/sample_runs.md: reward collapse at 85 for grpo-collapse and sapo_search; the lld
# drill run is a warning, a grad explosion without a reward collapse); the replays' are checked against them below.
VERDICTS = {"grpo-collapse": ("collapsed", 85), "sapo_search": ("collapsed", 85), "grpo-healthy": ("healthy", None),
            "no-config": ("warning", None)}
ROWS = f"#{ids.SW_GRID} .ag-center-cols-container .ag-row"


@pytest.fixture(scope="module")
def sweep_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    src = sample_copy(tmp / "samples", sorted(set(SOURCES.values())))
    root = tmp / "store"
    for name, run in SOURCES.items():
        replay(src, run, root, name, None if name == "no-config" else source_config(src, run))
    s = Store(root)
    try:
        got = {name: (judge(s, name).verdict.status, judge(s, name).verdict.collapse_step) for name in SOURCES}
    finally:
        s.close()
    assert got == VERDICTS  # the replays judged as the recorded runs are
    port = free_port()
    proc = start_dashboard(root, port)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _grid_rows(pg, grid: str) -> dict[str, dict[str, str]]:
    """Each row of an AG Grid by its run name: the text of every cell by column id, and the run link's href."""
    return pg.evaluate(f"""() => Object.fromEntries(Array.from(
        document.querySelectorAll('#{grid} .ag-center-cols-container .ag-row')).map(r => {{
            const cells = Object.fromEntries(Array.from(r.querySelectorAll('.ag-cell'))
                .map(c => [c.getAttribute('col-id'), c.innerText.trim()]));
            const a = r.querySelector('[col-id=run] a');
            return [cells.run, {{...cells, href: a ? a.getAttribute('href') : null}}]; }}))""")


def test_sweep_page_shows_which_settings_collapse(sweep_site, page):  # noqa: F811
    page.goto(f"{sweep_site}/sweep")
    page.wait_for_selector(ROWS)
    page.wait_for_selector(f"#{ids.SW_GRAPH} .parcoords")
    rows = _grid_rows(page, ids.SW_GRID)
    assert set(rows) == set(VERDICTS)  # the run without a config is listed too
    for run, (verdict, step) in VERDICTS.items():
        assert rows[run]["verdict"] == verdict and rows[run]["collapse_step"] == ("—" if step is None else str(step))
        assert rows[run]["href"] == f"/run/{run}"
    # the sample runs' configs differ in lr (1e-3, 1e-4, 1e-3), mini_batches (4, 2, 4), objective (grpo, grpo,
    # sapo_search) and ppo_epochs (2, 1, 2); run and store differ by nature, every other key is the same
    assert (rows["grpo-healthy"]["config.lr"], rows["grpo-healthy"]["config.mini_batches"],
            rows["sapo_search"]["config.objective"], rows["grpo-collapse"]["config.ppo_epochs"]) == ("0.0001", "2",
                                                                                                   "sapo_search", "2")
    assert rows["no-config"]["config"] == "none" and rows["no-config"]["config.lr"] == ""
    fig = page.evaluate(f"""() => {{ const d = document.querySelector('#{ids.SW_GRAPH} .js-plotly-plot').data[0];
        return {{labels: d.dimensions.map(x => x.label), codes: Array.from(d.line.color),
                 steps: Array.from(d.dimensions[4].values)}}; }}""")
    assert fig["labels"] == ["lr", "mini_batches", "objective", "ppo_epochs", "collapse step", "verdict"]
    # three configured runs on the chart: two collapsed (code 2) at step 85, the healthy one (code 0) at "none"
    # = 199 + round(0.08 × 199) = 215, above the last step reached
    assert sorted(zip(fig["codes"], fig["steps"], strict=True)) == [(0, 215), (2, 85), (2, 85)]
    assert "1 run without a config, listed below, on no axis: no-config." in page.inner_text(f"#{ids.SW_NOTE}")
    page.locator(f"#{ids.SW_GRID} a[href='/run/grpo-collapse']").click()
    page.wait_for_url("**/run/grpo-collapse")
    page.wait_for_selector(f"#{ids.OV_VERDICT}")
    assert page.inner_text(f"#{ids.OV_VERDICT}").startswith("COLLAPSED")
    assert page.errors == []


@pytest.mark.parametrize("runs, sentence", [
    ("grpo-healthy", "One run selected: a sweep needs two or more runs to compare their settings."),
    ("grpo-healthy,no-config", "1 of the 2 selected runs has a config: a sweep needs two or more runs with a config "
                               "to have axes."),
])
def test_sweep_says_why_there_is_no_chart(sweep_site, page, runs, sentence):  # noqa: F811
    page.goto(f"{sweep_site}/sweep?runs={runs}")
    page.wait_for_selector(ROWS)
    assert page.inner_text(f"#{ids.SW_NOTE}") == sentence
    # the chart is hidden by the sweep's callback (its first render may come before it): wait for that state
    page.wait_for_selector(f"#{ids.SW_GRAPH}", state="hidden")
    assert not page.locator(f"#{ids.SW_GRAPH}").is_visible()
    assert len(_grid_rows(page, ids.SW_GRID)) == len(runs.split(","))


def _runs(pg) -> list[str]:
    return sorted(_grid_rows(pg, ids.RUNS_GRID))


def test_runs_page_groups_and_filters_by_config_and_verdict(sweep_site, page):  # noqa: F811
    page.goto(f"{sweep_site}/?group=lr")
    page.wait_for_selector(f"#{ids.RUNS_GRID} .ag-row")
    page.wait_for_selector(f"#{ids.RUNS_GROUPS} .grp-row")
    groups = page.evaluate(f"""() => Array.from(document.querySelectorAll('#{ids.RUNS_GROUPS} .grp-row'))
        .map(r => Array.from(r.cells).map(c => c.innerText))""")
    # lr 1e-4: grpo-healthy; 1e-3: grpo-collapse and sapo_search, both collapsed, first at 85; no-config: a warning
    assert groups == [["0.0001", "1", "1", "0", "0", "—"], ["0.001", "2", "0", "0", "2", "85"],
                      ["no config", "1", "0", "1", "0", "—"]]
    # the lr column pinned first and sorted ascending: grpo-healthy (1e-4) before the two 1e-3 runs
    pinned = page.evaluate(f"""() => Array.from(document.querySelectorAll(
        '#{ids.RUNS_GRID} .ag-pinned-left-header .ag-header-cell')).map(c => c.getAttribute('col-id'))""")
    assert "config.lr" in pinned
    order = page.evaluate(f"""() => Array.from(document.querySelectorAll('#{ids.RUNS_GRID} .ag-center-cols-container .ag-row'))
        .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
        .map(r => r.querySelector('[col-id=run]').innerText.trim())""")
    assert order.index("grpo-healthy") < min(order.index("grpo-collapse"), order.index("sapo_search"))
    # verdict: untick "collapsed" → the healthy run and the warning one
    page.locator(f"#{ids.RUNS_VERDICT} input[value=collapsed]").uncheck()
    page.wait_for_function(f"() => document.querySelectorAll('#{ids.RUNS_GRID} .ag-center-cols-container .ag-row')"
                           ".length == 2")
    assert _runs(page) == ["grpo-healthy", "no-config"]
    assert re.search(r"2\s+shown", page.inner_text(f"#{ids.RUNS_SUMMARY}"))
    page.locator(f"#{ids.RUNS_VERDICT} input[value=collapsed]").check()
    page.wait_for_function(f"() => document.querySelectorAll('#{ids.RUNS_GRID} .ag-center-cols-container .ag-row')"
                           ".length == 4")
    # a config key's own filter (AG Grid's number filter, "equals"): mini_batches = 4 → the two collapsed runs
    box = page.locator(f"#{ids.RUNS_GRID} .ag-floating-filter[col-id='config.mini_batches'] input[type=number]")
    box.fill("4")
    page.wait_for_function(f"() => document.querySelectorAll('#{ids.RUNS_GRID} .ag-center-cols-container .ag-row')"
                           ".length == 2")
    assert _runs(page) == ["grpo-collapse", "sapo_search"]
    assert page.errors == []


def test_sweep_axis_titles_neither_overlap_nor_leave_the_chart(tmp_path, page):  # noqa: F811
    import itertools
    import json
    import math
    import shutil
    from pathlib import Path

    import plotly

    from collapsewatch.dashboard import charts, create_app, history, state, sweep
    from collapsewatch.dashboard.figures import COLUMNS
    from tests.dashboard.test_sample_runs import SAMPLES

    # the shipped sample runs differ in 14 config keys: 16 axes 1,300 px apart, about 87 px each, where
    # max_response_tokens (~120 px wide) ran level into mini_batches when the titles were horizontal
    shutil.copytree(SAMPLES, tmp_path / "store")
    create_app(tmp_path / "store")
    history.clear()
    with state.borrow() as s:
        fig = charts.sweep_figure(sweep.sweep(sweep.select(history.run_table(s, COLUMNS), None)))
    history.clear()
    assert len(fig["data"][0]["dimensions"]) == 16
    page.set_content("<body style='margin:0'><div id=g style='width:1446px'></div></body>")  # its width at 1500 px
    page.add_script_tag(path=str(Path(plotly.__file__).parent / "package_data" / "plotly.min.js"))
    page.evaluate(f"Plotly.newPlot('g', {json.dumps(fig['data'])}, {json.dumps(fig['layout'])})")
    svg, titles = page.evaluate("""() => [document.querySelector('#g .main-svg').getBoundingClientRect().toJSON(),
        Array.from(document.querySelectorAll('#g .axis-title')).map(t => { const r = t.getBoundingClientRect(),
            b = t.getBBox(); return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
            x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2, w: b.width, h: b.height}; })]""")
    assert len(titles) == 16
    for t in titles:  # every title whole inside the chart ("verdict" was cut to "verdic")
        assert svg["left"] <= t["left"] and t["right"] <= svg["right"] and svg["top"] <= t["top"], t
    # the titles are parallel rectangles tilted by the same angle: two overlap when their centres are closer than
    # half their widths summed along the text and closer than half their heights summed across it
    a = math.radians(fig["data"][0].get("labelangle", 0))  # Plotly's default: level
    along, across = (math.cos(a), math.sin(a)), (-math.sin(a), math.cos(a))
    for p, q in itertools.pairwise(titles):
        dx, dy = q["x"] - p["x"], q["y"] - p["y"]
        apart_along = abs(dx * along[0] + dy * along[1]) >= (p["w"] + q["w"]) / 2
        apart_across = abs(dx * across[0] + dy * across[1]) >= (p["h"] + q["h"]) / 2
        assert apart_along or apart_across, (p["text"], q["text"])
    assert page.errors == []
