"""The dashboard in a real browser: headless Debian Chromium driven by playwright, against a server process
over a temporary store (one finished collapsing run, one on-policy run, one run a writer extends)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch.dashboard import ids
from collapsewatch.demo import start_dashboard
from tests.ports import free_port

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHAPE = Shape(seqs=8, token_seqs=2, seq_len=32)

if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian chromium at /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-store")
    for name, kw in {"collapse": dict(n_steps=120), "onpolicy": dict(n_steps=40, collapse=False, on_policy=True)}.items():
        r = SyntheticRun(root, name, shape=SHAPE, **kw)
        r.write()
        r.close()
    writer = SyntheticRun(root, "live", n_steps=200, shape=SHAPE, collapse=False, heartbeat_s=3600, flush_every=5)
    writer.write(until=30)
    port = free_port()
    proc = start_dashboard(root, port)
    writer.root = root  # where a test adds a run of its own
    yield f"http://127.0.0.1:{port}", writer
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def context(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})  # shared: the JS bundles load once
    yield ctx
    ctx.close()


@pytest.fixture()
def page(context):
    pg = context.new_page()
    pg.errors = []  # console errors and uncaught exceptions seen while the test ran
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    pg.close()


def _last_x(page, trace: int) -> int:
    return page.evaluate(f"() => {{ const d = document.querySelector('#{ids.OV_GRAPH} .js-plotly-plot').data[{trace}];"
                         " return d.x.length ? d.x[d.x.length - 1] : -1; }")


@pytest.mark.parametrize("path, ready", [
    ("/", ".ag-row"),
    ("/run/collapse", f"#{ids.OV_GRAPH} .main-svg"),
    ("/run/onpolicy", f"#{ids.OV_GRAPH} .main-svg"),
    ("/tokens/collapse", f"#{ids.TK_TEXT} .tok"),
    ("/compare", f"#{ids.CMP_GRAPH} .scatterlayer .trace"),
    ("/sql", f"#{ids.SQL_INPUT}"),
])
def test_page_loads_without_console_errors(site, page, path, ready):
    base, _ = site
    page.goto(base + path)
    page.wait_for_selector(ready, timeout=15_000)
    page.wait_for_timeout(800)  # the callbacks that follow the first render (pickers, heatmap, grid) answer
    assert page.errors == []


def test_runs_table_lists_runs_with_flags(site, page):
    page.goto(site[0] + "/")
    page.wait_for_selector(".ag-row")
    text = page.inner_text(f"#{ids.RUNS_GRID}")
    assert "collapse" in text and "live" in text and "running" in text and "isdd:drift" in text


def test_runs_page_refresh_sends_only_the_rows_that_changed(site, page):
    """After the page's first rows, a refresh sends the rows that changed as a grid transaction (the running runs'),
    never every row; each row's age is drawn by the browser from its time (tables.epoch_ms → runAge)."""
    base, writer = site
    growing = SyntheticRun(writer.root, "growing", n_steps=40, shape=SHAPE, collapse=False, heartbeat_s=3600,
                           flush_every=5)  # its own running run: the module's live run keeps its steps for the others
    growing.write(until=10)
    answers = []
    page.on("response", lambda r: answers.append(r) if "_dash-update-component" in r.url else None)
    page.goto(base + "/")
    cell = f'#{ids.RUNS_GRID} .ag-row[row-id="growing"] [col-id="steps"]'
    page.wait_for_selector(cell)
    assert page.inner_text(cell) == "10"
    growing.write(until=15)
    _wait_for(page, lambda: page.inner_text(cell) == "15", "the running run's new steps")
    grids = [b["response"][ids.RUNS_GRID] for b in (a.json() for a in answers) if ids.RUNS_GRID in b.get("response", {})]
    assert grids and all("rowData" not in g for g in grids)
    assert {row["name"] for g in grids for row in g["rowTransaction"].get("update", [])} <= {"growing", "live"}
    assert not any("add" in g["rowTransaction"] or "remove" in g["rowTransaction"] for g in grids)
    growing.close()
    # runAge(ms, now): 12 s; 4 min 59 s → "4 min"; 2 d 3 h → "2 d"; a time ahead of the clock → 0 s; none → ""
    assert page.evaluate("() => [[0, 12000], [0, 299000], [0, 183600000], [5000, 0], [null, 0]]"
                         ".map(a => window.dashAgGridFunctions.runAge(a[0], a[1]))") == [
        "12 s ago", "4 min ago", "2 d ago", "0 s ago", ""]
    assert page.inner_text(f'#{ids.RUNS_GRID} .ag-row[row-id="collapse"] [col-id="updated"]').endswith(" ago")
    assert page.errors == []


