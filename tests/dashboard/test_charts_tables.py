"""Compare and SQL figures (dashboard.charts) and grid rows (dashboard.tables)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from collapsewatch.dashboard import charts, tables, theme


def test_compare_one_panel_per_metric_one_colour_per_run():
    df = pd.DataFrame({"run": ["a", "a", "b"], "step": [0, 1, 0], "reward_mean": [0.1, 0.2, 0.3],
                       "grad_norm": [1.0, 2.0, np.nan]})
    fig = charts.compare_figure(df, ["a", "b"], ["reward_mean", "grad_norm"])
    assert [(t.name, t.yaxis) for t in fig.data] == [("a", "y"), ("b", "y"), ("a", "y2"), ("b", "y2")]
    assert fig.data[0].line.color == fig.data[2].line.color == theme.CYCLE[0]
    assert list(fig.data[2].y) == [1.0, 2.0] and len(fig.data[3].x) == 0  # b's grad norm is NULL
    assert [t.showlegend for t in fig.data] == [True, True, False, False]
    assert fig.layout.xaxis2.matches == "x"
    assert "pick runs" in charts.compare_figure(df, [], []).layout.annotations[0].text


def test_compare_smoothing_is_a_trailing_mean_over_the_faint_raw_series():
    # run a: 0, 4, 8, NaN, 0 at steps 0–4; a 2-step trailing mean over the finite points (steps 0, 1, 2, 4):
    # [0, (0+4)/2, (4+8)/2, (8+0)/2] = [0, 2, 6, 4] -- the NULL step is skipped, not averaged as 0
    df = pd.DataFrame({"run": ["a"] * 5, "step": [0, 1, 2, 3, 4], "reward_mean": [0.0, 4.0, 8.0, np.nan, 0.0]})
    fig = charts.compare_figure(df, ["a"], ["reward_mean"], smooth=2)
    raw, smooth = fig.data
    assert list(raw.y) == [0.0, 4.0, 8.0, 0.0] and raw.opacity == 0.25 and raw.showlegend is False
    assert list(smooth.x) == [0, 1, 2, 4] and list(smooth.y) == [0.0, 2.0, 6.0, 4.0]
    assert "2-step trailing mean" in fig.layout.annotations[0].text
    assert len(charts.compare_figure(df, ["a"], ["reward_mean"]).data) == 1  # smooth=1: the raw series only


def test_sql_chart_kinds():
    df = pd.DataFrame({"step": [2, 1, 3], "v": [20.0, 10.0, 30.0], "name": ["x", "y", "z"]})
    line = charts.sql_chart(df, "step", ["v"], "line")
    assert list(line.data[0].x) == [1, 2, 3] and list(line.data[0].y) == [10.0, 20.0, 30.0]  # sorted by x
    assert charts.sql_chart(df, "name", ["v"], "bar").data[0].type == "bar"
    assert charts.sql_chart(df, "step", ["v"], "scatter").data[0].mode == "markers"
    assert charts.numeric_columns(df.assign(flag=True)) == ["step", "v"]
    assert len(charts.sql_chart(df, None, ["v"]).data) == 0
    runs = pd.DataFrame({"run": ["a", "b", "a"], "step": [0, 0, 1], "v": [1.0, 2.0, 3.0], "w": [0.0, 0.0, 0.0]})
    fig = charts.sql_chart(runs, "step", ["v", "w"])
    assert [t.name for t in fig.data] == ["a · v", "a · w", "b · v", "b · w"]
    assert list(fig.data[0].y) == [1.0, 3.0] and fig.data[0].line.color == fig.data[1].line.color == theme.CYCLE[0]
    assert fig.data[1].line.dash == "dot"


def test_epoch_ms():
    # 2026-01-01 is 56 × 365 + 14 leap days = 20,454 days after 1970-01-01: 1,767,225,600 s; + 12 h = 1,767,268,800 s
    assert tables.epoch_ms(datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)) == 1_767_268_800_000
    assert tables.epoch_ms(pd.Timestamp("2026-01-01 12:00")) == 1_767_268_800_000  # a time without a zone is UTC
    assert tables.epoch_ms(datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))) == 1_767_268_800_000
    assert tables.epoch_ms(None) is None and tables.epoch_ms(pd.NaT) is None


def test_grid_changes():
    rows = {n: {"name": n, "v": k} for n, k in (("c", 3), ("b", 2), ("a", 1))}
    held = (("b", "a"), {"b": 2, "a": 1})
    # nothing known of the grid: every row; nothing changed: nothing
    assert tables.grid_changes(None, ["b", "a"], [2, 1], [rows["b"], rows["a"]]) is None
    assert tables.grid_changes(held, ["b", "a"], [2, 1], [rows["b"], rows["a"]]) == {}
    # a new run at the top, a's key changed: add c at index 0, update a
    got = tables.grid_changes(held, ["c", "b", "a"], [3, 2, 5], [rows["c"], rows["b"], rows["a"]])
    assert got == {"add": [rows["c"]], "addIndex": 0, "update": [rows["a"]]}
    # b gone: removed by its id; a row without a key is always sent again
    assert tables.grid_changes(held, ["a"], [None], [rows["a"]]) == {"update": [rows["a"]], "remove": [{"name": "b"}]}
    # a row joining below another, or two kept rows swapped: every row (a transaction would misplace them)
    assert tables.grid_changes(held, ["b", "c", "a"], [2, 3, 1], [rows["b"], rows["c"], rows["a"]]) is None
    assert tables.grid_changes(held, ["a", "b"], [1, 2], [rows["a"], rows["b"]]) is None


def test_runs_rows_links_and_flags():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    df = pd.DataFrame([{"run": "exp1", "status": "running", "objective": "llds", "n_steps": 40, "last_step": 39,
                        "last_reward": 0.5, "last_ratio_p50_pos": 0.8, "last_logp_old_correct": -1.5,
                        "last_entropy": np.nan, "active_flags": "isdd:drift", "n_active": 1, "n_events": 3,
                        "on_policy": False, "updated_at": now - timedelta(seconds=3)}])
    row = tables.runs_rows(df)[0]
    assert row["run"] == "[exp1](/run/exp1)" and row["tokens"] == "[tokens](/tokens/exp1)"
    assert (row["steps"], row["last_step"], row["flags"], row["events"]) == (40, 39, "isdd:drift", 3)
    assert row["policy"] == "off-policy" and row["updated"] == tables.epoch_ms(now) - 3000
    assert (row["ratio_p50_pos"], row["logp_old_correct"], row["entropy"]) == (0.8, -1.5, None)


def test_sql_rows_are_json_safe():
    df = pd.DataFrame({"t": pd.to_datetime(["2026-01-01"]), "x": [np.nan], "n": [np.int64(3)],
                       "l": [[1, 2]]})
    assert tables.sql_rows(df) == [{"t": "2026-01-01", "x": None, "n": 3, "l": "[1, 2]"}]
    cols = {c["field"]: c for c in tables.sql_columns(df)}
    assert cols["x"]["type"] == "numericColumn" and "valueFormatter" in cols["x"] and "valueFormatter" not in cols["n"]


def test_active_flags_within_window_of_last_step():
    ev = pd.DataFrame({"detector": ["lld", "isdd", "lld"], "phase": ["steady_decay", "drift", "early_stagnation"],
                       "step_end": [95, 100, 40]})
    # window 5: episodes ending at ≥ 95 are active at step 100
    assert tables.active_flags(ev, 100) == (2, "isdd:drift, lld:steady_decay")
    assert tables.active_flags(ev, None) == (0, "") and tables.active_flags(ev.iloc[0:0], 10) == (0, "")


def test_runs_rows_reward_level_collapse_and_severity_counts():
    df = pd.DataFrame([{"run": "exp1", "status": "finished", "objective": "grpo", "n_steps": 200, "last_step": 199,
                        "last_reward": 0.1, "active_flags": None, "n_active": 0, "n_events": 5, "on_policy": False,
                        "updated_at": None, "reward_now": 0.07, "reward_best": 0.41,
                        "reward_best_step": 40, "reward_spark": "▁█", "collapse_step": 100,
                        "worst_severity": "critical", "n_critical": 2, "n_warning": 3, "n_info": 0}])
    row = tables.runs_rows(df)[0]
    assert (row["reward_now"], row["reward_best"], row["reward_best_at"]) == (0.07, 0.41, "step 40")
    assert (row["collapse_step"], row["worst"], row["episodes"]) == (100, "critical", "2 critical · 3 warning")
    healthy = tables.runs_rows(df.assign(collapse_step=None, worst_severity=None, n_critical=0, n_warning=0))[0]
    assert (healthy["collapse_step"], healthy["worst"], healthy["episodes"]) == (None, "none", "")
    assert {c["headerName"] for c in tables.RUNS_COLUMNS} >= {"reward now", "best reward", "collapse step",
                                                             "worst severity", "episodes by severity"}
    # the episodes still open at a run's last step: named so, not "flagged now" (a run that finished days ago is not
    # ringing now)
    (flags,) = [c for c in tables.RUNS_COLUMNS if c["field"] == "flags"]
    assert flags["headerName"] == "open at the last step"


def test_csv_download_keeps_column_order_and_empty_missing():
    out = tables.csv_download([{"b": 1, "a": None}, {"a": 2.5, "b": 3}], ["a", "b"], "q.csv")
    assert out["content"] == "a,b\n,1\n2.5,3\n" and out["filename"] == "q.csv" and out["type"] == "text/csv"


def test_compare_colours_stable_alignment_events_and_log_panels():
    df = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "step": [0, 1, 2] * 2, "grad_norm": [1.0, 10.0, 100.0] * 2})
    colours = charts.run_colours(["old", "a", "b"])  # store order, oldest first: a is the 2nd colour whatever
    events = pd.DataFrame({"run": ["b", "b"], "detector": ["isdd", "length"], "phase": ["drift", "blowup"],
                           "step_start": [2, 1], "severity": ["critical", "warning"]})
    fig = charts.compare_figure(df, ["b", "a"], ["grad_norm"], colours=colours, offsets={"b": 2}, events=events,
                                log_metrics=["grad_norm"])
    b, a = fig.data
    assert a.line.color == theme.CYCLE[1] and b.line.color == theme.CYCLE[2]  # selection order does not matter
    assert list(b.x) == [-2, -1, 0] and list(a.x) == [0, 1, 2]  # b aligned at its step 2
    # one line: b's critical episode at step 2 − 2 = 0 (the warning is not drawn)
    assert [(s.x0, s.line.color) for s in fig.layout.shapes] == [(0, theme.CYCLE[2])]
    assert fig.layout.yaxis.type == "log"


def test_config_diff_lists_only_keys_that_differ():
    diff = charts.config_diff({"h": {"run": "h", "lr": 1e-4, "opt": {"mb": 2}, "seed": 0},
                               "c": {"run": "c", "lr": 1e-3, "opt": {"mb": 4}, "seed": 0, "extra": True}})
    assert diff.to_dict("records") == [{"key": "extra", "h": "—", "c": "True"},
                                       {"key": "lr", "h": "0.0001", "c": "0.001"},
                                       {"key": "opt.mb", "h": "2", "c": "4"}]
    assert charts.config_diff({"h": {"lr": 1}}).empty
