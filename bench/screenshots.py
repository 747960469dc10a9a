"""Screenshots of every dashboard page into docs/img/, from a synthetic store (headless Debian Chromium).

    .venv/bin/python bench/screenshots.py [--out docs/img] [--keep STORE_DIR]
    .venv/bin/python bench/screenshots.py --run STORE RUN PNG     # one run's overview from any store

Then the shipped sample runs (``sample_runs/store``, real trainer runs): ``sample-*.png``.

The store holds search-agent-like runs: a GRPO run that collapses (ISDD + LLD phases), a healthy LLDS run,
an on-policy run and a run still being written. Token rows are Search-R1-style traces encoded with a
byte-level BPE trained here (about a second), so the token page shows text with tool observations.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from collapsewatch.demo import start_dashboard

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fixtures package (tests/fixtures)
from fixtures.synthetic_store import Shape, SyntheticRun  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TRACES = [
    ("Which city is the capital of Australia?", "capital of Australia",
     "Doc 1 (Canberra): Canberra is the capital city of Australia, founded in 1913 as a planned city "
     "between Sydney and Melbourne.", "Canberra"),
    ("Who wrote the novel Middlemarch?", "Middlemarch novel author",
     "Doc 1 (Middlemarch): Middlemarch is a novel by George Eliot, published in eight parts in 1871 and 1872.",
     "George Eliot"),
    ("In which year did the Berlin Wall fall?", "Berlin Wall fall year",
     "Doc 1 (Berlin Wall): The Berlin Wall fell on 9 November 1989, when the border crossings were opened.",
     "1989"),
    ("What is the chemical symbol of tungsten?", "tungsten chemical symbol",
     "Doc 1 (Tungsten): Tungsten is a chemical element with the symbol W and atomic number 74.", "W"),
]


def trace_text(q: str, query: str, doc: str, answer: str) -> tuple[str, str, str]:
    """(model text before the observation, the observation, model text after it)."""
    before = f"<think>I need to look this up: {q.lower()}</think>\n<search>{query}</search>\n"
    obs = f"<information>{doc}</information>\n"
    after = f"<think>The document says it: {answer}.</think>\n<answer>{answer}</answer><|im_end|>"
    return before, obs, after


def templates(tok_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and observation masks (n_traces, length) of the traces, with a tokenizer saved to tok_dir."""
    from collapsewatch.models.tokenizer import train_tokenizer

    parts = [trace_text(*t) for t in TRACES]
    tok = train_tokenizer(["".join(p) for p in parts] * 30, vocab_size=600)
    tok.save_pretrained(tok_dir)
    ids, obs = [], []
    for before, ob, after in parts:
        chunks = [(tok.encode(before), False), (tok.encode(ob), True), (tok.encode(after), False)]
        row = [(i, o) for c, o in chunks for i in c]
        ids.append([i for i, _ in row])
        obs.append([o for _, o in row])
    n = max(len(r) for r in ids)  # pad to the longest trace; padding is marked absent (not written)
    pad = lambda r, v: r + [v] * (n - len(r))  # noqa: E731
    return (np.array([pad(r, 0) for r in ids]), np.array([pad(r, False) for r in obs]),
            np.array([pad([True] * len(r), False) for r in ids]))


def build(root: Path) -> SyntheticRun:
    tok_dir = root.parent / "tokenizer"
    tpl = templates(tok_dir)
    shape = Shape(seqs=64, token_seqs=8, seq_len=tpl[0].shape[1])
    common = dict(shape=shape, templates=tpl, config={"model_path": str(tok_dir), "group_size": 8})
    runs = {"search-r1-grpo": dict(n_steps=600, seed=3),
            "search-r1-llds": dict(n_steps=600, collapse=False, seed=4, objective="llds"),
            "math-onpolicy-grpo": dict(n_steps=300, collapse=False, on_policy=True, seed=5)}
    for name, kw in runs.items():
        r = SyntheticRun(root, name, **common, **kw)
        r.write()
        r.close()
    live = SyntheticRun(root, "search-r1-sapo", n_steps=600, seed=6, objective="sapo_search", heartbeat_s=3600,
                        **common)
    live.write(until=420)
    return live