def test_runs_page_ages_are_redrawn_without_new_rows(site, browser):
    """A finished run's row is never sent again, yet its age moves on: every refresh redraws the ages by the
    browser's clock (a fake clock here, two hours on; in a context of its own, so no other page's clock moves)."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        page = ctx.new_page()
        page.clock.install()
        page.goto(site[0] + "/")
        cell = f'#{ids.RUNS_GRID} .ag-row[row-id="collapse"] [col-id="updated"]'
        page.wait_for_selector(cell)
        assert not page.inner_text(cell).endswith(" h ago")  # the store was written minutes ago
        page.clock.fast_forward("02:00:00")
        _wait_for(page, lambda: page.inner_text(cell) == "2 h ago", "the age two hours on")
    finally:
        ctx.close()


def _wait_for(page, done, what: str, timeout_s: float = 60.0) -> None:
    """Poll ``done()`` until true: the page's refresh comes every POLL_MS, later on a busy machine (no timed
    assertion: a slow refresh is not a failure, a refresh that never brings the rows is)."""
    t0 = time.monotonic()
    while not done():
        assert time.monotonic() - t0 < timeout_s, f"{what} did not reach the page in {timeout_s:.0f} s"
        page.wait_for_timeout(200)


def test_live_run_shows_new_steps_without_a_reload(site, page):
    base, writer = site
    page.goto(base + "/run/live")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    from collapsewatch.dashboard.figures import TRACE_COLUMNS

    reward = TRACE_COLUMNS.index("reward_mean")
    assert _last_x(page, reward) == 29
    writer.write(until=38)
    _wait_for(page, lambda: _last_x(page, reward) == 37, "new steps")
    _wait_for(page, lambda: "last step 37" in page.inner_text(f"#{ids.OV_HEADER}"), "the header's last step")
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1  # no reload
    assert page.errors == []


def _visible_bands(page) -> list[list[float]]:
    """[x, width, height] of the filled shapes of the overview that run down the whole panel grid."""
    return page.evaluate(f"""() => Array.from(document.querySelectorAll('#{ids.OV_GRAPH} .shapelayer path'))
        .filter(p => (p.style.fill || '').startsWith('rgb') && p.style.fill !== 'rgba(0, 0, 0, 0)')
        .map(p => p.getBoundingClientRect()).filter(r => r.height > 300 && r.width > 0)
        .map(r => [r.x, r.width, r.height])""")


def _episodes(root, run: str) -> pd.DataFrame:
    from collapsewatch.store import Store
    from collapsewatch.store.queries import run_events

    return run_events(Store(root), run)


def test_timeline_aligned_with_panels_and_hover_shows_one_band(site, page):
    episodes = _episodes(site[1].root, "collapse")
    assert (episodes["detector"] == "isdd").any(), "the synthetic collapse has no ISDD episode"
    page.goto(site[0] + "/run/collapse")
    page.wait_for_selector(f"#{ids.OV_TIMELINE} .barlayer .point")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    assert page.locator(f"#{ids.OV_TIMELINE} .barlayer .point").count() == len(episodes)  # one timeline
    assert _visible_bands(page) == []  # no band washes the panels until an episode is picked
    # the same step lands at the same pixel in the timeline and in the panels below it (the first column)
    for axis in ("xaxis",):
        px = page.evaluate(f"""() => ['{ids.OV_TIMELINE}', '{ids.OV_GRAPH}'].map(id => {{
            const gd = document.querySelector('#' + id + ' .js-plotly-plot'), ax = gd._fullLayout.{axis};
            return gd.getBoundingClientRect().x + ax._offset + ax.l2p(60); }})""")
        assert abs(px[0] - px[1]) < 1.5, (axis, px)
    # hover per row: the ISDD bar's hover names ISDD, and its band (only) appears on the panels
    bar = page.evaluate(f"""() => {{ const gd = document.querySelector('#{ids.OV_TIMELINE} .js-plotly-plot');
        return gd.data[0].y.indexOf('isdd · drift'); }}""")
    box = page.locator(f"#{ids.OV_TIMELINE} .barlayer .trace").first.locator(".point").nth(bar).bounding_box()
    page.evaluate(f"""() => document.querySelector('#{ids.OV_TIMELINE} .js-plotly-plot')
        .on('plotly_hover', d => {{ window.hovered = d.points.map(p => p.y); }})""")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=4)  # plotly's drag layer
    page.wait_for_function("() => window.hovered !== undefined")
    assert page.evaluate("() => window.hovered") == ["isdd · drift"]  # that row only, not what else spans the step
    page.wait_for_function(f"""() => document.querySelectorAll('#{ids.OV_GRAPH} .shapelayer path').length > 0 &&
        Array.from(document.querySelectorAll('#{ids.OV_GRAPH} .shapelayer path'))
        .filter(p => p.getBoundingClientRect().height > 300).length == 2""")
    assert len(_visible_bands(page)) == 2  # one episode, one band in each panel column
    assert page.errors == []


def test_events_table_rows_link_to_steps_and_tokens(site, page):
    base, writer = site
    page.goto(base + "/run/collapse")
    page.wait_for_selector(f"#{ids.OV_EVENTS} .ev-row")
    rows = page.locator(f"#{ids.OV_EVENTS} .ev-row")
    assert rows.count() == len(_episodes(writer.root, "collapse"))
    text = page.inner_text(f"#{ids.OV_EVENTS}")
    assert "isdd · drift" in text
    # severity is visibly different: a critical badge is red, a warning one amber, each severity its own colour
    colours = page.evaluate(f"""() => Array.from(document.querySelectorAll('#{ids.OV_EVENTS} tbody .sev'))
        .map(e => [e.innerText, getComputedStyle(e).backgroundColor])""")
    by = {sev: c for sev, c in colours}
    assert by.get("critical", "rgb(211, 47, 47)") == "rgb(211, 47, 47)" and len(set(by.values())) == len(by) >= 2
    # the ISDD row's steps open the panels zoomed on the episode with its band shown
    isdd = rows.filter(has_text="isdd · drift")
    isdd.locator(".ev-steps").click()
    page.wait_for_url("**episode=*")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    page.wait_for_function(f"""() => {{ const gd = document.querySelector('#{ids.OV_GRAPH} .js-plotly-plot');
        return gd && gd._fullLayout && gd._fullLayout.xaxis.range[1] - gd._fullLayout.xaxis.range[0] < 80; }}""")
    assert len(_visible_bands(page)) == 2
    # …and its tokens link opens the Tokens page at that step with the sequences ranked by lowest ratio
    page.goto(base + "/run/collapse")
    page.locator(f"#{ids.OV_EVENTS} .ev-row").filter(has_text="isdd · drift").locator(".ev-tokens").click()
    page.wait_for_url("**/tokens/collapse?step=*rank=ratio*")
    page.wait_for_selector(f"#{ids.TK_TEXT} .tok")
    assert "lowest ratio" in page.inner_text(f"#{ids.TK_RANK}")
    assert page.errors == []


def test_overview_smoothed_by_default_and_zoom_kept_in_the_url(site, page):
    base, _ = site
    page.goto(base + "/run/collapse")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    assert "16-step mean" in page.inner_text(f"#{ids.OV_SMOOTH}")
    from collapsewatch.dashboard.figures import TRACE_COLUMNS

    raw = TRACE_COLUMNS.index("raw:reward_mean")
    assert page.evaluate(f"() => document.querySelector('#{ids.OV_GRAPH} .js-plotly-plot').data[{raw}].x.length") == 120
    # the zoom a drag makes; repeated once a second until the URL follows: the panels draw (.main-svg) before
    # dcc.Graph binds its relayout handler, so a zoom in that gap reaches no callback (CI saw it once under load)
    page.wait_for_function(f"""() => {{
        if (window.location.search === '?from=30&to=60') {{ return true; }}
        Plotly.relayout(document.querySelector('#{ids.OV_GRAPH} .js-plotly-plot'),
                        {{'xaxis.range[0]': 29.5, 'xaxis.range[1]': 60.5}});
        return false;
    }}""", polling=1000)
    page.wait_for_url("**/run/collapse?from=30&to=60")
    page.wait_for_function(f"""() => document.querySelector('#{ids.OV_TIMELINE} .js-plotly-plot')
                                   ._fullLayout.xaxis.range[0] == 29.5""")
    page.reload()
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    assert page.evaluate(f"() => document.querySelector('#{ids.OV_GRAPH} .js-plotly-plot')._fullLayout.xaxis.range") \
        == [29.5, 60.5]
    assert page.errors == []


def test_unknown_run_page_waits_then_opens_the_run(site, page, tmp_path):
    base, writer = site
    page.goto(base + "/run/late")
    page.wait_for_selector(".waiting")
    assert "Waiting for run" in page.inner_text(".waiting")
    late = SyntheticRun(writer.root, "late", n_steps=10, shape=SHAPE, collapse=False)
    late.write()
    late.close()
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg", timeout=20_000)
    assert page.errors == []


def test_sql_console_refuses_a_write(site, page):
    page.goto(site[0] + "/sql")
    page.fill(f"#{ids.SQL_INPUT}", "DROP VIEW steps")
    page.click(f"#{ids.SQL_RUN}")
    msg = page.wait_for_selector(f"#{ids.SQL_MESSAGE}.error", timeout=10_000)
    assert "refused" in msg.inner_text() and "read-only" in msg.inner_text()
    page.fill(f"#{ids.SQL_INPUT}", "SELECT run, count(*) AS n FROM steps GROUP BY run ORDER BY run")
    page.click(f"#{ids.SQL_RUN}")
    page.wait_for_selector(f"#{ids.SQL_MESSAGE}.ok")
    page.wait_for_function(f"() => document.querySelector('#{ids.SQL_GRID}').innerText.includes('onpolicy')")
    assert page.errors == []


def test_tokens_page_colours_tokens_and_marks_observations(site, page):
    page.goto(site[0] + "/tokens/collapse")
    page.wait_for_selector(f"#{ids.TK_TEXT} .tok")
    assert page.locator(f"#{ids.TK_TEXT} .tok.obs").count() == 5  # seq_len 32 → positions 10..14 are a tool block
    first = page.locator(f"#{ids.TK_TEXT} .tok:not(.obs)").first
    assert "ratio" in first.get_attribute("data-tip")
    before = first.evaluate("e => e.style.backgroundColor")
    page.click("text=entropy")
    page.wait_for_function(f"""b => getComputedStyle(document.querySelector('#{ids.TK_TEXT} .tok:not(.obs)'))
                                   .backgroundColor !== b && document.querySelector('#{ids.TK_TEXT} .tok:not(.obs)')
                                   .style.backgroundColor.includes('255, 202, 40')""", arg=before)
    page.wait_for_selector(f"#{ids.TK_HEATMAP} .heatmaplayer image, #{ids.TK_HEATMAP} .hm image")
    assert page.errors == []


# -- the shipped sample runs (real trainer runs, sample_runs/store) ---------------------------------------------
SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs" / "store"
COLLAPSING_SAMPLE = "grpo-collapse"


@pytest.fixture(scope="module")
def sample_site(tmp_path_factory):
    import shutil

    root = tmp_path_factory.mktemp("samples") / "store"
    shutil.copytree(SAMPLES, root)  # served from a copy: the shipped folder is never touched by a test
    port = free_port()
    proc = start_dashboard(root, port)
    yield f"http://127.0.0.1:{port}", root
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("path, ready", [
    ("/", ".ag-row"),
    (f"/run/{COLLAPSING_SAMPLE}", f"#{ids.OV_GRAPH} .main-svg"),
    (f"/run/{COLLAPSING_SAMPLE}?smooth=16", f"#{ids.OV_GRAPH} .main-svg"),
    ("/run/grpo-healthy", f"#{ids.OV_GRAPH} .main-svg"),
    (f"/tokens/{COLLAPSING_SAMPLE}", f"#{ids.TK_TEXT} .tok"),
    ("/compare", f"#{ids.CMP_GRAPH} .scatterlayer .trace"),
    ("/compare?runs=grpo-healthy,grpo-collapse&smooth=16", f"#{ids.CMP_GRAPH} .scatterlayer .trace"),
    ("/sql", f"#{ids.SQL_INPUT}"),
])
def test_sample_run_pages_load_without_console_errors(sample_site, page, path, ready):
    page.goto(sample_site[0] + path)
    page.wait_for_selector(ready, timeout=15_000)
    page.wait_for_timeout(800)
    assert page.errors == []


def test_phase_bands_visible_on_the_collapsing_sample_run(sample_site, page):
    from collapsewatch.store import Store
    from collapsewatch.store.queries import run_events

    base, root = sample_site
    episodes = len(run_events(Store(root), COLLAPSING_SAMPLE))
    assert episodes > 0, "the collapsing sample run has no detector episodes: regenerate sample_runs"
    page.goto(f"{base}/run/{COLLAPSING_SAMPLE}")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    timeline, rows = page.locator(f"#{ids.OV_TIMELINE} .barlayer .point"), page.locator(f"#{ids.OV_EVENTS} .ev-row")
    _wait_for(page, lambda: timeline.count() == episodes and rows.count() == episodes, "one bar and row per episode")
    boxes = page.evaluate(f"""() => Array.from(document.querySelectorAll('#{ids.OV_GRAPH} .shapelayer path'))
        .filter(p => (p.style.fill || '').startsWith('rgb') && p.style.fill !== 'rgba(0, 0, 0, 0)')
        .map(p => p.getBoundingClientRect()).filter(r => r.height > 300 && r.width > 0).length""")
    assert boxes == 0  # bands appear for the picked or hovered episode only
    assert timeline.count() == episodes and rows.count() == episodes  # one timeline: a bar each; a row each
    assert page.errors == []


def test_sample_tokens_page_opens_the_sequence_named_in_the_url_decoded(sample_site, page):
    from collapsewatch import connect

    base, root = sample_site
    step, seq = connect(root).execute(  # the last stored sequence of the collapsing run (not the first: default)
        f"SELECT step, max(seq_id) FROM tokens WHERE run = '{COLLAPSING_SAMPLE}' GROUP BY step ORDER BY step DESC "
        "LIMIT 1").fetchone()
    page.goto(f"{base}/tokens/{COLLAPSING_SAMPLE}?step={step}&seq={seq}")
    page.wait_for_selector(f"#{ids.TK_TEXT} .tok")
    # the picker shows the sequence, not its placeholder
    _wait_for(page, lambda: f"seq {seq} " in page.inner_text(f"#{ids.TK_SEQ}"), "the picked sequence")
    info = page.inner_text(f"#{ids.TK_SEQ_INFO}")
    assert f"step {step} · seq {seq}" in info and "decoded" in info  # tokenizer kept in the run folder
    assert page.errors == []


def test_smoothed_live_run_extends_and_the_picker_switches_back_to_raw(site, page):
    base, writer = site
    page.goto(base + "/run/live?smooth=8")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    assert "8-step mean" in page.inner_text(f"#{ids.OV_SMOOTH}")
    from collapsewatch.dashboard.figures import TRACE_COLUMNS

    reward = TRACE_COLUMNS.index("reward_mean")
    last = _last_x(page, reward)
    writer.write(until=last + 1 + 6)
    _wait_for(page, lambda: _last_x(page, reward) == last + 6, "the smoothed view's new steps")
    page.click(f"#{ids.OV_SMOOTH}")
    page.get_by_text("raw", exact=True).click()
    page.wait_for_url(f"{base}/run/live?smooth=1")
    page.wait_for_selector(f"#{ids.OV_GRAPH} .main-svg")
    assert page.errors == []


def test_sql_example_runs_on_load_enter_runs_and_csv_downloads(site, page):
    page.goto(site[0] + "/sql")
    page.wait_for_selector(f"#{ids.SQL_GRID} .ag-row")  # the example query ran by itself
    assert "steps" in page.inner_text(f"#{ids.SQL_COLUMNS}")  # column browser
    page.fill(f"#{ids.SQL_INPUT}", "SELECT 1 AS one UNION ALL SELECT 2")
    page.press(f"#{ids.SQL_INPUT}", "Enter")
    page.wait_for_function(f"() => document.querySelector('#{ids.SQL_MESSAGE}').innerText.startsWith('2 rows')")
    page.fill(f"#{ids.SQL_INPUT}", "SELECT 7 AS seven")
    page.press(f"#{ids.SQL_INPUT}", "Control+Enter")
    page.wait_for_function(f"() => document.querySelector('#{ids.SQL_MESSAGE}').innerText.startsWith('1 rows')")
    with page.expect_download() as got:
        page.click(f"#{ids.SQL_CSV}")
    assert Path(got.value.path()).read_text() == "seven\n7\n" and got.value.suggested_filename == "query.csv"
    assert page.errors == []


def test_runs_ticked_go_to_compare_with_stable_colours(site, page):
    base, _ = site
    page.goto(base + "/")
    page.wait_for_selector(".ag-row")
    for name in ("collapse", "onpolicy"):
        page.locator(f".ag-row[row-id='{name}'] .ag-checkbox-input").first.check()
    page.click(f"#{ids.RUNS_COMPARE}")
    page.wait_for_url("**/compare?runs=*")
    assert set(page.url.split("runs=")[1].split(",")) == {"collapse", "onpolicy"}
    page.wait_for_selector(f"#{ids.CMP_GRAPH} .scatterlayer .trace")

    def colour(run: str) -> str:
        return page.evaluate(f"""() => document.querySelector('#{ids.CMP_GRAPH} .js-plotly-plot').data
            .find(t => t.name === '{run}').line.color""")

    before = colour("collapse")
    page.goto(base + "/compare?runs=onpolicy,live,collapse")  # other runs, another order: the same colour
    page.wait_for_selector(f"#{ids.CMP_GRAPH} .scatterlayer .trace")
    assert colour("collapse") == before
    assert page.errors == []
