"""`lab bench`: three sources built through the real path (JSONL files → `ingest_file` → store → `detect_frame`),
with the figures the bench must print derived by hand below.

Every run logs only ``step`` (= its point index), ``reward_mean`` and ``grad_norm``, so the only detector with
inputs is ``grad/explosion`` (docs/detectors.md): grad norm 1.0 everywhere (median 1, log spread 0 → bar 5×)
except
* a *warning* at point p: 10.0 at p, p+1, p+2 (3 points ≥ the bar = sustain_steps; 10 < 20 × = critical_factor),
  one episode starting at p, worst severity warning — an info spike at p and p+1, a warning from p+2: the bench
  dates the alarm p+2, when it rang as a warning;
* an *info* at point p: 10.0 at p alone (falls back at once).
A point needs 20 earlier points (min_points), so p ≥ 20.

Sources, 60 steps per run unless said:
* ``alpha/x`` (public, labels.csv): ac1 collapse 50 (labels.csv), warning at 25; no healthy run (its own healthy
  runs cannot tell whether a flag fires on them alike: it counts).
* ``omega/z`` (public): oh1 healthy, warning at 30 (a false alarm), no collapsed run.
* ``beta/y`` (public): bh1 healthy, quiet; bh2 healthy, info at 20; bc1 labels.csv kind grad-explosion onset 8, no
  collapse column → E = 8, at point 8 < 10 (an early collapse), warning at 20; bmiss in sources.csv, no raw file.
* ``gamma`` (a --store, labels derived by the reward rule): gh1…gh8 healthy, quiet, reward 0.5; gc1 reward 0.2 for
  steps 0–19, 0.6 for 20–49, 0.1 for 50–79: the 10-point median first reaches 0.6 at step 25 (six 0.6 in 16–25) and
  falls to 0.1 ≤ 0.5 × 0.6 at step 55 (six 0.1 in 46–55; at 54 it is (0.1 + 0.6) / 2 = 0.35), never back over
  0.75 × 0.6 → collapse 55, best set at point 25 ≥ 20: trusted; warning at 40. gu1 reward 0.6 for 0–14, then 0.1:
  best 0.6 at point 4 (the first level: the warm-up's median of points 0–4), collapse at 20 (six 0.1 in 11–20) → U2,
  untrusted; warning at 30.

Healthy runs: oh1, bh1, bh2, gh1…gh8 = 11. Class (grad, explosion, ≥ warning) fires on {oh1}; ≥ info on {oh1, bh2}.
* pooled: warning 1/11 = 9.1 % ≤ 10 % → specific.
* held out: alpha's fold = beta + gamma + omega healthy (11): 1/11 → specific; beta's = oh1 + gh1…8 (9): 1/9 =
  11.1 % → not specific (the LOSO exclusion); gamma's = oh1, bh1, bh2 (3): 1/3 → not specific; omega's = bh1, bh2,
  gh1…8 (10): 0/10 → specific.
* alike in its own source: beta's and gamma's healthy runs have no warning (0/2, 0/8); alpha has none (cannot
  tell) — no flag is discounted here (test_a_flag_alike_in_its_own_source_does_not_count has that case).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from collapsewatch.ingest import ingest_file
from collapsewatch.lab.bench import bench_table, classify, run_records, trust_rows
from collapsewatch.lab.bench_cli import gather
from collapsewatch.lab.labels import label_run

N = 60


def _series(n: int = N, reward=0.5, warning: int | None = None, info: int | None = None) -> list[dict]:
    grad = np.ones(n)
    if warning is not None:
        grad[warning:warning + 3] = 10.0
    if info is not None:
        grad[info] = 10.0
    rew = np.asarray(reward(np.arange(n)) if callable(reward) else np.full(n, reward), dtype=float)
    return [{"step": i, "reward_mean": float(rew[i]), "grad_norm": float(grad[i])} for i in range(n)]


def gc1_reward(s):
    return np.where(s < 20, 0.2, np.where(s < 50, 0.6, 0.1))


def gu1_reward(s):
    return np.where(s < 15, 0.6, 0.1)


PUBLIC = {"oh1": ("omega/z", _series(warning=30)), "ac1": ("alpha/x", _series(warning=25)),
          "bh1": ("beta/y", _series()), "bh2": ("beta/y", _series(info=20)),
          "bc1": ("beta/y", _series(warning=20)), "bmiss": ("beta/y", None)}
GAMMA = {**{f"gh{i}": _series() for i in range(1, 9)}, "gc1": _series(80, gc1_reward, warning=40),
         "gu1": _series(60, gu1_reward, warning=30)}


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    pub, raw = root / "public", root / "public" / "raw"
    raw.mkdir(parents=True)
    with (pub / "sources.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "file", "repo", "path", "commit", "licence", "sha256"])
        for run, (repo, _) in PUBLIC.items():
            w.writerow([run, f"{run}.jsonl", repo, f"logs/{run}.jsonl", "0" * 40, "MIT", ""])
    (pub / "labels.csv").write_text("run,kind,onset,collapse\noh1,,,\nac1,,,50\nbh1,,,\nbh2,,,\n"
                                    "bc1,grad-explosion,8,\nbmiss,,,\n")
    for run, (_, rows) in PUBLIC.items():
        if rows is not None:
            _write_jsonl(raw / f"{run}.jsonl", rows)
            ingest_file(root / "public-store", raw / f"{run}.jsonl", run)
    for run, rows in GAMMA.items():
        _write_jsonl(root / f"{run}.jsonl", rows)
        ingest_file(root / "gamma-store", root / f"{run}.jsonl", run)
    bench = gather(root / "public-store", pub, None, [f"gamma={root / 'gamma-store'}"], [], None)
    return bench, run_records(bench.runs, bench.flags), root


def test_runs_are_classified_and_the_missing_and_untrusted_listed(corpora):
    bench, recs, _ = corpora
    status = dict(zip(recs["run"], recs["status"], strict=True))
    assert status["gu1"] == "untrusted" and status["gc1"] == "collapsed" and status["bc1"] == "collapsed"
    assert sum(s == "healthy" for s in status.values()) == 11
    gu1 = recs.set_index("run").loc["gu1"]
    assert gu1["collapse"] == 20 and gu1["reason"].startswith("U2") and "point 4 " in gu1["reason"]
    assert recs.set_index("run").loc["gc1", "collapse"] == 55 and recs.set_index("run").loc["bc1", "collapse"] == 8
    assert bench.missing == [{"source": "beta/y", "run": "bmiss",
                              "why": "raw file missing: fetch beta/y @ 0000000:logs/bmiss.jsonl to raw/bmiss.jsonl"}]
    # the real detector found exactly the episodes the docstring plans (grad/explosion only)
    got = {(r.run, r.phase, r.severity, int(r.step_start)) for r in bench.flags.itertuples()}
    assert got == {("oh1", "explosion", "warning", 30), ("ac1", "explosion", "warning", 25),
                   ("bh2", "explosion", "info", 20), ("bc1", "explosion", "warning", 20),
                   ("gc1", "explosion", "warning", 40), ("gu1", "explosion", "warning", 30)}


def test_pooled_and_held_out_figures(corpora):
    _, recs, _ = corpora
    t = bench_table(recs).set_index("source")
    a = t.loc["all"]
    # pooled: the warning class is specific (1/11): ac1 (rang at 27 ≤ 50, lead 23, early) and gc1 (42 ≤ 55, lead 13,
    # not ≥ 20 before) flagged; bc1's rang at 22, after its collapse at 8 → 2 of 3, early 1, lead median 18.
    assert (a["collapsed"], a["flagged_pooled"], a["early_pooled"], a["lead_median_pooled"]) == (3, 2, 1, 18.0)
    # held out: only alpha's fold finds it specific → ac1 alone: 1 of 3, early 1, lead 23
    assert (a["flagged_held"], a["early_held"], a["lead_median_held"]) == (1, 1, 23.0)
    # each source with a collapse once (alpha: ac1, beta: bc1, gamma: gc1 — gu1 is untrusted, not a collapse):
    # pooled 1, 0, 1 of 1 each → 2/3; held out 1, 0, 0 → 1/3
    assert a["collapse_sources"] == 3
    assert (a["flagged_source_mean_pooled"], a["flagged_source_mean_held"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    # bc1: a first-10 collapse (point 8); its flag rang at point 22 > 8 + 2: not caught (dated by its start, point
    # 20, it would not be either; test_an_alarm_is_dated_when_it_rang has the caught case)
    assert (a["first10_collapses"], a["first10_caught_pooled"], a["first10_caught_held"]) == (1, 0, 0)
    # why not flagged (bench_misses): bc1's only alarm rang after its collapse → late, pooled and held out; gc1's at
    # 42 ≤ 55 counts pooled (1 of 11 healthy runs fired) but not in gamma's fold (oh1 of the other sources' 3
    # healthy runs bh1, bh2, oh1: 33 % > 10 %) → not specific, held out only
    assert (a["missed_late_pooled"], a["missed_not_specific_pooled"]) == (1, 0)
    assert (a["missed_late_held"], a["missed_not_specific_held"], a["missed_silent_held"]) == (1, 1, 0)
    # no critical anywhere in this fixture: no collapsed run has one
    assert (a["critical_by_collapse"], a["critical_after_collapse"]) == (0, 0) and a["critical_lag_median"] is None
    # healthy: oh1's one warning over 11 × 60 steps; no critical; bh2's info is no alarm
    assert (a["healthy"], a["healthy_alarmed"], a["healthy_critical"]) == (11, 1, 0)
    # every run of this fixture logs grad_norm: all 11 healthy logs have a signal, oh1's the one warned
    assert (a["healthy_signal"], a["healthy_alarmed_signal"]) == (11, 1)
    assert a["healthy_alarms_per_1k"] == pytest.approx(1000 / 660)
    assert (a["healthy_specific_pooled"], a["healthy_specific_held"]) == (1, 1)  # omega's fold: specific
    assert (a["untrusted"], a["other"], a["runs"]) == (1, 0, 15)
    # a rule designed on alpha: its row (ac1, no healthy run), and the other three sources' (bc1 and gc1 not flagged
    # held out; oh1's alarm among their 11 healthy runs)
    split = bench_table(recs, ["alpha/x"]).set_index("source")
    assert split.loc["tuned on (1 source(s))", "flagged_held"] == 1 and split.loc["tuned on (1 source(s))", "healthy"] == 0
    other = split.loc["not tuned on (3 source(s))"]
    assert (other["collapsed"], other["flagged_held"], other["healthy"], other["healthy_alarmed"]) == (2, 0, 11, 1)
    with pytest.raises(ValueError, match="no source 'delta'"):
        bench_table(recs, ["delta"])
    beta = t.loc["beta/y"]
    assert (beta["collapsed"], beta["flagged_pooled"], beta["flagged_held"], beta["healthy"]) == (1, 0, 0, 2)
    gamma = t.loc["gamma"]
    assert (gamma["flagged_pooled"], gamma["flagged_held"], gamma["untrusted"]) == (1, 0, 1)


def test_trust_rows_by_hand(corpora):
    bench, _, _ = corpora
    rows = {(r["detector"], r["phase"], r["severity"]): r for r in trust_rows(bench.runs, bench.flags)}
    assert set(rows) == {("grad", "explosion", "info"), ("grad", "explosion", "warning")}
    warn = rows[("grad", "explosion", "warning")]
    # fired on oh1 of 11 healthy; preceded ac1 (rang at 27 ≤ 50) and gc1 (42 ≤ 55), not bc1 (22 > 8); held out: ac1
    # only; specific in alpha's and omega's folds of 4
    assert [warn[k] for k in ("healthy_fired", "healthy_runs", "preceded", "collapsed_runs", "preceded_held_out",
                              "specific_sources", "sources")] == [1, 11, 2, 3, 1, 2, 4]
    # every run logs grad_norm, grad's input: all 11 healthy and 3 collapsed runs are ones it can fire on
    assert (warn["healthy_applicable"], warn["collapsed_applicable"]) == (11, 3)
    # intervals over sources: healthy omega 1/1 fired, beta 0/2, gamma 0/8 — a 3-source draw misses omega with
    # probability 8/27 (share 0) and is omega thrice with 1/27 ≈ 3.7 % > 2.5 % (share 1): [0, 1]. Preceded: alpha
    # 1/1, beta 0/1, gamma 1/1 — all beta 1/27 (share 0), no beta 8/27 (share 1): [0, 1]
    assert (warn["healthy_fired_ci"], warn["preceded_ci"]) == ([0.0, 1.0], [0.0, 1.0])
    run = next(r for r in bench.runs if r.run == "oh1")
    assert run.inputs == {"grad_norm"}  # reward_mean is no detector's primary column
    assert run.logs_inputs_of(("grad_norm",)) and not run.logs_inputs_of(("tool_calls_mean",))
    info = rows[("grad", "explosion", "info")]
    # ≥ info fires on oh1 and bh2: 2 of 11. Alpha's fold (11): 2/11 = 18 % → not specific; beta's 1/9 and gamma's
    # 2/3 neither; omega's bh2 of 10 = exactly 10 % → specific (≤) → preceded ac1 and gc1, held out none
    assert [info[k] for k in ("healthy_fired", "preceded", "preceded_held_out", "specific_sources")] == [2, 2, 0, 1]


def test_an_alarm_is_dated_when_it_rang():
    import pandas as pd

    from collapsewatch.lab.bench import BenchRun, Specificity, run_record

    # a run collapsing at step 8 (its point 8 of 0…59: a first-10 collapse), no healthy run has fired (every class
    # specific). Episode A opened at 5 as info and stood at warning from 9 (worst warning); B opened at 6 and turned
    # warning at 11, critical at 14. First alarm: A at 9 (not 5, its start); 9 ≤ 8 + 2 points → caught, flagged
    # after the collapse (9 > 8) so not "at or before"; B's class ≥ critical would date it 14.
    run = BenchRun("s", "r", "collapsed", 8, 60, tuple(range(60)))
    alarms = pd.DataFrame([
        {"run": "r", "detector": "grad", "phase": "explosion", "severity": "warning", "step_start": 5,
         "warning_at": 9, "critical_at": None},
        {"run": "r", "detector": "entropy", "phase": "blowup", "severity": "critical", "step_start": 6,
         "warning_at": 11, "critical_at": 14}])
    spec = Specificity({}, 10)
    rec = run_record(run, alarms, spec, spec)
    assert (rec["first_alarm"], rec["first_specific_pooled"], rec["caught_pooled"]) == (9, 9, True)
    assert rec["first_critical"] == 14  # B rang critical at 14, 6 steps after the collapse
    from collapsewatch.lab.bench import summarise
    row = summarise(pd.DataFrame([rec]), "s")
    assert (row["critical_by_collapse"], row["critical_after_collapse"], row["critical_lag_median"]) == (0, 1, 6.0)
    # where the warning class is not specific (fired on 2 of 10 healthy runs), only B's critical counts: at 14
    loud = Specificity({("grad", "explosion", "warning"): {"h1", "h2"},
                        ("entropy", "blowup", "warning"): {"h1", "h2"}}, 10)
    rec = run_record(run, alarms, loud, loud)
    assert (rec["first_specific_pooled"], rec["caught_pooled"]) == (14, False)


def test_a_flag_standing_at_the_collapse():
    import pandas as pd

    from collapsewatch.lab.bench import BenchRun, Specificity, run_record, summarise

    # A run collapsing at E = 50 (steps 0…59, one logged point a step, so point = step); every class specific.
    # "Standing" = a counting alarm dated ≤ 50 whose last held step is ≥ point(50) − 2 = 48 (or unknown):
    #  * A rang at 10 and held to 20: flagged (10 ≤ 50), not standing (20 < 48);
    #  * B rang at 46 and held to 47: not standing (47 < 48); held to 48 instead: standing (48 ≥ 48);
    #  * C rang at 40, its end unknown (NaN): standing;
    #  * D rang at 52, held to 59: after E, neither flags nor stands.
    run = BenchRun("s", "r", "collapsed", 50, 60, tuple(range(60)))
    spec = Specificity({}, 10)

    def alarm(start, end, detector="grad"):
        return {"run": "r", "detector": detector, "phase": "explosion", "severity": "warning", "step_start": start,
                "warning_at": start, "critical_at": None, "step_end": end}

    def rec(*rows):
        return run_record(run, pd.DataFrame(list(rows)), spec, spec)

    assert (rec(alarm(10, 20))["first_specific_held"], rec(alarm(10, 20))["standing_held"]) == (10, False)
    assert rec(alarm(10, 20), alarm(46, 47, "entropy"))["standing_held"] is False
    assert rec(alarm(10, 20), alarm(46, 48, "entropy"))["standing_held"] is True
    assert rec(alarm(40, float("nan")))["standing_held"] is True
    assert rec(alarm(52, 59))["standing_held"] is False
    # where the only standing alarm's class is not specific (fired on 2 of 10 healthy runs), it does not count
    loud = Specificity({("entropy", "explosion", "warning"): {"h1", "h2"}}, 10)
    assert run_record(run, pd.DataFrame([alarm(10, 20), alarm(46, 48, "entropy")]), loud, loud)["standing_held"] is False
    # the summary counts a collapse as flagged-and-standing only when it is flagged: runs 1 (A: flagged, not
    # standing), 2 (A + B to 48: both), 3 (D: neither) → flagged 2 of 3, standing 1
    row = summarise(pd.DataFrame([rec(alarm(10, 20)), rec(alarm(10, 20), alarm(46, 48, "entropy")),
                                  rec(alarm(52, 59))]), "s")
    assert (row["flagged_held"], row["flagged_standing_held"]) == (2, 1)


def test_a_flag_alike_in_its_own_source_does_not_count():
    import pandas as pd

    from collapsewatch.lab.bench import BenchRun, Specificity, run_record

    # A run of source S collapsing at 50 with one grad/explosion warning that rang at 30; no healthy run of any other
    # source fires it (held = pooled = specific). S's own healthy runs:
    #  * 1 of 2 fire the class (50 % > 10 %): the flag fires on S's healthy and collapsed runs alike → not counted:
    #    flagged nowhere, and a healthy run of S with the same alarm still counts its own (false) alarm;
    #  * 1 of 10 (exactly 10 % ≤ 10 %): counted, rang at 30 ≤ 50;
    #  * S has no healthy run (0): cannot tell → counted.
    run = BenchRun("s", "c", "collapsed", 50, 60, tuple(range(60)))
    alarms = pd.DataFrame([{"run": "c", "detector": "grad", "phase": "explosion", "severity": "warning",
                            "step_start": 28, "warning_at": 30, "critical_at": None}])
    others = Specificity({}, 20)
    key = ("grad", "explosion", "warning")
    alike = Specificity({key: {"h1"}}, 2)
    rec = run_record(run, alarms, others, others, alike)
    assert (rec["first_specific_pooled"], rec["first_specific_held"]) == (None, None)
    assert run_record(run, alarms, others, others, Specificity({key: {"h1"}}, 10))["first_specific_held"] == 30
    assert run_record(run, alarms, others, others, Specificity({}, 0))["first_specific_held"] == 30
    healthy = BenchRun("s", "h1", "healthy", None, 60, tuple(range(60)))
    assert run_record(healthy, alarms.assign(run="h1"), others, others, alike)["first_specific_held"] == 30


def test_why_a_collapse_was_not_flagged():
    import pandas as pd

    from collapsewatch.lab.bench import BenchRun, Specificity, run_record, summarise

    # A run collapsing at E = 50 (steps 0…59); its one alarm a grad/explosion warning. The reasons are tried in the
    # order alike > not specific > blind > late > silent (collapsewatch/lab/bench_misses.py):
    key = ("grad", "explosion", "warning")
    quiet, loud = Specificity({}, 10), Specificity({key: {"h1", "h2"}}, 10)  # fired on 0 / 2 of 10 healthy runs
    alike = Specificity({key: {"h1"}}, 2)  # 1 of its own source's 2 healthy runs: 50 % > 10 %

    def rec(at=None, pooled=quiet, held=quiet, own=None, blind=False):
        run = BenchRun("s", "c", "collapsed", 50, 60, tuple(range(60)), blind=blind)
        rows = [] if at is None else [{"run": "c", "detector": "grad", "phase": "explosion", "severity": "warning",
                                       "step_start": at, "warning_at": at, "critical_at": None}]
        alarms = pd.DataFrame(rows, columns=["run", "detector", "phase", "severity", "step_start", "warning_at",
                                             "critical_at"])
        return run_record(run, alarms, pooled, held, own)

    # rang at 30 ≤ 50 and counts: flagged, no reason
    assert (rec(30)["miss_pooled"], rec(30)["miss_held"]) == (None, None)
    # rang at 30, specific on the other sources but fired on half its own source's healthy runs: alike
    assert rec(30, own=alike)["miss_held"] == "alike"
    # rang at 30, specific pooled but fired on 2 of 10 of the other sources' healthy runs: not specific held out
    assert (rec(30, held=loud)["miss_pooled"], rec(30, held=loud)["miss_held"]) == (None, "not specific")
    # …and so on a reward-only log too: a rule saw it, so "not specific" comes before "blind"
    assert rec(30, held=loud, blind=True)["miss_held"] == "not specific"
    # rang at 52 only (after E): late; with no signal column: blind
    assert (rec(52)["miss_held"], rec(52, blind=True)["miss_held"]) == ("late", "blind")
    # no alarm at all: silent; with no signal column: blind
    assert (rec()["miss_held"], rec(blind=True)["miss_held"]) == ("silent", "blind")
    # a healthy run has no reason
    healthy = BenchRun("s", "h", "healthy", None, 60, tuple(range(60)))
    none = pd.DataFrame(columns=["run", "detector", "phase", "severity", "step_start", "warning_at", "critical_at"])
    assert run_record(healthy, none, quiet, quiet)["miss_held"] is None
    # …nor has an untrusted label with a collapse step (scored nowhere): its silence is no miss
    untrusted = BenchRun("s", "u", "untrusted", 50, 60, tuple(range(60)), reason="U2: …")
    assert run_record(untrusted, none, quiet, quiet)["miss_held"] is None
    # the counts of a row: 6 collapsed — flagged 1 (30), alike 1, not specific 1, late 1, blind 1, silent 1
    row = summarise(pd.DataFrame([rec(30), rec(30, own=alike), rec(30, held=loud), rec(52), rec(blind=True), rec()]),
                    "s")
    assert row["flagged_held"] == 1
    assert [row[f"missed_{m}_held"] for m in ("alike", "not_specific", "blind", "late", "silent")] == [1, 1, 1, 1, 1]
    # pooled, the "not specific" run (specific on every source's healthy runs) is flagged: 2 flagged, no not-specific
    assert (row["flagged_pooled"], row["missed_not_specific_pooled"]) == (2, 0)


def test_drilled_runs_u1_and_other():
    steps = np.arange(60)
    reward = gu1_reward(steps)  # derived collapse at 20 (module docstring)
    early = label_run("d1", {"drill": {"kind": "lld", "at_step": 32}}, steps, reward)
    r = classify("drills", early, steps, reward, csv_label=False)
    assert (r.status, r.collapse) == ("untrusted", 20) and r.reason.startswith("U1")
    held = label_run("d2", {"drill": {"kind": "lld", "at_step": 32}}, steps, np.full(60, 0.5))
    assert classify("drills", held, steps, np.full(60, 0.5), csv_label=False).status == "other"
    # a labels-CSV collapse is the user's word: neither U1 nor U2 applies
    given = label_run("d3", None, steps, reward, {"kind": "", "onset": None, "collapse": 20})
    assert classify("p", given, steps, reward, csv_label=True).status == "collapsed"


def test_a_label_the_runs_end_decides_is_u3():
    # reward .5 for 40 points, then .05 for 14 points: the 10-point level falls to .05 ≤ .25 at step 45 (six of ten
    # points .05), and 8 levels follow (steps 46-53) < SUSTAIN 10 → no collapse by the rule, decided by the run's end
    steps = np.arange(54)
    reward = np.r_[np.full(40, .5), np.full(14, .05)]
    lab = label_run("e1", None, steps, reward)
    assert lab.collapse is None and "at step 45, with 8 logged point(s) after it" in lab.undecided
    assert not lab.healthy
    r = classify("natural", lab, steps, reward, csv_label=False)
    assert r.status == "untrusted" and r.reason.startswith("U3: the reward level fell to 0.05")
    # the user's word (a labels-CSV row) decides: healthy, not U3
    given = label_run("e1", None, steps, reward, {"kind": "", "onset": None, "collapse": None})
    assert given.undecided == "" and classify("p", given, steps, reward, csv_label=True).status == "healthy"
    # the same run with 10 more low points: sustained → collapsed at 45, decided
    longer = np.r_[reward, np.full(10, .05)]
    lab = label_run("e2", None, np.arange(64), longer)
    assert (lab.collapse, lab.undecided) == (45, "")


def test_cli_json_markdown_and_trust_file(corpora, tmp_path):
    from typer.testing import CliRunner

    from collapsewatch.cli import app
    from collapsewatch.trust import headline_table, load, markdown_table, trust_line

    _, _, root = corpora
    args = ["lab", "bench", "--public", str(root / "public-store"), "--public-dir", str(root / "public"),
            "--no-sample", "--store", f"gamma={root / 'gamma-store'}"]
    # bmiss has no raw file: --trust-out is refused (nothing written) until --partial says to write it anyway
    refused = CliRunner().invoke(app, [*args, "--trust-out", str(tmp_path / "trust.json")])
    assert refused.exit_code == 1 and "--trust-out: 1 run(s) of the corpus are missing" in refused.output
    assert "--partial" in refused.output and "Traceback" not in refused.output
    assert not (tmp_path / "trust.json").exists()
    res = CliRunner().invoke(app, [*args, "--json", "--partial", "--trust-out", str(tmp_path / "trust.json")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    a = next(r for r in out["table"] if r["source"] == "all")
    assert (a["flagged_pooled"], a["flagged_held"]) == (2, 1)  # as test_pooled_and_held_out_figures
    assert [u["run"] for u in out["untrusted"]] == ["gu1"] and [m["run"] for m in out["missing"]] == ["bmiss"]
    assert "STORE" in out["command"] and str(root) not in out["command"]  # no machine path in the record
    data = load(tmp_path / "trust.json")
    # scored: oh1, ac1, bh1, bh2, bc1 (public) + gh1…gh8, gc1, gu1 (gamma) = 15; missing: bmiss
    assert (data["runs_used"], data["runs_missing"]) == (15, 1)
    assert "**Partial:** 1 run(s) of the corpus were missing; 15 were scored." in markdown_table(data)
    # 1 of 11 = 9.1 %, 2 of 3 = 67 %, with the intervals of test_trust_rows_by_hand ([0, 1] each)
    assert trust_line("grad", "explosion", "warning", data) == (
        "fired on 1 of 11 healthy runs (9.1 %, 95 % interval by source 0–100 %); preceded 2 of 3 collapses "
        "(67 %, 0–100 %; 1 as a held-out specific flag)")
    assert trust_line("length", "blowup", "critical", data) == "no benchmark figures for this alarm"
    text = CliRunner().invoke(app, args)
    # the text output: under the table, each group row's held-out misses by why (no split here: "all" alone; 3
    # collapsed − 1 flagged held out = 2, as test_pooled_and_held_out_figures)
    assert text.exit_code == 0 and "  all: 2 of 3 — not specific 1, late 1" in text.stdout.splitlines()
    md = CliRunner().invoke(app, [*args, "--markdown"])
    # --markdown: the headline table, a blank line, the trust table (their "Bench of …" first lines aside)
    def body(text):
        return [line for line in text.splitlines() if not line.startswith("Bench of")]

    assert md.exit_code == 0 and body(md.stdout) == body(headline_table(data) + "\n" + markdown_table(data))
    # the data file keeps the group rows: no split here, so "all" alone, its figures those of the table above
    # (flagged held out 1, test_pooled_and_held_out_figures; healthy warned 1 of 11: oh1)
    assert [r["source"] for r in data["headline"]] == ["all"]
    assert (data["headline"][0]["flagged_held"], data["headline"][0]["healthy_alarmed"]) == (1, 1)
    assert ("| `grad` / `explosion` | warning | 1 of 11 (9.1 %, 0–100 %) | 2 of 3 (67 %, 0–100 %) | 1 of 3 | 2 of 4 |"
            in md.stdout)


def test_bad_store_is_one_line():
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    res = CliRunner().invoke(app, ["lab", "bench", "--no-sample", "--store", "x=no-such-store"])
    assert res.exit_code == 1 and "does not exist" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["lab", "bench", "--no-sample", "--store", "nameless"])
    assert res.exit_code == 1 and "expected NAME=PATH" in res.output


def test_public_sources_take_the_source_column_else_the_repository(tmp_path):
    from collapsewatch.lab.bench_sources import public_sources

    (tmp_path / "sources.csv").write_text("run,file,repo,source\nr1,r1.log,o/a,\nr2,r2.json,o/b,paper-x\n")
    assert [(r["run"], r["source"]) for r in public_sources(tmp_path)] == [("r1", "o/a"), ("r2", "paper-x")]
    (tmp_path / "sources.csv").write_text("run,path\nr1,x\n")
    with pytest.raises(ValueError, match="expected columns run, file, repo"):
        public_sources(tmp_path)


def test_the_split_file_is_the_default_tuned_on_list(corpora, tmp_path):
    import shutil

    from typer.testing import CliRunner

    from collapsewatch.cli import app

    _, _, root = corpora
    pub = tmp_path / "public"
    shutil.copytree(root / "public", pub)
    # alpha/x a rule was chosen on; sample_runs too, but this bench leaves the sample runs out (--no-sample)
    (pub / "tuned_on.csv").write_text("source,since,rule chosen on it\nalpha/x,2026-11-28,r1\nsample_runs,,r1\n")
    args = ["lab", "bench", "--public", str(root / "public-store"), "--public-dir", str(pub), "--no-sample",
            "--store", f"gamma={root / 'gamma-store'}", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["split"]["tuned_on"] == ["alpha/x"] and out["split"]["absent"] == ["sample_runs"]
    assert "--tuned-on" not in out["command"]  # the file is the default: the same command reproduces it
    rows = {r["source"]: r for r in out["table"]}
    # the rows of test_pooled_and_held_out_figures' split on alpha/x
    assert (rows["tuned on (1 source(s))"]["flagged_held"], rows["tuned on (1 source(s))"]["healthy"]) == (1, 0)
    other = rows["not tuned on (3 source(s))"]
    assert (other["collapsed"], other["flagged_held"], other["healthy"], other["healthy_alarmed"]) == (2, 0, 11, 1)
    # group rows carry 95 % intervals over their sources (bench_intervals; a source's own row none, nor a share with
    # nothing to count: the tuned side has no healthy run). 0 of 2 collapses flagged held out: a share of 0 takes
    # Wilson's bound, [0, z²/(2 + z²)] = [0, 3.8415/5.8415] = [0, 0.6576]
    assert other["flagged_held_ci"] == pytest.approx([0.0, 3.8415 / 5.8415], abs=1e-4)
    assert rows["tuned on (1 source(s))"]["healthy_alarmed_ci"] is None and rows["alpha/x"].get("flagged_held_ci") is None
    lo, hi = other["healthy_alarmed_ci"]
    assert lo <= 1 / 11 <= hi
    text = CliRunner().invoke(app, args[:-1])
    assert text.exit_code == 0 and "95 % intervals over sources" in text.output
    assert "not tuned on (3 source(s)): flagged ≤ collapse 0/2 (0.0 %) [0–66 %]" in text.output
    # the per-class table prints its intervals as text (grad/explosion warning: [0, 1] as "0–100 %"), not as lists
    assert "per flag class" in text.output and "[0.0, 1.0]" not in text.output and "0–100 %" in text.output
    # the trust table's head names the split (the folder is a machine path here: the file's name alone)
    md = CliRunner().invoke(app, [*args[:-1], "--markdown"])
    assert "Split: the 1 source(s) of `tuned_on.csv` tuned on, every other source held out." in md.stdout
    # --tuned-on overrides the file
    res = CliRunner().invoke(app, [*args, "--tuned-on", "beta/y"])
    out = json.loads(res.stdout)
    assert out["split"] == {"from": "--tuned-on", "tuned_on": ["beta/y"], "absent": []}
    assert "tuned on (1 source(s))" in {r["source"] for r in out["table"]}
    # a split file without its column: one line naming the file
    (pub / "tuned_on.csv").write_text("repo\nalpha/x\n")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1 and "tuned_on.csv" in res.output and "'source'" in res.output
    assert "Traceback" not in res.output


def test_tuned_only_shows_the_tuned_on_sources_only(corpora, tmp_path):
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    _, _, root = corpora
    args = ["lab", "bench", "--public", str(root / "public-store"), "--public-dir", str(root / "public"), "--no-sample",
            "--store", f"gamma={root / 'gamma-store'}", "--tuned-on", "alpha/x", "--json", "--runs"]
    full = json.loads(CliRunner().invoke(app, args).stdout)
    assert "not tuned on (3 source(s))" in {r["source"] for r in full["table"]} and full["trust"]
    res = CliRunner().invoke(app, [*args, "--tuned-only"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # the split of test_the_split_file_is_the_default_tuned_on_list: alpha/x tuned on, 3 sources held out. With
    # --tuned-only only alpha/x's row and the group row over it remain, with the same figures as in the full bench;
    # no held-out or "all" row, no trust row (they pool every source), no held-out run
    group = "tuned on (1 source(s))"
    assert [r["source"] for r in out["table"]] == ["alpha/x", group]
    assert out["table"] == [r for r in full["table"] if r["source"] in ("alpha/x", group)]
    assert [h["source"] for h in out["headline"]] == [group] and out["trust"] == [] and out["tuned_only"] is True
    assert {r["source"] for r in out["runs"]} == {"alpha/x"} and out["runs"] == [
        r for r in full["runs"] if r["source"] == "alpha/x"]
    assert set(out["sources"]) == {"alpha/x"} and out["runs_used"] == len(out["runs"])
    assert all(m["source"] == "alpha/x" for m in out["missing"])
    # the text form prints no held-out row either
    text = CliRunner().invoke(app, [a for a in args if a not in ("--json", "--runs")] + ["--tuned-only"])
    assert text.exit_code == 0 and "not tuned on" not in text.output and "per flag class" not in text.output
    # what needs every source is refused in one line; so is a bench with nothing tuned on
    for extra in (["--markdown"], ["--trust-out", str(tmp_path / "t.json")]):
        bad = CliRunner().invoke(app, [*args, "--tuned-only", *extra])
        assert bad.exit_code == 1 and "--tuned-only" in bad.output and "Traceback" not in bad.output
    none = CliRunner().invoke(app, [a for a in args if a not in ("--tuned-on", "alpha/x")] + ["--tuned-only"])
    assert none.exit_code == 1 and "no source is tuned on" in none.output


def test_a_reward_only_log_is_counted_apart_as_blind(tmp_path):
    # One --store source "delta", through the real path: dc1 and db1 collapse at step 40 (labels CSV); dc1 logs
    # grad_norm with a warning at point 25 (dated 27, when it stood at warning: module doc), db1 logs only the reward
    # (no signal column: blind); dh1, dh2 healthy and quiet, with grad_norm; dq1 healthy, reward only. Pooled H =
    # {dh1, dh2, dq1}: the grad class fired on 0 of 3 → specific, so dc1 is flagged (27 ≤ 40) and db1 is not. collapsed 2, flagged 1; collapsed with
    # a signal 1 (dc1), flagged of those 1. Held out: delta's fold has no healthy run of another source → nothing
    # specific → 0 and 0.
    store, labels = tmp_path / "delta-store", tmp_path / "delta.csv"
    runs = {"dc1": _series(warning=25), "dh1": _series(), "dh2": _series(),
            "db1": [{"step": r["step"], "reward_mean": r["reward_mean"]} for r in _series()],
            "dq1": [{"step": r["step"], "reward_mean": r["reward_mean"]} for r in _series()]}
    for run, rows in runs.items():
        _write_jsonl(tmp_path / f"{run}.jsonl", rows)
        ingest_file(store, tmp_path / f"{run}.jsonl", run)
    labels.write_text("run,kind,onset,collapse\ndc1,,,40\ndb1,,,40\ndh1,,,\ndh2,,,\ndq1,,,\n")
    bench = gather(None, tmp_path, None, [f"delta={store}"], [f"delta={labels}"], None)
    assert {r.run: r.blind for r in bench.runs} == {"db1": True, "dc1": False, "dh1": False, "dh2": False, "dq1": True}
    row = bench_table(run_records(bench.runs, bench.flags)).set_index("source").loc["delta"]
    assert (row["collapsed"], row["flagged_pooled"], row["collapsed_signal"], row["flagged_signal_pooled"]) == (2, 1, 1, 1)
    assert (row["flagged_held"], row["flagged_signal_held"]) == (0, 0)
    # healthy: dh1, dh2 log grad_norm (2 with a signal), dq1 only the reward (quiet by construction); none warned
    assert (row["healthy"], row["healthy_signal"], row["healthy_alarmed_signal"]) == (3, 2, 0)
