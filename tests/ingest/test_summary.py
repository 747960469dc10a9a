"""What ``collapsewatch ingest`` tells the user, through the real CLI on a real store: the catalogue columns its keys
filled (and, with no reward, the keys that fill nothing), a details command naming the store and run as given, and a
run the detectors judged at ingest reading as judged by today's rules — no ``*``, no note — in ``runs`` and
``detect``; one ingested with ``--no-detect`` still reads as not judged."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from collapsewatch.cli import app

ROWS = [{"step": s, "reward": 0.5, "entropy": 1.0, "my_metric": 3.0} for s in range(1, 6)]


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_an_ingested_run_reads_as_judged_by_todays_rules(tmp_path):
    store = tmp_path / "my runs"  # a space: the commands printed must quote it
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    _cli("ingest", str(store), str(log), "--run", "judged")
    _cli("ingest", str(store), str(log), "--run", "unjudged", "--no-detect")

    # 5 flat reward points: healthy; the detectors ran at ingest on `judged` and found nothing, under today's rules,
    # so its (no) stored episodes are shown as they are; `unjudged`'s are computed on read
    rows = json.loads(_cli("runs", str(store), "--json"))
    assert {r["run"]: (r["verdict"], r["events_computed"]) for r in rows} == {
        "judged": ("healthy", False), "unjudged": ("healthy", True)}
    runs = _cli("runs", str(store))
    assert "healthy*" in runs and runs.count("*") == 2  # one starred verdict, one footnote
    # the footnote is for the one starred run: the command names it and the store as given
    assert f"`collapsewatch detect {shlex.quote(str(store))} --run unjudged --recorded` shows what it stored" in runs

    detect = _cli("detect", str(store), "--run", "judged")
    assert "note:" not in detect and "recorded without a rules digest" not in detect
    assert "recorded without a rules digest" in _cli("detect", str(store), "--run", "unjudged")


def test_the_details_command_names_the_store_as_given(tmp_path):
    store = tmp_path / "my runs"
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = _cli("ingest", str(store), str(log), "--run", "r1")
    assert f"detectors: no warning (details: collapsewatch detect '{store}' --run r1)" in out


def test_the_summary_names_the_catalogue_columns_filled(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = _cli("ingest", str(tmp_path / "st"), str(log), "--run", "r1", "--no-detect")
    # TRL's `reward` fills reward_mean, `entropy` entropy_mean (docs/ingest.md's key table; catalogue order);
    # my_metric fills nothing, and since the reward is there that is not said
    assert "catalogue columns filled: entropy_mean, reward_mean\n" in out
    assert "no key filled reward_mean" not in out


def test_a_log_whose_keys_fill_no_reward_says_which_keys_fill_nothing(tmp_path):
    # rfs-style CSV columns: none is a key docs/ingest.md's table maps; `loss` fills the catalogue's loss
    f = tmp_path / "rfs.csv"
    f.write_text("step,reward_avg,entropy_avg,loss\n1,0.5,1.0,0.3\n2,0.6,0.9,0.2\n")
    out = _cli("ingest", str(tmp_path / "st"), str(f), "--run", "rfs", "--no-detect")
    assert "catalogue columns filled: loss\n" in out
    assert ("no key filled reward_mean (the reward the verdict judges); keys that fill no catalogue column: "
            "entropy_avg, reward_avg: map the reward's key with --map KEY=reward_mean, or rename it to one of "
            "docs/ingest.md's key table") in out


def test_a_follow_that_read_nothing_says_nothing_of_keys(tmp_path):
    from collapsewatch.ingest import Tail

    log = tmp_path / "live.jsonl"
    log.write_bytes(b"")  # the logger has created its file and written nothing yet
    done = Tail(tmp_path / "st", log, "live").close(run_detectors=True)
    assert done.message(tmp_path / "st", "live") == "ingested 0 step(s) of jsonl into run 'live'"


def test_the_detectors_line_dates_an_alarm_when_the_verdict_does(tmp_path):
    # A grad norm flat near 1 for steps 1–59, then 100 from step 60 on: the spike opens a grad/explosion episode at
    # 60 (info: one point up), which turns warning once it stays up (rule: still up a few logged points after the
    # spike). The verdict dates the warning at the step it stood at warning ("Warning from step N"); the ingest line
    # named the episode's first step, 60, instead — two steps for one alarm. Now both name N, after 60
    log = tmp_path / "g.jsonl"
    log.write_text("".join(json.dumps({"step": s, "grad_norm": 1.0 + 0.01 * (s % 5) if s < 60 else 100.0,
                                       "reward": 0.5}) + "\n" for s in range(1, 81)))
    out = _cli("ingest", str(tmp_path / "st"), str(log), "--run", "g")
    *episodes, verdict = json.loads(_cli("detect", str(tmp_path / "st"), "--run", "g", "--json"))
    [episode] = episodes
    assert (episode["detector"], episode["severity"], episode["step_start"]) == ("grad", "warning", 60)
    n = verdict["first_warning_step"]
    assert n > 60 and verdict["sentence"].startswith(f"Warning from step {n}: gradient explosion.")
    assert f"detectors: grad/explosion warning @{n} (details:" in out


def test_the_summary_says_the_verdict_and_that_a_reward_only_log_is_watched_by_its_reward_alone(tmp_path):
    # A JSON list of 60 log dicts, reward 0.5 at steps 0–29 and 0.0 at 30–59, nothing else. The reward level is the
    # median of the last 10 points; its noise is 0 (every difference but one is 0, so their MAD is 0), so the best is
    # the level 0.5. At step 34 the window 25–34 holds five 0.5 and five 0.0: median 0.25 ≤ 0.5 × 0.5, and it stays
    # down to the end — "Collapsed at step 34". No column a detector reads comes before the fall: no episode.
    log = tmp_path / "log_history.json"
    log.write_text(json.dumps([{"step": s, "reward": 0.5 if s < 30 else 0.0} for s in range(60)]))
    store = tmp_path / "st"
    out = _cli("ingest", str(store), str(log), "--run", "blind")
    [line] = [x for x in out.splitlines() if x.startswith("verdict: ")]
    assert line.startswith("verdict: Collapsed at step 34 (reward 0.50 → 0.00). No warning before it. Note: the log ")
    assert line.endswith("only the reward is watched.")
    # the same sentence detect prints first, from one home (collapsewatch.verdict)
    assert _cli("detect", str(store), "--run", "blind").splitlines()[0] == "blind: " + line.removeprefix("verdict: ")
    assert "detectors: no warning (details:" in out
    # --no-detect judges nothing at ingest: no verdict line
    assert "verdict:" not in _cli("ingest", str(store), str(log), "--run", "later", "--no-detect")


def test_a_log_of_every_kth_step_names_its_first_and_last_step(tmp_path):
    # 5 rows logged at steps 10, 20, …, 50 (a trainer's logging_steps=10): 5 logged steps spanning steps 10–50, the
    # span the verdict counts ("No warning in 41 steps"); rows at steps 1–5 span 5 steps: nothing more is said
    sparse, dense = tmp_path / "sparse.jsonl", tmp_path / "dense.jsonl"
    sparse.write_text("".join(json.dumps({"step": 10 * k, "reward": 0.5}) + "\n" for k in range(1, 6)))
    dense.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = _cli("ingest", str(tmp_path / "st"), str(sparse), "--run", "k")
    assert out.startswith("ingested 5 step(s) of jsonl into run 'k' (steps 10 to 50)\n")
    assert "verdict: No warning in 41 steps;" in out
    out = _cli("ingest", str(tmp_path / "st"), str(dense), "--run", "d", "--no-detect")
    assert out.startswith("ingested 5 step(s) of jsonl into run 'd'\n")
