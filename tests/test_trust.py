"""collapsewatch.trust: the bench's trust figures as the product reads them — the trust line, the generated table in
docs/detectors.md (kept equal to the committed data file by this test), and no lab import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collapsewatch import trust
from collapsewatch.detectors.rules import rules_digest

ROOT = Path(__file__).resolve().parents[1]


def _row(detector, phase, severity, fired, preceded, held, specific, applicable=(20, 4)):
    return {"detector": detector, "phase": phase, "severity": severity, "healthy_fired": fired, "healthy_runs": 20,
            "preceded": preceded, "collapsed_runs": 4, "preceded_held_out": held, "specific_sources": specific,
            "sources": 3, "healthy_applicable": applicable[0], "collapsed_applicable": applicable[1],
            "healthy_fired_ci": None, "preceded_ci": None}  # no intervals: as a file written before they were given


DATA = {"command": "collapsewatch lab bench --public STORE", "date": "2026-01-02", "rules": "abc",
        "rows": [_row("grad", "explosion", "info", 9, 3, 0, 0), _row("grad", "explosion", "warning", 1, 2, 2, 3),
                 _row("length", "blowup", "info", 2, 1, 1, 2), _row("length", "blowup", "warning", 2, 1, 1, 2)]}


def test_trust_line_and_table_by_hand():
    # DATA records rules digest "abc", not this code's: the line says the figures are another rule set's
    assert trust.trust_line("grad", "explosion", "warning", DATA) == (
        "fired on 1 of 20 healthy runs; preceded 2 of 4 collapses (2 as a held-out specific flag) — measured on "
        "other rules (2026-01-02)")
    today = {**DATA, "rules": rules_digest()}
    assert trust.trust_line("grad", "explosion", "warning", today) == (
        "fired on 1 of 20 healthy runs; preceded 2 of 4 collapses (2 as a held-out specific flag)")
    assert trust.trust_line("grad", "explosion", "critical", DATA) == "no benchmark figures for this alarm"
    lines = trust.markdown_table(DATA).splitlines()
    # header sentence, blank, 2 header rows, then: grad info (9/20 = 45 %) and warning (1/20 = 5 %); length's info
    # row has the warning row's figures (no length episode stayed at info) → left out
    assert lines[4:] == ["| `grad` / `explosion` | info | 9 of 20 (45 %) | 3 of 4 | 0 of 4 | 0 of 3 |",
                         "| `grad` / `explosion` | warning | 1 of 20 (5 %) | 2 of 4 | 2 of 4 | 3 of 3 |",
                         "| `length` / `blowup` | warning | 2 of 20 (10 %) | 1 of 4 | 1 of 4 | 2 of 3 |"]
    doc = f"intro\n{trust.BEGIN}\nold table\n{trust.END}\nafter\n"
    new = trust.replace_section(doc, "T\n")
    assert new == f"intro\n{trust.BEGIN}\nT\n{trust.END}\nafter\n" and trust.section(new) == "T\n"
    with pytest.raises(ValueError, match="no table markers"):
        trust.replace_section("no markers", "T\n")


def test_intervals_in_the_line_and_the_table():
    # grad/explosion warning with intervals: 1 of 20 = 5.0 % [0.9 %, 24 %], 2 of 4 = 50 % [15 %, 85 %] (under 20 %
    # one decimal, else whole: 0.009 → "0.9", 0.2386 → "24")
    row = {**_row("grad", "explosion", "warning", 1, 2, 2, 3), "healthy_fired_ci": [0.009, 0.2386],
           "preceded_ci": [0.15, 0.85]}
    today = {**DATA, "rules": rules_digest(), "rows": [row]}
    assert trust.trust_line("grad", "explosion", "warning", today) == (
        "fired on 1 of 20 healthy runs (5.0 %, 95 % interval by source 0.9–24 %); preceded 2 of 4 collapses "
        "(50 %, 15.0–85 %; 2 as a held-out specific flag)")
    assert trust.markdown_table(today).splitlines()[-1] == (
        "| `grad` / `explosion` | warning | 1 of 20 (5.0 %, 0.9–24 %) | 2 of 4 (50 %, 15.0–85 %) | 2 of 4 | 3 of 3 |")
    # a bound within rounding of 0 (Wilson's lower bound at k = 0 can come out as 1e-17) reads "0", not "0.0"
    assert trust.share(0, 3, [1e-17, 0.5615]) == "0 %, 0–56 %"
    assert (trust.interval([0.011, 0.185]), trust.interval(None)) == ("1.1–18.5 %", "—")
    # counted over the runs that log its inputs: 1 of 10 (10.0 %), 2 of 3 (67 %)
    few = {**row, "healthy_applicable": 10, "collapsed_applicable": 3}
    assert trust.trust_line("grad", "explosion", "warning", {**today, "rows": [few]}) == (
        "fired on 1 of the 10 healthy runs that log its inputs (10.0 %, 95 % interval by source 0.9–24 %; 20 in "
        "all); preceded 2 of the 3 collapses that do (67 %, 15.0–85 %; 4 in all; 2 as a held-out specific flag)")
    assert trust.markdown_table({**today, "rows": [few]}).splitlines()[-1] == (
        "| `grad` / `explosion` | warning | 1 of 10 (10.0 %, 0.9–24 %), 20 in all | 2 of 3 (67 %, 15.0–85 %, 4 in all) "
        "| 2 of 3 | 3 of 3 |")


def test_headline_table_by_hand():
    # two group rows as lab bench writes them (held out listed first whatever their order); held out: 33 of 56 =
    # 58.9 % → "59 %", interval [0.278, 0.819] → "28–82 %"; first-10 11 of 19 = 57.9 % → "58 %"; healthy 12 of 120 =
    # 10.0 % (one decimal under 20 %), interval [0.041, 0.168] → "4.1–16.8 %"; 0 critical of 120
    # with Wilson's [0, 0.031] → "0 %, 0–3.1 %"; 0.2750 per 1k → "0.28" (0.27507…); the 56 − 33 = 23 not flagged by
    # why, in the bench's order, a reason with none left out (not specific 0): 2 + 12 + 1 + 8 = 23. "all": no interval
    # given (a file written before they were) → the bare share; no first-10 collapse → "0 of 0"; no healthy steps →
    # "—"; no miss counts (a file written before them) → "—"
    held = {"source": "not tuned on (65 source(s))", "collapsed": 56, "flagged_held": 33,
            "flagged_held_ci": [0.278, 0.819], "collapsed_signal": 39, "flagged_signal_held": 26, "early_held": 19,
            "first10_collapses": 19, "first10_caught_held": 11, "first10_caught_held_ci": [0.0, 1.0],
            "healthy": 120, "healthy_alarmed": 12, "healthy_alarmed_ci": [0.041, 0.168], "healthy_critical": 0,
            "healthy_critical_ci": [0.0, 0.031], "healthy_alarms_per_1k": 0.2750756, "missed_alike_held": 2,
            "missed_not_specific_held": 0, "missed_blind_held": 12, "missed_late_held": 1, "missed_silent_held": 8}
    every = {"source": "all", "collapsed": 4, "flagged_held": 1, "collapsed_signal": 4, "flagged_signal_held": 1,
             "early_held": 0, "first10_collapses": 0, "first10_caught_held": 0, "healthy": 5, "healthy_alarmed": 1,
             "healthy_critical": 0, "healthy_alarms_per_1k": None}
    data = {**DATA, "runs_used": 339, "headline": [every, held]}
    lines = trust.headline_table(data).splitlines()
    assert lines[0].startswith("Bench of 2026-01-02: `collapsewatch lab bench --public STORE` (rules digest abc), "
                               "339 runs at hand.")
    assert lines[4:] == [
        "| held out: no rule chosen on (65 source(s)) | 33 of 56 (59 %, 28–82 %) | 26 of 39 | 19 | 11 of 19 (58 %, "
        "0–100 %) | 12 of 120 (10.0 %, 4.1–16.8 %) | 0 of 120 (0 %, 0–3.1 %) | 0.28 | alike 2, blind 12, late 1, "
        "silent 8 |",
        "| all | 1 of 4 (25 %) | 1 of 4 | 0 | 0 of 0 | 1 of 5 (20 %) | 0 of 5 (0 %) | — | — |"]
    assert trust.headline_table({**DATA}) == ""  # a file without headline figures: no table
    doc = f"a\n{trust.HEADLINE[0]}\n{trust.HEADLINE[1]}\nb\n"
    assert trust.section(trust.replace_section(doc, "H\n", trust.HEADLINE), trust.HEADLINE) == "H\n"


def test_dump_round_trip_and_bad_rows(tmp_path):
    trust.dump(DATA["rows"], {"command": "c", "date": "d", "rules": "r"}, tmp_path / "t.json")
    assert trust.load(tmp_path / "t.json")["rows"] == DATA["rows"]
    with pytest.raises(ValueError, match="lack field"):
        trust.dump([{"detector": "grad"}], {}, tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{not json")
    assert trust.load(tmp_path / "broken.json") == {}  # the product then shows no figures, never crashes


def test_docs_table_is_generated_from_the_committed_trust_data():
    assert trust.TRUST_FILE.is_file()
    doc = (ROOT / "docs" / "detectors.md").read_text()
    assert trust.section(doc) == trust.markdown_table()
    assert trust.load().get("headline") and trust.section(doc, trust.HEADLINE) == trust.headline_table()


def test_the_trust_module_reads_the_data_file_without_the_lab():
    code = ("import sys, collapsewatch.trust as t; t.trust_line('grad', 'explosion', "
            "'warning'); assert not [m for m in sys.modules if m.startswith('collapsewatch.lab')], 'lab imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_detector_that_can_fire_on_few_runs_counts_over_them():
    # tools/collapse: 5 of the 20 healthy runs and 1 of the 4 collapses log tool calls; it fired on none of the 5 and
    # preceded the 1 (held out too). The line and the row count over those and say how many there are in all; the share
    # is 0 of 5 = 0 %. A row written before the bench counted inputs (no *_applicable) reads as all runs.
    row = _row("tools", "collapse", "warning", 0, 1, 1, 3, applicable=(5, 1))
    today = {**DATA, "rules": rules_digest(), "rows": [row]}
    assert trust.trust_line("tools", "collapse", "warning", today) == (
        "fired on 0 of the 5 healthy runs that log its inputs (20 in all); preceded 1 of the 1 collapses that do "
        "(4 in all; 1 as a held-out specific flag)")
    assert trust.markdown_table(today).splitlines()[-1] == (
        "| `tools` / `collapse` | warning | 0 of 5 (0 %), 20 in all | 1 of 1 (4 in all) | 1 of 1 | 3 of 3 |")
    old = {k: v for k, v in row.items() if not k.endswith("_applicable")}
    assert trust.applicable(old) == (20, 4)
