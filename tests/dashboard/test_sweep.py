"""Sweeps (``dashboard/sweep.py``): config axes, runs × axes, selection and groups, the sweep chart and the runs
page's grouping — pure functions on run-table rows, expectations derived by hand in the comments."""

from __future__ import annotations

import json

import pandas as pd
import plotly.graph_objects as go

from collapsewatch.dashboard import charts, sweep, tables, theme


def _table(rows: list[tuple]) -> pd.DataFrame:
    """Run-table rows as ``history.run_table`` gives them: config as the store keeps it (JSON text)."""
    return pd.DataFrame([{"run": run, "status": "finished", "verdict": verdict, "collapse_step": step,
                          "last_step": 99, "objective": "grpo", "config": None if cfg is None else json.dumps(cfg)}
                         for run, verdict, step, cfg in rows])


def _grid() -> pd.DataFrame:
    # lr ∈ {1e-3, 3e-4} × seed ∈ {0, 1}, model and opt.beta constant, run differs by nature (never an axis)
    return _table([(f"r{i}", v, s, {"run": f"r{i}", "lr": lr, "seed": seed, "model": "tiny", "opt": {"beta": 0.9}})
                   for i, (lr, seed, v, s) in enumerate([(1e-3, 0, "collapsed", 40), (1e-3, 1, "collapsed", 60),
                                                         (3e-4, 0, "healthy", None), (3e-4, 1, "warning", None)])])


def test_axes_are_the_keys_that_vary():
    axes = sweep.config_axes({r: sweep.flat_config(c) for r, c in zip(_grid()["run"], _grid()["config"], strict=True)})
    # lr and seed take two values each; model, opt.beta are the same in all four; run is left out
    assert [(a.name, a.numeric, a.values) for a in axes] == [("lr", True, (3e-4, 1e-3)), ("seed", True, (0, 1))]


def test_nested_missing_and_non_numeric_keys():
    configs = {"a": {"opt": {"mb": 2}, "clip": True, "drill": {"kind": "lld"}, "tags": [1, 2]},
               "b": {"opt": {"mb": 4}, "clip": False, "tags": [1, 2]},
               "c": None}  # no config: takes no part
    axes = sweep.config_axes({r: sweep.flat_config(c) for r, c in configs.items()})
    # clip: bools are categories; drill.kind: b lacks it (missing is a value, "—"); opt.mb: nested, dotted;
    # tags: the same list in both, not an axis
    assert [(a.name, a.numeric, a.values) for a in axes] == [
        ("clip", False, ("False", "True")), ("drill.kind", False, ("lld", sweep.MISSING)), ("opt.mb", True, (2, 4))]
    # a numeric key one run lacks is categorical: "2" and "—"
    assert sweep.config_axes({"a": {"k": 2}, "b": {"j": 1}})[1].values == ("2", sweep.MISSING)
    assert sweep.config_axes({"a": {"lr": 1}, "b": None}) == []  # one configured run: nothing to compare


def test_flat_config_reads_the_stored_text():
    assert sweep.flat_config('{"a": {"b": {"c": 1}}, "d": {}}') == {"a.b.c": 1}  # an empty mapping adds nothing
    assert sweep.flat_config("{}") is None and sweep.flat_config("") is None and sweep.flat_config(None) is None
    assert sweep.flat_config("[1, 2]") is None and sweep.flat_config("not json") is None


def test_sweep_lists_runs_without_a_config():
    table = pd.concat([_grid(), _table([("bare", "healthy", None, None)])], ignore_index=True)
    sw = sweep.sweep(table)
    assert [a.name for a in sw.axes] == ["lr", "seed"] and sw.unconfigured == ["bare"]
    bare = sw.frame.set_index("run").loc["bare"]
    assert not bare["has_config"] and pd.isna(bare["lr"]) and pd.isna(bare["seed"])  # on no axis
    assert sw.frame["collapse_step"].tolist()[:2] == [40, 60] and sw.frame["run"].tolist() == [*_grid()["run"], "bare"]


def test_select_by_prefix_glob_and_list():
    table = _table([(n, "healthy", None, {}) for n in ("grpo-a", "grpo-b", "sapo-a", "llds")])
    assert sweep.select(table, "grpo-")["run"].tolist() == ["grpo-a", "grpo-b"]
    assert sweep.select(table, "*-a")["run"].tolist() == ["grpo-a", "sapo-a"]
    assert sweep.select(table, "llds, sapo")["run"].tolist() == ["sapo-a", "llds"]
    assert len(sweep.select(table, "")) == 4 and sweep.select(table, "zzz").empty


def test_groups_count_verdicts():
    frame = sweep.sweep(_grid()).frame
    g = sweep.groups(frame, "lr")
    # lr 3e-4: r2 healthy, r3 warning, no collapse; lr 1e-3: r0, r1 collapsed at 40 and 60 → first 40
    assert g.to_dict("records") == [
        {"group": "0.0003", "runs": 2, "healthy": 1, "warning": 1, "collapsed": 0, "first_collapse": None},
        {"group": "0.001", "runs": 2, "healthy": 0, "warning": 0, "collapsed": 2, "first_collapse": 40}]
    assert sweep.groups(frame, "verdict")[["group", "runs"]].values.tolist() == [
        ["collapsed", 2], ["healthy", 1], ["warning", 1]]


def test_sweep_figure_axes_and_verdict_colours():
    fig = charts.sweep_figure(sweep.sweep(_grid()))
    (pc,) = fig["data"]
    assert pc["type"] == "parcoords"
    assert [d["label"] for d in pc["dimensions"]] == ["lr", "seed", "collapse step", "verdict"]
    step = pc["dimensions"][2]
    # collapse steps 40, 60; the two runs that never collapsed sit above the highest step reached (99):
    # 99 + round(0.08 × 99) = 99 + 8 = 107, ticked "none"
    assert step["values"] == [40, 60, 107, 107] and step["ticktext"][-1] == "none" and step["tickvals"][-1] == 107
    # verdict codes healthy 0, warning 1, collapsed 2; each code falls in its own colour's third of cmin..cmax
    line = pc["line"]
    assert line["color"] == [2, 2, 0, 1] and (line["cmin"], line["cmax"]) == (-0.5, 2.5)
    for code, verdict in enumerate(sweep.VERDICTS):
        at = (code + 0.5) / 3  # (code − cmin) / (cmax − cmin)
        assert [c for x, c in line["colorscale"] if x <= at][-1] == theme.VERDICT_COLOURS[verdict]
    go.Figure(fig)  # a figure Plotly accepts as it is


def test_a_refresh_with_the_same_rows_reuses_the_sweep():
    first = sweep.sweep(_grid())
    assert sweep.sweep(_grid()) is first  # same rows (NaN collapse steps included): computed once
    changed = _grid()
    changed.loc[3, "verdict"] = "collapsed"
    assert sweep.sweep(changed) is not first and sweep.sweep(changed).frame["verdict"].tolist()[3] == "collapsed"


def test_sweep_rows_link_each_run():
    sw = sweep.sweep(_grid())
    rows = tables.sweep_rows(sw)
    assert rows[0]["run"] == "[r0](/run/r0)" and rows[0]["config.lr"] == 1e-3 and rows[0]["collapse_step"] == 40
    assert [c["field"] for c in tables.sweep_columns(sw.axes)][:5] == ["run", "verdict", "collapse_step", "config.lr",
                                                                       "config.seed"]
    assert tables.axis_column(sw.axes[0])["filter"] == "agNumberColumnFilter"
