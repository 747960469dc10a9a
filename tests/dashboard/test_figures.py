"""Run overview figure (dashboard.figures): traces, phase bands, timeline, notes, live extension."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from collapsewatch.dashboard import figures, theme, timeline
from collapsewatch.dashboard.panels import MARGIN, N_COLS, log_ticks
from collapsewatch.dashboard.series import GL_THRESHOLD, MAX_POINTS, summarise


def _steps(n: int, **overrides) -> pd.DataFrame:
    df = pd.DataFrame({"step": np.arange(n), "has_metrics": True, "on_policy": False})
    for c in figures.COLUMNS:
        if c != "on_policy":
            df[c] = 0.5
    df["ratio_p50_pos"] = np.linspace(1.0, 0.5, n)
    for k, v in overrides.items():
        df[k] = v
    return df


EVENTS = pd.DataFrame([
    dict(detector="isdd", phase="drift", step_start=10, step_end=19, severity="critical", metric="ratio_p50_pos",
         value=0.7, threshold=0.9, window_steps=10, message="A>0 ratio drifting", source="online",
         evidence=json.dumps({"ratio_p50_pos": 0.71234567, "window": {"start": 10, "end": 19}})),
    dict(detector="lld", phase="steady_decay", step_start=5, step_end=8, severity="warning", metric="x",
         value=None, threshold=None, window_steps=None, message="decay", source="online", evidence=None),
])


def _trace(fig, column):
    return fig["data"][figures.TRACE_COLUMNS.index(column)]


def _shapes(fig):
    return fig["layout"]["shapes"]


def test_one_trace_per_series_in_declared_order():
    df = _steps(30)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))
    assert len(fig["data"]) == len(figures.TRACE_COLUMNS) and fig["data"][0]["type"] == "scatter"
    median = _trace(fig, "ratio_p50_pos")
    assert median["x"] == list(range(30)) and median["y"][0] == 1.0 and median["y"][-1] == 0.5
    assert median["line"]["color"] == theme.POS and median["type"] == "scatter"
    go.Figure(fig)  # a valid plotly figure
    # the p05–p95 band: the upper edge fills down to the lower edge, drawn just before it
    lo, up = (figures.TRACE_COLUMNS.index(c) for c in ("ratio_p05_pos", "ratio_p95_pos"))
    assert up == lo + 1 and fig["data"][up]["fill"] == "tonexty"
    # every panel's x axis follows the first panel's; ratio panels are log-scaled
    assert fig["layout"]["xaxis3"]["matches"] == "x" and fig["layout"]["yaxis3"]["type"] == "log"
    # raw: no faint copies are drawn (their traces exist, empty, so the trace layout never changes)
    assert _trace(fig, "raw:reward_mean")["x"] == []


def test_smoothed_by_default_over_faint_raw_copies():
    # reward 0, 4, 8 at steps 0–2, window 16: smoothed 0, 2, 4 over the raw 0, 4, 8 drawn faint beneath
    df = _steps(3, reward_mean=[0.0, 4.0, 8.0])
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), smooth=figures.DEFAULT_SMOOTH)
    raw, smooth = _trace(fig, "raw:reward_mean"), _trace(fig, "reward_mean")
    assert figures.TRACE_COLUMNS.index("raw:reward_mean") + 1 == figures.TRACE_COLUMNS.index("reward_mean")
    assert raw["y"] == [0.0, 4.0, 8.0] and raw["opacity"] < 0.5 and raw["hoverinfo"] == "skip"
    assert smooth["y"] == [0.0, 2.0, 4.0] and "opacity" not in smooth
    assert "16-step mean over raw" in fig["layout"]["annotations"][0]["text"]
    assert "raw:ratio_p05_pos" not in figures.TRACE_COLUMNS  # band edges have no raw copy


def test_bands_hidden_except_the_selected_episode():
    df = _steps(30)
    fig = figures.overview_figure(df, EVENTS, summarise(df, figures.COLUMNS), view={"selected": 0})
    bands = [s for s in _shapes(fig) if s.get("name", "").startswith("band:")]
    assert len(bands) == 2 * N_COLS  # two episodes, one band per panel column each
    # reader order, the cause first: isdd (critical, steps 10–19) is episode 0, lld (warning, 5–8) episode 1
    isdd = [s for s in bands if s["name"] == "band:0"]
    assert {s["xref"] for s in isdd} == {"x", "x2"}  # first panel of each column
    assert (isdd[0]["x0"], isdd[0]["x1"]) == (9.5, 19.5) and isdd[0]["yref"] == "paper"
    assert all(s["visible"] for s in isdd) and not any(s["visible"] for s in bands if s["name"] == "band:1")
    assert isdd[0]["fillcolor"] == theme.DETECTOR_COLOURS["isdd"]


def test_threshold_drawn_on_the_panel_of_its_metric_but_not_for_trends():
    df = _steps(30)
    fig = figures.overview_figure(df, EVENTS, summarise(df, figures.COLUMNS))
    lines = [s for s in _shapes(fig) if s.get("name", "").startswith("threshold:")]
    # isdd watches ratio_p50_pos (panel 3 = "ratio r, A>0", axes x3/y3) with bar 0.9 over its steps 10–19;
    # lld's value is a slope × window, not a level of its metric: no line
    assert [(s["name"], s["xref"], s["yref"], s["y0"], s["x0"], s["x1"]) for s in lines] == [
        ("threshold:isdd:ratio_p50_pos", "x3", "y3", 0.9, 9.5, 19.5)]
    assert lines[0]["label"]["text"] == "isdd 0.9"


def test_lld_phases_read_as_the_spiral_on_the_panel_of_L():
    lld = pd.DataFrame([dict(EVENTS.iloc[1], phase=p, step_start=a, step_end=b)
                        for p, a, b in (("early_stagnation", 0, 9), ("steady_decay", 10, 19),
                                        ("accelerated_collapse", 20, 25))])
    df = _steps(30)
    fig = figures.overview_figure(df, lld, summarise(df, figures.COLUMNS))
    spiral = [s for s in _shapes(fig) if s.get("name", "").startswith("lld:")]
    L = [p.key for p in figures.PANELS].index("likelihood")  # panel 6: axes x6 / y6
    assert {s["xref"] for s in spiral} == {f"x{L + 1}"} and {s["yref"] for s in spiral} == {f"y{L + 1} domain"}
    assert [s["opacity"] for s in spiral] == sorted(s["opacity"] for s in spiral)  # darker at each stage
    labels = [a["text"] for a in fig["layout"]["annotations"] if a.get("xref") == f"x{L + 1}"]
    assert labels == ["① stagnation", "② decay", "③ collapse"]


def test_timeline_sits_on_each_panel_column_with_per_bar_hover():
    tl = timeline.timeline_figure(EVENTS, [0.0, 29.0])
    assert tl["layout"]["hovermode"] == "closest"
    # one timeline: one bar trace, on exactly the first panel column's x domain, with the panels' margins
    assert len(tl["data"]) == 1 and "xaxis2" not in tl["layout"]
    assert tl["layout"]["xaxis"]["domain"] == figures.GRID["cells"][0]["xd"]
    assert (tl["layout"]["margin"]["l"], tl["layout"]["margin"]["r"]) == (MARGIN["l"], MARGIN["r"])
    assert tl["layout"]["xaxis"]["range"] == [0.0, 29.0]
    bar = tl["data"][0]
    assert bar["y"] == ["isdd · drift", "lld · steady_decay"] and bar["customdata"] == [0, 1]  # cause first
    assert bar["base"] == [9.5, 4.5] and bar["x"] == [10, 4]  # steps 10..19 inclusive = 10 steps wide
    assert "ratio_p50_pos: 0.7123" in bar["hovertext"][0] and "window.start: 10" in bar["hovertext"][0]
    assert "A&gt;0 ratio drifting" in bar["hovertext"][0]  # escaped: plotly reads hover text as HTML
    go.Figure(tl)


def test_evidence_lines_flatten_and_truncate():
    ev = json.dumps({"a": 1.23456789, "b": {"c": [1, 2, 3]}, "long": list(range(10))})
    assert timeline.evidence_lines(ev) == ["a: 1.235", "b.c: ['1', '2', '3']", "long: [0, 1, 2, 3, 4, 5, … 10 values]"]
    assert timeline.evidence_lines(json.dumps({f"k{i}": i for i in range(20)}), limit=3)[-1] == "… 17 more"
    assert timeline.evidence_lines("not json") == ["not json"]


def test_log_ticks_cover_the_data():
    # the A<0 fan reaching 1e-7: decades 1e-7 … 10 (8 decades), not 1-2-5 ticks stopping at 1e-3
    assert log_ticks(2e-7, 3.0) == [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0]
    # 0.3 … 2 (under one decade's ratio): 1-1.5-2-3-5-7 steps from 0.1 to 10
    ticks = log_ticks(0.3, 2.0)
    assert ticks[0] == 0.1 and ticks[-1] == 10.0 and 0.3 in [round(t, 6) for t in ticks]
    # 1e-12 … 1: every other decade, ending at 1
    assert log_ticks(1e-12, 1.0) == [10.0 ** e for e in range(-12, 1, 2)]


def test_clip_axis_never_below_zero_budget_line_and_mismatch_noise_note():
    df = _steps(20, is_log_ratio_abs_mean=1e-6)  # identical engines: float noise, not a mismatch
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), view={"budget": 150})
    clip = [p.key for p in figures.PANELS].index("clip")
    assert fig["layout"][f"yaxis{clip + 1}"]["rangemode"] == "nonnegative"
    budget = next(s for s in _shapes(fig) if s.get("name") == "budget")
    assert budget["y0"] == 150.0 and "token budget 150" in budget["label"]["text"]
    assert figures.NO_MISMATCH in _collapsed_line(fig) and _trace(fig, "is_log_ratio_abs_mean")["x"] == []
    real = _steps(20, is_log_ratio_abs_mean=0.02)
    fig = figures.overview_figure(real, EVENTS.iloc[0:0], summarise(real, figures.COLUMNS))
    assert len(_trace(fig, "is_log_ratio_abs_mean")["x"]) == 20


def test_on_policy_run_says_not_applicable_instead_of_flat_lines():
    ratio_cols = {c: np.nan for c in figures.COLUMNS if c.startswith(("ratio_", "clip_", "displacement_"))}
    df = _steps(20, on_policy=True, **ratio_cols)
    summary = summarise(df, figures.COLUMNS)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summary)
    ratio_panels = [p for p in figures.PANELS if p.ratio_metric]
    # the four ratio panels collapse to one line under the grid, each named with why
    line = _collapsed_line(fig)
    assert line.count(figures.NOT_APPLICABLE) == len(ratio_panels) == 4
    assert all(f"<b>{p.title}</b> — {figures.NOT_APPLICABLE}" in line for p in ratio_panels)
    assert _trace(fig, "ratio_p50_pos")["x"] == [] and len(_trace(fig, "reward_mean")["x"]) == 20


def _collapsed_line(fig) -> str:
    found = [a["text"] for a in fig["layout"]["annotations"] if a.get("name") == "collapsed"]
    assert len(found) == 1
    return found[0]


def test_collapsed_panels_close_up_and_keep_their_axes():
    # a healthy off-policy run: ratios within 1 ± 1 % (flat: ≤ FLAT_RATIO 10 %), no mismatch recorded → both ratio
    # panels and the mismatch panel collapse; the other 9 panels close up into 5 rows; trace indices unchanged
    df = _steps(20, ratio_p05_pos=0.99, ratio_p50_pos=1.0, ratio_p95_pos=1.01, ratio_p05_neg=0.995,
                ratio_p50_neg=1.0, ratio_p95_neg=1.005, is_log_ratio_abs_mean=np.nan, is_ess=np.nan)
    summary = summarise(df, figures.COLUMNS)
    assert set(figures.collapsed(summary)) == {"ratio_pos", "ratio_neg", "mismatch"}
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summary)
    assert len(fig["data"]) == len(figures.TRACE_COLUMNS)
    keys = [p.key for p in figures.PANELS]
    hidden_axes = [fig["layout"]["yaxis" + str(keys.index(k) + 1)] for k in ("ratio_pos", "ratio_neg", "mismatch")]
    assert all(a["visible"] is False for a in hidden_axes)
    # 9 panels in 2 columns: 5 rows (5 × 158 + 4 × 34 + 20 px) + the note's 40 px and the step title's 16 px, + the
    # 40 px under the grid and 16 px more for the step title = 1,058 px, vs all 12 in 6 rows (6 × 158 + 5 × 34 + 20
    # + 40 + 16 = 1,194 px)
    assert fig["layout"]["height"] == 5 * 158 + 4 * 34 + 20 + (40 + 16) + 40 + 16 < figures.GRID["height"] == 1194
    # said as the Compare page says it: "collapsed" is the red verdict word, and this run is healthy
    assert _collapsed_line(fig).startswith("not drawn: ") and "flat at 1" in _collapsed_line(fig)
    wide = _steps(20, ratio_p05_pos=0.5)  # a real spread: drawn
    assert "ratio_pos" not in figures.collapsed(summarise(wide, figures.COLUMNS))


def test_missing_metric_and_empty_run_notes():
    df = _steps(10, is_log_ratio_abs_mean=np.nan, is_ess=np.nan)
    notes = [a["text"] for a in figures.decorations(EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))["annotations"]
             if a.get("name") == "collapsed"]
    assert len(notes) == 1 and notes[0].count("not recorded for this run") == 1
    assert timeline.timeline_figure(EVENTS.iloc[0:0])["layout"]["annotations"][0]["text"] == "no detector phases flagged"
    empty = summarise(df.iloc[0:0], figures.COLUMNS)
    notes = [a["text"] for a in figures.decorations(EVENTS.iloc[0:0], empty)["annotations"]]
    assert notes.count("waiting for the first step") == len(figures.PANELS)


def test_long_series_downsampled_to_webgl_keeping_spike():
    n = 20_000
    grad = np.ones(n)
    grad[12_345] = 1e3
    df = _steps(n, grad_norm=grad)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))
    g = _trace(fig, "grad_norm")
    assert len(g["x"]) == MAX_POINTS > GL_THRESHOLD and g["type"] == "scattergl"
    assert max(g["y"]) == 1e3 and 12_345 in g["x"]


def test_extension_gives_new_points_per_trace():
    rows = _steps(3).assign(step=[7, 8, 9])
    rows.loc[1, "grad_norm"] = np.nan
    ext = figures.extension(rows)
    assert figures.TRACE_COLUMNS.index("raw:grad_norm") not in ext  # raw (smooth 1): no faint copies
    assert ext[figures.TRACE_COLUMNS.index("grad_norm")] == ([7, 9], [0.5, 0.5])
    assert ext[figures.TRACE_COLUMNS.index("ratio_p50_pos")][0] == [7, 8, 9]


def test_share_axes_on_the_right_are_fixed_to_zero_one():
    # truncated_frac and is_ess (ESS / n) are shares in [0, 1]: a fixed 0…1.02 axis, so a healthy IS ESS of
    # 0.9999997 reads as "on 1", not as a zoomed-in wiggle with repeated "1.000" tick labels
    df = _steps(30, is_ess=np.linspace(0.9999990, 1.0, 30))
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))
    for column in ("truncated_frac", "is_ess"):
        axis = fig["layout"]["yaxis" + _trace(fig, column)["yaxis"][1:]]
        assert axis["side"] == "right" and axis["range"] == [0.0, 1.02] and axis["autorange"] is False


def test_overview_smoothing_is_a_trailing_mean_of_finite_points():
    # reward 0, 4, 8, NULL, 0 at steps 0–4; 2-step trailing mean over the finite points: [0, 2, 6, 4]
    df = _steps(5, reward_mean=[0.0, 4.0, 8.0, np.nan, 0.0])
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), smooth=2)
    reward = _trace(fig, "reward_mean")
    assert reward["x"] == [0, 1, 2, 4] and reward["y"] == [0.0, 2.0, 6.0, 4.0]


def test_smoothed_live_extension_equals_the_tail_of_a_full_redraw():
    # a history with NULL stretches (grad_norm missing on most early steps, so the poll must reach far back
    # for the window's earlier points): for every window, the points a poll appends after step 60 equal the
    # last points of the figure drawn from scratch on the whole history
    rng = np.random.default_rng(0)
    df = _steps(100, reward_mean=rng.random(100), grad_norm=np.where(np.arange(100) % 9 == 0, rng.random(100), np.nan))
    for smooth in (1, 8, 32):
        full = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), smooth=smooth)
        ext = figures.extension(df, after=60, smooth=smooth)
        for column in ("reward_mean", "grad_norm"):
            i = figures.TRACE_COLUMNS.index(column)
            xs, ys = ext[i]
            assert xs == [x for x in full["data"][i]["x"] if x > 60]
            np.testing.assert_allclose(ys, full["data"][i]["y"][-len(xs):], rtol=1e-12)


def test_exact_zeros_and_on_policy_steps_marked_on_log_panels():
    # grad norm exactly 0 at steps 1 and 4 (every group starved: no gradient) — a log axis cannot draw 0;
    # steps 1 and 4 are also on-policy (ratio metrics NULL) in a run that is otherwise off-policy
    on = [False, True, False, False, True, False]
    ratio_null = {c: [np.nan if o else 0.5 for o in on] for c in figures.COLUMNS if c.startswith("ratio_")}
    df = _steps(6, on_policy=on, grad_norm=[1.0, 0.0, 2.0, 1.0, 0.0, 1.0], **ratio_null)
    summary = summarise(df, figures.COLUMNS)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summary)
    grad, pos = _trace(fig, "marks:grad"), _trace(fig, "marks:ratio_pos")
    assert grad["x"] == [1, 4] and grad["text"][0] == "step 1: grad_norm exactly 0"
    # at the axis bottom: the grad panel's lowest tick (data 1…2 → ticks from 1)
    assert grad["y"] == [1.0, 1.0] == [fig["layout"]["yaxis8"]["tickvals"][0]] * 2
    assert pos["x"] == [1, 4] and "on-policy step: ratio metrics NULL" in pos["text"][1]
    # a live poll marks the new ones the same way
    ext = figures.extension(df, after=2, summary=summary, floors={"grad": 1.0, "ratio_pos": 0.1, "ratio_neg": 0.1})
    assert ext[figures.TRACE_COLUMNS.index("marks:grad")] == ([4], [1.0])
    # a wholly on-policy run says so in the panel note instead of marking every step
    all_on = _steps(3, on_policy=True, **{c: np.nan for c in ratio_null})
    assert _trace(figures.overview_figure(all_on, EVENTS.iloc[0:0], summarise(all_on, figures.COLUMNS)),
                  "marks:ratio_pos")["x"] == []


def test_a_drill_onset_is_a_line_on_every_panel():
    df = _steps(30)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), view={"onset": ["lld", 12]})
    onset = [s for s in _shapes(fig) if s.get("name") == "onset"]
    assert len(onset) == len(figures.PANELS) and {(s["x0"], s["x1"]) for s in onset} == {(12, 12)}
    assert onset[0]["label"]["text"] == "lld drill from 12"
    no_drill = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), view={"onset": ["", None]})
    assert not [s for s in _shapes(no_drill) if s.get("name") == "onset"]


def test_a_zoom_from_the_url_fits_each_panels_y_range_to_the_window():
    # reward: 0.1 for steps 0-19, then a rise 0.5, 0.6 … 1.4 over steps 20-29 (correct_frac the same: drawn once;
    # zero-std groups .8; no evaluation score); zoomed on 22-25 (raw: smooth 1) the reward panel draws .7 .8 .9 1.0
    # and .8: range .7 − .06 × .3 … 1.0 + .06 × .3 = [.682, 1.018]
    reward = [.1] * 20 + [.5 + .1 * i for i in range(10)]
    df = _steps(30).assign(reward_mean=reward, correct_frac=reward, zero_std_group_frac=.8, eval_score=np.nan)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), 1,
                                  view={"x_range": [21.5, 25.5], "fit_y": True})
    lo, hi = fig["layout"]["yaxis"]["range"]
    assert fig["layout"]["yaxis"]["autorange"] is False and abs(lo - .682) < 1e-9 and abs(hi - 1.018) < 1e-9
    whole = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS), 1,
                                    view={"x_range": [21.5, 25.5]})  # a live full view: autorange kept
    assert "range" not in whole["layout"]["yaxis"]


def test_every_panel_has_axis_titles_with_the_catalogues_units():
    from collapsewatch.catalogue import by_name

    units = {name: m.unit for name, m in by_name("step").items()}
    df = _steps(20, ratio_p05_pos=0.5)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))
    lay, grid = fig["layout"], figures.GRID
    for panel, cell in zip(figures.PANELS, grid["cells"], strict=True):
        title = lay["yaxis" + cell["y"][1:]]["title"]["text"]
        assert title, panel.key
        # where the catalogue gives the left axis's series a unit (nats, tokens), the title says it: e.g. entropy_mean
        # is in nats → "nats/token"; response_length_mean in tokens → "tokens"
        left = {units.get(s.column) for s in panel.series if not s.right} - {None, ""}
        assert all(u in title for u in left), (panel.key, title, left)
        if panel.key in grid["right_axis"]:
            assert lay["yaxis" + grid["right_axis"][panel.key][1:]]["title"]["text"] == panel.right_title != ""
        # the step axis is titled where its tick labels are: the bottom panel of each column
        x = lay["xaxis" + cell["x"][1:]]
        assert (x.get("title", {}).get("text") == "step") == cell["bottom"], panel.key
    # 12 panels in 2 columns (6 + 6 rows): the bottom one of each column is titled
    assert sum(c["bottom"] for c in grid["cells"]) == 2
    assert {lay["yaxis2"]["title"]["text"], lay["yaxis9"]["title"]["text"]} == {"nats/token", "tokens"}


def test_kl_panel_draws_a_logged_kl_and_collapses_without_one():
    # An ingested run's logged KL (TRL `kl`, verl `actor/kl_loss` → kl_ref_mean) gets its own log-scaled panel:
    # 20 points from 0.001 to 0.05, drawn as they are (smooth 1). A run without it: the panel is collapsed to the
    # "not recorded" line, like every panel whose series are all missing.
    kl = np.linspace(0.001, 0.05, 20)
    df = _steps(20, kl_ref_mean=kl)
    summary = summarise(df, figures.COLUMNS)
    assert "kl" not in figures.collapsed(summary)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summary)
    trace = _trace(fig, "kl_ref_mean")
    assert np.allclose(trace["y"], kl) and trace["x"] == list(range(20))
    assert trace["line"]["color"] == theme.METRIC_COLOURS["kl_ref_mean"]
    axis = "yaxis" + str([p.key for p in figures.PANELS].index("kl") + 1)
    assert trace["yaxis"] == axis.replace("axis", "") and fig["layout"][axis]["type"] == "log"
    without = summarise(_steps(20, kl_ref_mean=np.nan), figures.COLUMNS)
    assert figures.collapsed(without)["kl"] == figures.NOT_RECORDED


def test_the_evaluation_band_is_its_sets_sampling_noise():
    # evaluations at 0 and 10 on 20 questions: 0.5 → ± 1.96 √(0.25 / 20) = ± 0.219135; 0.1 → ± 1.96 √(0.09 / 20)
    # = 1.96 × 0.067082 = ± 0.131481; a step without an evaluation has no band, one whose size is not logged takes
    # the last size logged (as the detector does): 0.4 at 15 on 20 → ± 1.96 √(0.24 / 20) = 1.96 × 0.109545 = ± 0.214708;
    # before any size, no band
    df = pd.DataFrame({"step": [0, 5, 10, 15], "eval_score": [0.5, np.nan, 0.1, 0.4],
                       "eval_size": [20.0, np.nan, np.nan, np.nan]})
    out = figures.derived_columns(df)
    assert np.allclose(out["eval_lo"].to_numpy()[[0, 2, 3]], [0.5 - 0.219135, 0.1 - 0.131481, 0.4 - 0.214708], atol=1e-6)
    assert np.allclose(out["eval_hi"].to_numpy()[[0, 2, 3]], [0.5 + 0.219135, 0.1 + 0.131481, 0.4 + 0.214708], atol=1e-6)
    assert out["eval_lo"].isna().tolist() == [False, True, False, False]
    assert figures.derived_columns(df.assign(eval_size=[np.nan, np.nan, 20.0, np.nan]))["eval_lo"].isna().tolist() == [
        True, True, False, False]
    # a run with a score outside [0, 1] (a reward) has no binomial band, at none of its points
    assert figures.derived_columns(df.assign(eval_score=[2.0, np.nan, 3.0, 1.0]))["eval_lo"].isna().all()
    # drawn on the reward panel as a filled band around the score (raw: smooth 1), and sent live as new points come
    steps = _steps(11, eval_score=[0.5] + [np.nan] * 9 + [0.1], eval_size=[20.0] + [np.nan] * 9 + [20.0])
    fig = figures.overview_figure(steps, EVENTS.iloc[0:0], summarise(steps, figures.COLUMNS), 1)
    lo, hi = _trace(fig, "eval_lo"), _trace(fig, "eval_hi")
    assert list(lo["x"]) == list(hi["x"]) == [0, 10] and hi["fill"] == "tonexty"
    assert np.allclose(hi["y"], [0.5 + 0.219135, 0.1 + 0.131481], atol=1e-6)
    new = figures.extension(steps, after=5, smooth=1, summary=summarise(steps, figures.COLUMNS))
    x, y = new[figures.TRACE_COLUMNS.index("eval_lo")]
    assert list(x) == [10] and np.allclose(y, [0.1 - 0.131481], atol=1e-6)
