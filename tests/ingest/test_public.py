"""The public-runs corpus's committed raw files (lab/public/raw: two MIT verl console logs, one Apache-2.0 TRL console
log), ingested as they were saved. Step values are read by hand from the files' ``step:1 - …`` lines and printed
dicts; the detector outcomes are the ones docs/lab/public_runs.md reports."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path

import pytest

from collapsewatch import connect
from collapsewatch.ingest import ingest_file
from collapsewatch.offline import detect_runs

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"
SOURCES = {r["run"]: r for r in csv.DictReader((PUBLIC / "sources.csv").open())}
COMMITTED = [run for run, r in SOURCES.items() if r["raw_in_repo"] == "yes"]
VERL = ["verl-q7b-math", "verl-q7b-math-megatron"]


@pytest.mark.parametrize("run", COMMITTED)
def test_committed_raw_files_are_the_recorded_ones(run):
    raw = gzip.decompress((PUBLIC / "raw" / SOURCES[run]["file"]).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == SOURCES[run]["sha256"]


def test_verl_console_logs_of_the_corpus(store):
    # verl-q7b-math, step 1: actor/entropy:0.354 - critic/score/mean:0.433 - response_length/mean:308.049 -
    # response_length/clip_ratio:0.036; 211 step lines (step 0 is the validation before training).
    # verl-q7b-math-megatron, step 1: actor/entropy:0.336 - critic/score/mean:0.259 - response_length/mean:198.191 -
    # response_length/clip_ratio:0.002
    done = {run: ingest_file(store, PUBLIC / "raw" / SOURCES[run]["file"], run) for run in VERL}
    assert {run: (d.format, d.steps) for run, d in done.items()} == {
        "verl-q7b-math": ("console", 211), "verl-q7b-math-megatron": ("console", 106)}
    con = connect(store)
    got = con.execute("SELECT run, entropy_mean, reward_mean, response_length_mean, truncated_frac FROM steps "
                      "WHERE step = 1 ORDER BY run").fetchall()
    assert got == [("verl-q7b-math", 0.354, 0.433, 308.049, 0.036), ("verl-q7b-math-megatron", 0.336, 0.259, 198.191,
                                                                       0.002)]
    events = detect_runs(store)
    warned = sorted({(r, f"{d}/{p}") for r, d, p, s in events[["run", "detector", "phase", "severity"]].itertuples(
        index=False) if s != "info"})
    # the reference math run: half its responses are truncated late in the run, while its reward keeps rising to
    # its best (0.94–0.96 at steps 168–210): responses grew into the budget — a length/blowup at info, no warning;
    # its entropy falls to a 0.012-nat level at reward 0.95, above entropy.collapse_abs 0.01 (0.05 warned on it);
    # the Megatron run: no warning
    assert warned == []
    blowup = events[(events["run"] == "verl-q7b-math") & (events["phase"] == "blowup")]
    assert set(blowup["severity"]) == {"info"} and "while the reward has not stayed down" in blowup["message"].iloc[0]


def test_the_trl_length_collapse_of_the_corpus(store):
    # trl-dapo-vl3b (the run issue 22 was filed on): 49 printed training dicts. Read by hand from the first two:
    # {'completions/mean_length': 53.35, 'reward': 1.75, 'frac_reward_zero_std': 0.4, 'entropy': 0.9559141263365746,
    #  'completions/clipped_ratio': 0.0, ...} then {'completions/mean_length': 2.6, 'reward': 3.6,
    #  'frac_reward_zero_std': 1.0, 'entropy': 0.43631379008293153, ...}: the length collapses at the 2nd step.
    done = ingest_file(store, PUBLIC / "raw" / SOURCES["trl-dapo-vl3b"]["file"], "trl-dapo-vl3b")
    assert (done.format, done.steps) == ("console", 49)
    got = connect(store).execute(
        "SELECT step, response_length_mean, reward_mean, zero_std_group_frac, entropy_mean, truncated_frac FROM steps "
        "WHERE run = 'trl-dapo-vl3b' AND step <= 2 ORDER BY step").fetchall()
    assert got == [(1, 53.35, 1.75, 0.4, 0.9559141263365746, 0.0), (2, 2.6, 3.6, 1.0, 0.43631379008293153, 0.0)]
    events = detect_runs(store)
    warned = sorted({(d, p, s, int(st)) for d, p, s, st in events[["detector", "phase", "severity", "step_start"]]
                     .itertuples(index=False) if s != "info"})
    # 70-100 % of the 2-response groups score equal from step 2, but the log has no correctness column and the
    # reward's level is read against its own range (up to 3.7): near the top it is a solved task, elsewhere "cannot
    # tell" — info either way, no longer a warning that fires on healthy runs too. The collapse itself: 2.6 tokens
    # ≤ 0.1 × 53.35 (the longest of the first 5 points) = 5.3 → the abrupt length collapse holds from step 2 and
    # opens at step 4 (3rd consecutive point), a warning; 2.25–2.6 tokens stays above the ≤ 2-token degenerate bar.
    # The entropy's early collapse (fewer than 20 points): at 14 the median of steps 12–14 (0.109, 0.048, 0.0785) is
    # 0.0785 ≤ 0.1 × 0.956 (the highest of the first 5 points, step 1) = 0.0956 — at 13 median(0.101, 0.109, 0.048)
    # = 0.101 was not. The reward level (2.2 in its range up to 3.7) is not the top: not solved; no correctness, so
    # the reward tells whether it holds (signals.reward_drop). Its 14 points 1.75, 3.6, 2.7, 2.0, 3.7, 2.9, 3.1, 3.3,
    # 2.5, 1.8, 2.2, 2.0, 2.6, 2.4: best 5-point level 3.1 (steps 4–8), now 2.2 (steps 10–14), a drop of 0.9 ≥ the plain
    # margin 0.25 × 3.1 = 0.775. The 13 differences have median −0.2 and absolute deviations whose median is 0.6:
    # per-point noise 1.4826 · 0.6 / √2 = 0.629, a level's 1.2533 · 0.629 / √5 = 0.353, × noise_z 3 = 1.058 > 0.9 →
    # within the reward's noise, the reward holds: a converging policy as far as the reward can tell → info (a
    # warning before session 47, when the plain margin alone decided). The length collapse is the warning.
    assert warned == [("length", "collapse", "warning", 4)]
    entropy = events[(events["detector"] == "entropy") & (events["phase"] == "collapse")]
    assert list(entropy["step_start"]) == [14] and set(entropy["severity"]) == {"info"}
    starv = events[events["detector"] == "starvation"]
    assert len(starv) and set(starv["severity"]) == {"info"}


def test_the_tinker_cookbook_run_of_the_corpus(store):
    # tinker-arithmetic: tinker-cookbook's own metrics.jsonl, 100 rows. Read by hand from its first line:
    # "env/all/reward/total": 0.67625, "env/all/correct": 0.695, "env/all/ac_tokens_per_turn": 4.9175,
    # "optim/entropy": 0.7731558680534363, "optim/lr": 0.0001 (collapsewatch.ingest.keys maps each).
    done = ingest_file(store, PUBLIC / "raw" / SOURCES["tinker-arithmetic"]["file"], "tinker-arithmetic")
    assert (done.format, done.steps) == ("jsonl", 100)
    con = connect(store)
    got = con.execute("SELECT reward_mean, correct_frac, response_length_mean, entropy_mean, lr FROM steps "
                      "WHERE step = 0").fetchall()
    assert got == [(0.67625, 0.695, 4.9175, 0.7731558680534363, 0.0001)]
    # its entropy falls to 1e-4 nats (step 20: 0.000143) while correct_frac sits at 1.0: a converged policy on a
    # task it solves — entropy degenerate and collapse at info (entropy.solved_correct), no warning; before that
    # rule the run was marked critical (docs/lab/bench.md)
    events = detect_runs(store)
    assert sorted(set(events["severity"])) == ["info"]
    assert {"degenerate", "collapse"} <= set(events[events["detector"] == "entropy"]["phase"])


def test_the_tinker_cookbook_collapse_its_authors_date(store):
    # tinker-dph-iter05 (dphuang2/tinker-cookbook; its authors: "catastrophically collapses to 0% correct by step 7").
    # Read by hand from its line for step 6: "env/all/ac_tokens_per_turn": 506.71875, "env/all/reward/total":
    # -0.03437499999999999, "env/all/correct": 0.0625, "env/all/by_group/frac_mixed": 0.125, "optim/entropy":
    # 0.37378886342048645 → zero_std_group_frac = 1 − 0.125 = 0.875 (collapsewatch.ingest.keys: the complement).
    done = ingest_file(store, PUBLIC / "raw" / SOURCES["tinker-dph-iter05"]["file"], "tinker-dph-iter05")
    assert (done.format, done.steps) == ("jsonl", 30)
    got = connect(store).execute("SELECT response_length_mean, reward_mean, correct_frac, zero_std_group_frac, "
                                 "entropy_mean FROM steps WHERE step = 6").fetchall()
    assert got == [(506.71875, -0.03437499999999999, 0.0625, 0.875, 0.37378886342048645)]
    # frac_mixed at steps 2–8: 0.1875, 0.5625, 0.375, 0.125, 0.125, 0, 0 → zero_std 0.8125, 0.4375, 0.625, 0.875,
    # 0.875, 1, 1. Its 5-point median is 0.625 at 5 and 0.8125 at 6 (≥ starvation.warn_frac 0.8), 0.875 at 7 and 8:
    # the rule holds from 6 and opens there (starvation's confirm_steps is 1: the median is the confirmation) — one
    # point before the authors' step 7. Every group is all-wrong from 7 (correct 0, reward
    # −0.1 on 22 of the 23 points from 7) — starved, not solved — and zero_std is 1.0 at steps 10–29, so the mean of
    # the last critical_window (20) points reaches critical_frac 0.95 by the run's end: critical by the rule. The
    # severity gate keeps a critical only once the reward's fall has lasted severity.sustain_steps (90) steps: its
    # levels are below the best from step 6, and the log ends at 29 (24 steps) — a warning to the end.
    events = detect_runs(store)
    warned = sorted({(d, p, s, int(st)) for d, p, s, st in events[["detector", "phase", "severity", "step_start"]]
                     .itertuples(index=False) if s != "info"})
    assert warned == [("starvation", "starvation", "warning", 6)]
    last = events[events["detector"] == "starvation"].iloc[-1]
    gate = json.loads(last["evidence"])["severity_gate"]
    assert (gate["lowered_from"], gate["fallen_since"], gate["fallen_steps"]) == ("critical", 6, 24)
    assert "for 24 steps, fewer than 90)" in last["message"]
