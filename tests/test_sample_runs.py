"""The shipped sample runs tell one story everywhere (issue 25): their stored episodes are today's rules' own (equal
to offline detection now, whatever the rules are), and `detect --json`, `runs --json`, `watch --json --once` and
the run page's data layer give the same episodes and the same verdict for every run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from collapsewatch.detectors import detect_frame
from collapsewatch.judge import judge
from collapsewatch.offline import run_steps
from collapsewatch.store import Store
from collapsewatch.store.queries import run_events, run_names
from tests.conftest import cli as in_process_cli

SAMPLES = Path(__file__).resolve().parents[1] / "sample_runs" / "store"
KEY = ("detector", "phase", "step_start", "step_end", "severity")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return in_process_cli(*args)  # in this process: what the command prints and returns (tests.conftest.cli)


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("samples") / "store"
    shutil.copytree(SAMPLES, root)  # a copy: nothing here may change the shipped store
    return root


@pytest.fixture(scope="module")
def runs(samples) -> list[str]:
    s = Store(samples)
    try:
        return run_names(s)
    finally:
        s.close()


def test_the_shipped_store_passes_check():
    # a new user's `collapsewatch check sample_runs/store` (read-only without --repair): every table of today's schema
    # has its typed empty file under _schema (make_sample_runs.py --events writes a table added since: the sentinels
    # table was missing, and check said so with exit 1), so "no bad files", exit 0
    res = _cli("check", str(SAMPLES))
    assert res.returncode == 0 and "no bad files" in res.stdout, res.stdout + res.stderr


def test_stored_episodes_are_todays_rules_own(samples, runs):
    """Fails after a detector rule or default changes until the sample runs are re-recorded: `make sample-events`
    (or `make sample-runs` to re-train them)."""
    s = Store(samples)
    try:
        assert len(runs) == 7
        for run in runs:
            stored = run_events(s, run)
            fresh = [tuple(getattr(e, k) for k in KEY) for e in detect_frame(run_steps(s, run, 0))]
            assert sorted(tuple(r) for r in stored[list(KEY)].itertuples(index=False)) == sorted(fresh), \
                f"{run}: stored episodes differ from today's rules: run `make sample-events`"
            j = judge(s, run)
            assert not j.computed and j.note == "", run
    finally:
        s.close()


def test_the_run_page_and_the_runs_page_show_the_same_episodes_and_verdict(samples, runs):
    from collapsewatch.dashboard import history, live, state
    from collapsewatch.dashboard.timeline import row_label

    state.configure(samples)
    history.clear()
    try:
        with state.borrow() as s:
            table = history.run_table(s, ("reward_mean",)).set_index("run")
            want = {run: judge(s, run) for run in runs}
        for run, j in want.items():
            page = live.load(run, smooth=1)
            assert page["verdict"] == {**j.verdict.as_dict(), "shown": j.verdict.shown, "note": j.note,
                                       "computed": j.computed}, run
            shown = [(r["what"], r["steps"], r["severity"]) for r in page["events"]]
            expected = [(row_label(e["detector"], e["phase"]),
                         f"{e['step_start']}–{e['step_end']}" if e["step_end"] > e["step_start"] else
                         str(e["step_start"]), e["severity"]) for e in j.events.to_dict("records")]
            assert sorted(shown) == sorted(expected), run
            assert (table.loc[run, "verdict_sentence"], table.loc[run, "n_events"]) == (j.verdict.sentence,
                                                                                        len(j.events)), run
    finally:
        history.clear()


def test_the_runs_page_runs_and_the_verdict_show_one_best_reward(samples, runs):
    """The reward now / best / best-at / collapse step: the verdict's own (the 10-point median reward level of
    collapsewatch.lab.labels), on the runs page's grid, in `runs --json` (report.runs_table) and in the sentence."""
    from collapsewatch.dashboard import history, state, tables
    from collapsewatch.report import runs_table

    state.configure(samples)
    history.clear()
    try:
        with state.borrow() as s:
            grid = {r["name"]: r for r in tables.runs_rows(history.run_table(s, ("reward_mean",)))}
            cli = runs_table(s)[1].set_index("run")
            want = {run: judge(s, run).verdict for run in runs}
    finally:
        history.clear()
    for run, v in want.items():
        assert v.reward_before is not None and v.reward_best_step is not None, run  # every sample run has a best
        row = grid[run]
        assert (row["reward_best"], row["reward_best_at"], row["reward_now"], row["collapse_step"]) == \
            (v.reward_before, f"step {v.reward_best_step}", v.reward_after, v.collapse_step), run
        got = cli.loc[run]
        assert (got["reward_before"], got["reward_best_step"], got["reward_after"]) == \
            (v.reward_before, v.reward_best_step, v.reward_after), run
        # the sentence names the same best, at 2 decimals: "reward best 0.80 at 199" / "(reward 0.42 → 0.07)"
        assert (f"{v.reward_before:.2f} at {v.reward_best_step}" in v.sentence if v.collapse_step is None
                else f"reward {v.reward_before:.2f} → " in v.sentence), run


