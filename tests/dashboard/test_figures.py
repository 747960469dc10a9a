"""Run overview figure (dashboard.figures): traces, phase bands, timeline, notes, live extension."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from collapsewatch.dashboard import figures, theme
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
    assert len(fig["data"]) == len(figures.TRACE_COLUMNS) and fig["data"][0]["type"] == "bar"
    median = _trace(fig, "ratio_p50_pos")
    assert median["x"] == list(range(30)) and median["y"][0] == 1.0 and median["y"][-1] == 0.5
    assert median["line"]["color"] == theme.POS and median["type"] == "scatter"
    go.Figure(fig)  # a valid plotly figure
    # the p05–p95 band: the upper edge fills down to the lower edge, drawn just before it
    lo, up = (figures.TRACE_COLUMNS.index(c) for c in ("ratio_p05_pos", "ratio_p95_pos"))
    assert up == lo + 1 and fig["data"][up]["fill"] == "tonexty"
    # every panel's x axis follows the timeline's; ratio panels are log-scaled
    assert fig["layout"]["xaxis4"]["matches"] == "x" and fig["layout"]["yaxis4"]["type"] == "log"


def test_phase_bands_span_every_column_with_severity_opacity():
    df = _steps(30)
    fig = figures.overview_figure(df, EVENTS, summarise(df, figures.COLUMNS))
    bands = [s for s in _shapes(fig) if s.get("name", "").startswith("phase:")]
    assert len(bands) == 2 * figures.N_COLS
    isdd = [s for s in bands if s["name"] == "phase:isdd:drift"]
    assert {s["xref"] for s in isdd} == {"x2", "x3"}  # first panel of each column
    assert (isdd[0]["x0"], isdd[0]["x1"]) == (9.5, 19.5) and isdd[0]["yref"] == "paper"
    assert isdd[0]["opacity"] == theme.SEVERITY_OPACITY["critical"]
    assert isdd[0]["fillcolor"] == theme.DETECTOR_COLOURS["isdd"]


def test_timeline_bars_and_evidence_hover():
    bar = figures.timeline_trace(EVENTS)
    assert bar["y"] == ["isdd · drift", "lld · steady_decay"]
    assert bar["base"] == [9.5, 4.5] and bar["x"] == [10, 4]  # steps 10..19 inclusive = 10 steps wide
    assert "ratio_p50_pos: 0.7123" in bar["hovertext"][0] and "window.start: 10" in bar["hovertext"][0]
    assert "A&gt;0 ratio drifting" in bar["hovertext"][0]  # escaped: plotly reads hover text as HTML


def test_evidence_lines_flatten_and_truncate():
    ev = json.dumps({"a": 1.23456789, "b": {"c": [1, 2, 3]}, "long": list(range(10))})
    assert figures.evidence_lines(ev) == ["a: 1.235", "b.c: ['1', '2', '3']", "long: [0, 1, 2, 3, 4, 5, … 10 values]"]
    assert figures.evidence_lines(json.dumps({f"k{i}": i for i in range(20)}), limit=3)[-1] == "… 17 more"
    assert figures.evidence_lines("not json") == ["not json"]


def test_on_policy_run_says_not_applicable_instead_of_flat_lines():
    ratio_cols = {c: np.nan for c in figures.COLUMNS if c.startswith(("ratio_", "clip_", "displacement_"))}
    df = _steps(20, on_policy=True, **ratio_cols)
    summary = summarise(df, figures.COLUMNS)
    fig = figures.overview_figure(df, EVENTS.iloc[0:0], summary)
    notes = [a["text"] for a in fig["layout"]["annotations"]]
    ratio_panels = [p for p in figures.PANELS if p.ratio_metric]
    assert notes.count(figures.NOT_APPLICABLE) == len(ratio_panels) == 4
    assert _trace(fig, "ratio_p50_pos")["x"] == [] and len(_trace(fig, "reward_mean")["x"]) == 20


def test_missing_metric_and_empty_run_notes():
    df = _steps(10, is_log_ratio_abs_mean=np.nan, is_ess=np.nan)
    notes = [a["text"] for a in figures.decorations(EVENTS.iloc[0:0], summarise(df, figures.COLUMNS))["annotations"]]
    assert notes.count("not recorded for this run") == 1 and "no detector phases flagged" in notes
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
    assert 0 not in ext  # the timeline is not a step series
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
