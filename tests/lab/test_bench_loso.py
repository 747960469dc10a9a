"""`lab loso`: the leave-one-source-out choice among detector settings, derived by hand.

The choice reads only a run's label and its alarms (``status``, ``collapse``, ``first_alarm``, ``alarms``,
``critical``), so the fold arithmetic is tested on records written out below; the command end to end runs on
`lab bench`'s own fixture (tests/lab/test_bench.py), benched twice through the real path.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from collapsewatch.lab.bench_loso import choose, loso, objective, read_bench

from .test_bench import corpora  # noqa: F401  (the fixture)


def _rec(run, source, status, collapse=None, first_alarm=None, alarms=0, critical=False):
    # the fields the choice reads, then the rest of a bench record (lab/bench.py's run_record) so that the table's
    # figures can be summed: every alarm specific, none standing, no early collapse, 100 steps a run
    caught = collapse is not None and first_alarm is not None and first_alarm <= collapse
    rec = {"run": run, "source": source, "status": status, "collapse": collapse, "first_alarm": first_alarm,
           "alarms": alarms, "critical": critical, "steps": 100, "first_points": False, "blind": False,
           "first_critical": None}
    for how in ("pooled", "held"):
        rec |= {f"first_specific_{how}": first_alarm, f"caught_{how}": caught, f"standing_{how}": False,
                f"miss_{how}": None if caught or status != "collapsed" else "late"}
    return rec


def _bench(quiet: set[str] = frozenset(), crit: set[str] = frozenset()) -> pd.DataFrame:
    """Three sources, each one collapsed run (E = 50, alarmed at 30) and two healthy runs, the first of each
    alarmed; ``quiet``: runs whose alarms this setting silences; ``crit``: healthy runs it makes critical."""
    rows = []
    for s in "ABC":
        rows.append(_rec(f"{s}c", s, "collapsed", 50, 30, 1))
        for i in (1, 2):
            run = f"{s}h{i}"
            alarmed = i == 1 and run not in quiet
            rows.append(_rec(run, s, "healthy", first_alarm=40 if alarmed else None, alarms=int(alarmed),
                             critical=run in crit))
    rows.append(_rec("Ao", "A", "other", first_alarm=5, alarms=3))  # neither label: outside the objective
    return pd.DataFrame(rows)


def test_objective_by_hand():
    # the docstring's case: collapsed 2 of 3 alarmed by E (one at 60 > E = 50, one never), healthy 1 of 4
    recs = pd.DataFrame([_rec("c1", "A", "collapsed", 50, 10, 1), _rec("c2", "A", "collapsed", 50, 50, 1),
                         _rec("c3", "A", "collapsed", 50, 60, 1), _rec("h1", "A", "healthy", alarms=2),
                         *[_rec(f"h{i}", "A", "healthy") for i in (2, 3, 4)], _rec("o", "A", "other", alarms=9)])
    assert objective(recs) == pytest.approx(2 / 3 - 1 / 4)


def test_a_change_is_credited_only_where_other_sources_chose_it():
    # "one" silences A's alarmed healthy run only; "all" silences every source's.
    benches = {"default": _bench(), "one": _bench({"Ah1"}), "all": _bench({"Ah1", "Bh1", "Ch1"})}
    # every source: collapsed 3/3 alarmed; healthy alarmed default 3/6, one 2/6, all 0/6 → J 0.5, 0.667, 1 → "all"
    assert choose(benches) == "all"
    # each fold (two sources): default 1 − 2/4, one 1 − 1/4 or 1 − 2/4, all 1 − 0 → "all" in every fold
    recs, chosen = loso(benches)
    assert chosen == {"A": "all", "B": "all", "C": "all"}
    # without "all": leaving A out, "one" ties the default on B + C (1 − 2/4 both) → the default; leaving B or C
    # out, "one" wins (1 − 1/4 > 1 − 2/4) → B and C are scored under "one", where they equal the default. So A's
    # quiet run is not credited: the change helped only the source it would be scored on.
    recs, chosen = loso({"default": benches["default"], "one": benches["one"]})
    assert chosen == {"A": "default", "B": "one", "C": "one"}
    assert int(recs.loc[recs["status"] == "healthy", "alarms"].gt(0).sum()) == 3
    assert choose({"default": benches["default"], "one": benches["one"]}) == "one"


def test_more_healthy_criticals_than_the_default_is_not_eligible():
    # "all" silences every healthy alarm (J 1 vs 0.5) but turns Bh2 critical: on any fold holding B it is out;
    # leaving B out, A + C have no critical under it → chosen there
    benches = {"default": _bench(), "all": _bench({"Ah1", "Bh1", "Ch1"}, crit={"Bh2"})}
    assert choose(benches) == "default"
    assert loso(benches)[1] == {"A": "default", "B": "all", "C": "default"}


def test_benches_of_other_runs_are_refused():
    other = _bench()
    other.loc[other["run"] == "Ac", "collapse"] = 40
    with pytest.raises(ValueError, match="'x' does not hold the same runs and labels as 'default'"):
        loso({"default": _bench(), "x": other})
    with pytest.raises(ValueError, match="at least 2 benches"):
        loso({"default": _bench()})


def test_cli_end_to_end(corpora, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    _, _, root = corpora
    args = ["lab", "bench", "--public", str(root / "public-store"), "--public-dir", str(root / "public"),
            "--no-sample", "--store", f"gamma={root / 'gamma-store'}", "--json", "--runs"]
    (tmp_path / "quiet.toml").write_text("[grad]\nsustain_steps = 4\nrecur_spikes = 0\n")
    for name, extra in (("default", []), ("quiet", ["--detectors", str(tmp_path / "quiet.toml")])):
        res = CliRunner().invoke(app, [*args, *extra])
        assert res.exit_code == 0, res.output
        (tmp_path / f"{name}.json").write_text(res.stdout)
    # default: collapsed ac1 (warning rang at 27 ≤ 50), gc1 (42 ≤ 55) alarmed by E, bc1 (12 > 8) not; healthy oh1
    # alarmed of 11 → J = 2/3 − 1/11. "quiet" (3 points over the bar make neither a sustained nor a recurring
    # warning): no alarm → J = 0.
    # Every fold keeps at least one of ac1, gc1 and the default's J stays > 0 → the default everywhere.
    res = CliRunner().invoke(app, ["lab", "loso", str(tmp_path / "default.json"), str(tmp_path / "quiet.json"),
                                   "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["choice"]["all_sources"] == "default"
    assert out["choice"]["folds"] == {"default": 4, "quiet": 0}  # alpha/x, beta/y, gamma, omega/z
    rows = {r["source"]: r for r in out["table"]}  # one group ("all": no split in this fixture)
    # LOSO = the default's records throughout: flagged held out 1 (test_bench), healthy alarmed 1 (oh1); quiet: 0, 0
    assert (rows["LOSO"]["flagged_held"], rows["LOSO"]["healthy_alarmed"]) == (1, 1)
    assert (rows["quiet"]["flagged_held"], rows["quiet"]["healthy_alarmed"]) == (0, 0)
    text = CliRunner().invoke(app, ["lab", "loso", f"d={tmp_path / 'default.json'}", f"q={tmp_path / 'quiet.json'}"])
    assert text.exit_code == 0 and "chosen on all sources: d; folds (one per source left out) choosing each: d 4, " \
        "q 0" in text.stdout
    assert "left out," not in text.stdout  # every fold chose as all sources did


def test_the_text_names_the_folds_that_chose_otherwise(tmp_path):
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    # test_a_change_is_credited_only_where_other_sources_chose_it without "all": all sources choose "one", the fold
    # leaving A out chooses the default
    for name, quiet in (("default", set()), ("one", {"Ah1"})):
        (tmp_path / f"{name}.json").write_text(json.dumps({"runs": _bench(quiet).to_dict("records")}))
    res = CliRunner().invoke(app, ["lab", "loso", str(tmp_path / "default.json"), str(tmp_path / "one.json")])
    assert res.exit_code == 0, res.output
    assert "chosen on all sources: one; folds (one per source left out) choosing each: default 1, one 2" in res.stdout
    assert "  left out, A chose default" in res.stdout.splitlines()


def test_a_file_that_is_not_a_bench_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    (tmp_path / "table.json").write_text(json.dumps({"table": []}))
    (tmp_path / "broken.json").write_text("{")
    for f, why in (("table.json", "not the output of `collapsewatch lab bench --json --runs`"),
                   ("broken.json", "not readable as JSON")):
        res = CliRunner().invoke(app, ["lab", "loso", str(tmp_path / f), str(tmp_path / f)])
        assert res.exit_code == 1 and why in res.output and "Traceback" not in res.output
        with pytest.raises(ValueError, match=why.replace("`", ".").replace("(", ".")):
            read_bench(tmp_path / f)