def _keys(rows) -> list[tuple]:
    return sorted(tuple(r[k] for k in KEY) for r in rows)


def test_detect_runs_and_watch_agree_on_every_sample_run(samples, runs):
    s = Store(samples)
    try:
        want = {run: judge(s, run) for run in runs}
    finally:
        s.close()
    detect = json.loads(_cli("detect", str(samples), "--json").stdout)
    watch = [json.loads(line) for line in _cli("watch", str(samples), "--json", "--once", "--severity", "info")
             .stdout.splitlines()]
    table = {r["run"]: r for r in json.loads(_cli("runs", str(samples), "--json").stdout)}
    for run, j in want.items():
        expected = _keys(j.events.to_dict("records"))
        for name, objs in (("detect", detect), ("watch", watch)):
            events = [o for o in objs if o["type"] == "event" and o["run"] == run]
            verdicts = [o for o in objs if o["type"] == "verdict" and o["run"] == run]
            assert _keys(events) == expected, (name, run)
            assert len(verdicts) == 1 and verdicts[0]["sentence"] == j.verdict.sentence, (name, run)
            assert all(isinstance(o["evidence"], dict) for o in events)
        assert (table[run]["sentence"], table[run]["n_events"]) == (j.verdict.sentence, len(expected)), run
        assert (table[run]["reward_before"], table[run]["reward_best_step"]) == (j.verdict.reward_before,
                                                                                 j.verdict.reward_best_step), run


def test_the_sapo_search_drill_run_is_grpos_and_the_docs_say_so(samples):
    # SAPO-search's term acts on A ≥ 0 tokens with r ≤ τ = 0.8; the shipped drill's A>0 ratios never go that low
    # (lowest p01 0.81), so the two runs are equal on every step. README and docs/sample_runs.md must say so (s32 #8):
    # if the runs are ever re-recorded so that the term fires, this fails and those sentences need rewriting.
    from collapsewatch import connect

    con = connect(samples)
    differ = con.execute(
        "SELECT count(*) FROM steps a JOIN steps b ON a.step = b.step WHERE a.run = 'drill-lld-grpo' AND "
        "b.run = 'drill-lld-sapo_search' AND (a.reward_mean IS DISTINCT FROM b.reward_mean OR a.entropy_mean IS "
        "DISTINCT FROM b.entropy_mean OR a.ratio_p05_pos IS DISTINCT FROM b.ratio_p05_pos OR a.grad_norm IS "
        "DISTINCT FROM b.grad_norm)").fetchone()[0]
    steps = con.execute("SELECT count(*) FROM steps WHERE run = 'drill-lld-sapo_search'").fetchone()[0]
    low = con.execute("SELECT min(ratio_p01_pos) FROM steps WHERE run = 'drill-lld-sapo_search'").fetchone()[0]
    assert (differ, steps) == (0, 72) and low > 0.8
    root = Path(__file__).resolve().parents[1]
    assert "`drill-lld-sapo_search` equals `drill-lld-grpo` on all 72 steps" in " ".join(
        (root / "README.md").read_text().split())
    assert "`drill-lld-sapo_search` is `drill-lld-grpo` again" in (root / "docs" / "sample_runs.md").read_text()