def serve(root: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return start_dashboard(root, port), f"http://127.0.0.1:{port}"


OV, TOKENS, HEATMAP, COMPARE = "#ov-graph .main-svg", "#tk-text .tok", "#tk-heatmap .main-svg", "#cmp-graph .scatterlayer .trace"


def _open(page, url: str, *ready: str) -> None:
    """Go to ``url``, wait for each ``ready`` selector and for the callbacks that follow the first render."""
    page.goto(url)
    for selector in ready:
        page.wait_for_selector(selector)
    page.wait_for_timeout(800)


def _browser(p):
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    return browser, browser.new_page(viewport={"width": 1680, "height": 1050}, device_scale_factor=1)


def shoot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _browser(p)
        _open(page, url + "/", ".ag-row")
        page.screenshot(path=out / "runs.png")
        _open(page, url + "/run/search-r1-grpo", OV)
        page.screenshot(path=out / "overview.png", full_page=True)
        _open(page, url + "/run/math-onpolicy-grpo", OV)
        page.screenshot(path=out / "overview-onpolicy.png", full_page=True)
        _open(page, url + "/tokens/search-r1-grpo?step=590", TOKENS, HEATMAP)
        page.locator("#tk-text .tok:not(.obs)").nth(24).hover()
        page.screenshot(path=out / "tokens.png", full_page=True)
        _open(page, url + "/compare?runs=search-r1-grpo,search-r1-llds,search-r1-sapo"
                          "&metrics=reward_mean,ratio_p05_pos,logp_old_mean_correct,entropy_mean,grad_norm", COMPARE)
        page.screenshot(path=out / "compare.png", full_page=True)
        _open(page, url + "/sql", "#sql-input")
        page.fill("#sql-input", "-- ISDD signal by run: A>0 ratio tail over the last 100 steps\n"
                                "SELECT run, step, ratio_p05_pos, ratio_p50_pos, clip_low_frac_pos\nFROM steps "
                                "WHERE run LIKE 'search-r1-%' AND step >= 200\nORDER BY run, step")
        page.click("#sql-run")
        page.wait_for_selector("#sql-message.ok")
        page.wait_for_selector("#sql-chart .scatterlayer .trace")
        page.wait_for_timeout(800)
        page.screenshot(path=out / "sql.png", full_page=True)
        browser.close()


SAMPLES = Path(__file__).resolve().parents[1] / "sample_runs" / "store"


def _crosshair(page, step: int) -> None:
    """The mouse on ``step`` of the overview's first panel, the panels scrolled to the top of the window: the
    crosshair at that step on every panel and the timeline."""
    page.evaluate("() => document.querySelector('#ov-timeline').scrollIntoView()")
    page.wait_for_timeout(300)
    x, y = page.evaluate(f"""() => {{ const gd = document.querySelector('#ov-graph .js-plotly-plot');
        const fl = gd._fullLayout, r = gd.getBoundingClientRect();
        return [r.left + fl.xaxis._offset + fl.xaxis.c2p({step}), r.top + fl.yaxis._offset + fl.yaxis._length / 2]; }}""")
    page.mouse.move(x, y)
    page.wait_for_function(f"() => Array.from(document.querySelectorAll('#ov-graph .cw-xline'))"
                           f".some(e => e.dataset.step == '{step}')")
    page.wait_for_timeout(300)


def shoot_samples(url: str, out: Path) -> None:
    """The real sample runs: the runs list, the collapsing GRPO run's overview (whole, hovered at step 84 with the
    crosshair on every panel, then zoomed on the first
    episode of its events table, the cause), a drill run's overview, its tokens, the runs compared (aligned at the
    collapse step), and SQL."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _browser(p)
        _open(page, url + "/", ".ag-row")
        page.screenshot(path=out / "sample-runs.png")
        _open(page, url + "/run/grpo-collapse", OV)
        page.screenshot(path=out / "sample-overview.png", full_page=True)
        _crosshair(page, 84)
        page.screenshot(path=out / "sample-overview-crosshair.png")
        page.locator("#ov-events .ev-row").first.locator(".ev-steps").click()  # the cause: the table's first row
        page.wait_for_url("**episode=*")
        page.wait_for_selector(OV)
        page.wait_for_timeout(1200)
        page.screenshot(path=out / "sample-overview-episode.png", full_page=True)
        _open(page, url + "/run/drill-lld-grpo", OV)
        page.screenshot(path=out / "sample-overview-drill.png", full_page=True)
        _open(page, url + "/run/grpo-healthy", OV)
        page.screenshot(path=out / "sample-overview-healthy.png", full_page=True)
        _open(page, url + "/tokens/grpo-collapse?step=180&rank=entropy", TOKENS, HEATMAP)  # a degenerate response
        page.screenshot(path=out / "sample-tokens.png", full_page=True)
        _open(page, url + "/compare?runs=grpo-healthy,grpo-collapse,sapo_search,llds&align=collapse"
                          "&metrics=reward_mean,entropy_mean,ratio_p05_pos,logp_old_mean_correct,truncated_frac", COMPARE)
        page.screenshot(path=out / "sample-compare.png", full_page=True)
        _open(page, url + "/sql", "#sql-grid .ag-row", "#sql-chart .scatterlayer .trace")
        page.screenshot(path=out / "sample-sql.png", full_page=True)
        shoot_sweep(page, url, out)
        browser.close()


def shoot_sweep(page, url: str, out: Path) -> None:
    """The sample runs as a sweep (their configs' varying keys as axes), and the runs page grouped by lr."""
    _open(page, url + "/sweep", "#sw-grid .ag-row", "#sw-graph .parcoords")
    page.screenshot(path=out / "sample-sweep.png", full_page=True)
    _open(page, url + "/?group=lr", "#runs-grid .ag-row", "#runs-groups .grp-row")
    page.screenshot(path=out / "sample-runs-grouped.png")


def shoot_run(url: str, run: str, path: Path) -> None:
    """One run's overview (e.g. an ingested public run: lab/public/score.sh STORE, then --run STORE RUN PNG)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _browser(p)
        _open(page, f"{url}/run/{run}", OV)
        page.screenshot(path=path, full_page=True)
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--keep", help="build the store here and keep it (default: a temporary folder)")
    ap.add_argument("--samples-only", action="store_true", help="only the shipped sample runs (no synthetic store)")
    ap.add_argument("--run", nargs=3, metavar=("STORE", "RUN", "PNG"),
                    help="only RUN's overview from STORE, saved as PNG under --out")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.run:
        proc, url = serve(Path(a.run[0]))
        try:
            shoot_run(url, a.run[1], out / a.run[2])
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        print(f"screenshot: {out / a.run[2]}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.keep) if a.keep else Path(tmp) / "store"
        if not a.samples_only:
            build(root)
        samples = Path(tmp) / "samples"  # served from a copy: opening a store may upgrade its _schema
        shutil.copytree(SAMPLES, samples)
        for store, pages in ([] if a.samples_only else [(root, shoot)]) + [(samples, shoot_samples)]:
            proc, url = serve(store)
            try:
                pages(url, out)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
    print(f"screenshots in {out}/: " + ", ".join(sorted(p.name for p in out.glob("*.png"))))


if __name__ == "__main__":
    main()
