"""`collapsewatch watch`: each event once (again when its severity rises), JSON lines, notify POSTs to a local
receiver, a live writer followed to its end, and the exit code (2 when a critical fired)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fixtures.synthetic_store import Shape, SyntheticRun

from collapsewatch import Monitor
from collapsewatch.alerts import event_headline
from collapsewatch.follow import EXIT_CRITICAL, EventFollower
from collapsewatch.judge import judge
from collapsewatch.store import Store
from collapsewatch.webhooks import DIGEST_OVER, digest_text
from tests.conftest import cli

SMALL = Shape(seqs=8, token_seqs=2, seq_len=24)
RANK = {"info": 0, "warning": 1, "critical": 2}


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`collapsewatch watch ARGS` in this process (tests.conftest.cli); the live follower below is a real process."""
    return cli("watch", *args)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """A collapsing run (real detectors' events, criticals included) and a healthy one (no warning)."""
    root = tmp_path_factory.mktemp("watch")
    for name, kw in {"collapse": dict(n_steps=300), "healthy": dict(n_steps=60, collapse=False, seed=1)}.items():
        run = SyntheticRun(root, name, shape=SMALL, **kw)
        run.write()
        run.close()
    return root


def _stored(root, run: str, least: str) -> set[tuple]:
    """The episodes every reader shows (stored ones when today's rules found them: collapsewatch.judge)."""
    store = Store(root)
    ev = judge(store, run).events
    store.close()
    return {(r.detector, r.phase, r.step_start, r.severity) for r in ev.itertuples() if RANK[r.severity] >= RANK[least]}


def _verdict(root, run: str):
    store = Store(root)
    try:
        return judge(store, run).verdict
    finally:
        store.close()


def test_once_reports_each_stored_event_and_exits_2_on_critical(synth, receiver):
    p = _cli(str(synth), "--once", "--json", "--notify", receiver.url + "/hook")
    assert p.returncode == EXIT_CRITICAL, p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines()]
    lines = [e for e in out if e["type"] == "event"]
    got = {(e["detector"], e["phase"], e["step_start"], e["severity"]) for e in lines}
    assert got == _stored(synth, "collapse", "warning") and len(lines) == len(got)  # once each, healthy: none
    assert all(e["run"] == "collapse" and e["text"] and isinstance(e["evidence"], dict) for e in lines)
    # more than DIGEST_OVER (3) episodes in one check: one digest message listing the same payloads, in order
    assert len(lines) > DIGEST_OVER
    [(_, _, body), (_, _, collapse)] = receiver.got
    assert body == {"type": "digest", "text": digest_text([event_headline(e) for e in lines]), "events": lines}
    # then one verdict per run: the run page's and detect's (collapsewatch.judge); with --once nothing is printed
    # twice (the verdict line says the collapse), but the webhook gets the collapsed run's as a message of its own
    verdicts = {v["run"]: v for v in out[len(lines):]}
    assert out[:len(lines)] == lines and set(verdicts) == {"collapse", "healthy"}
    assert verdicts["collapse"]["sentence"] == _verdict(synth, "collapse").sentence
    assert verdicts["healthy"]["status"] == "healthy" and not verdicts["healthy"]["events_computed"]
    assert collapse == {**verdicts["collapse"], "type": "collapse"} and collapse["status"] == "collapsed"


def test_severity_filter_and_a_healthy_run_exit_0(synth):
    p = _cli(str(synth), "--run", "collapse", "--once", "--severity", "critical")
    assert p.returncode == EXIT_CRITICAL
    *events, verdict_line = p.stdout.splitlines()
    assert len(events) == len(_stored(synth, "collapse", "critical")) > 0
    assert all(" [critical] " in line for line in events)
    assert verdict_line == f"collapse: {_verdict(synth, 'collapse').sentence}"
    p = _cli(str(synth), "--run", "healthy", "--once")
    assert (p.returncode, p.stdout) == (0, f"healthy: {_verdict(synth, 'healthy').sentence}\n")


def test_an_unknown_run_with_once_is_an_error_naming_the_known_runs(synth):
    p = _cli(str(synth), "--run", "colapse", "--once", "--json")
    assert p.returncode == 1 and p.stdout == "" and "Traceback" not in p.stderr
    assert "run 'colapse' not found" in p.stderr and "known runs: collapse, healthy" in p.stderr


@pytest.mark.parametrize("args,message", [(["--severity", "bad"], "--severity must be one of"),
                                          (["--notify", "ftp://x"], "--notify must be an http"),
                                          (["--interval", "0"], "--interval must be > 0")])
def test_misuse_is_one_line_and_exit_1(synth, args, message):
    p = _cli(str(synth), "--once", *args)
    assert p.returncode == 1 and message in p.stderr and "Traceback" not in p.stderr


def test_not_a_store_is_one_line(tmp_path):
    p = _cli(str(tmp_path / "nope"), "--once")
    assert p.returncode == 1 and "does not exist" in p.stderr and "Traceback" not in p.stderr


def test_a_rising_severity_is_reported_again_and_nothing_twice(tmp_path):
    # grad_norm 1.0, then 8.0 at steps 40–42, 30.0 at 43 (median 1, bar 5): step 40 opens an info
    # episode (a spike), 41 keeps it info (2 points up < sustain_steps 3), 42 makes it a warning (3 points
    # still ≥ recover_factor 3 × median), 43 critical by the rule (peak ≥ 20 ×) — but no reward is logged, so
    # nothing shows harm and the severity gate keeps it a warning: not news at 43. Polled after each step: info,
    # then warning, each once; a poll with nothing new returns nothing.
    follower = None
    with Monitor(tmp_path, run="g", flush_steps=1) as mon:
        for step in range(46):
            mon.log(step, {"grad_norm": {40: 8.0, 41: 8.0, 42: 8.0, 43: 30.0}.get(step, 1.0)})
            if step >= 40:
                mon.log(step + 1, {})  # the step is finalised (and detected) when the next one starts
                mon.flush()
                follower = follower or EventFollower(tmp_path, "g", "info")
                got = [(e["phase"], e["step_start"], e["severity"]) for e in follower.poll()]
                expected = {40: [("explosion", 40, "info")], 42: [("explosion", 40, "warning")]}.get(step, [])
                assert got == expected, step
    assert not follower.critical and follower.poll() == [] and follower.ended


def test_a_reward_collapse_is_news_at_the_first_poll_that_sees_it_and_once(tmp_path, receiver):
    # A log that holds the reward alone: reward_mean 0.8 at steps 0–29, 0 from step 30 on. The verdict's level is the
    # trailing median of 10 points (collapsewatch.reward): at step 34 (steps 25–34: five 0.8, five 0) it is
    # (0 + 0.8) / 2 = 0.4 ≤ 0.5 × the best 0.8, so 34 is the collapse step; from 35 on the level is 0. It is a
    # collapse once 10 levels follow it (steps 35–44) with none back above 0.75 × 0.8 = 0.6: the poll after step 44
    # says it, the one after step 43 does not (too few points to tell a dip), and later polls say nothing new.
    from collapsewatch.alerts import verdict_headline
    from collapsewatch.sinks.webhook import WebhookSink

    follower, first = None, {}
    with Monitor(tmp_path, run="r", flush_steps=1, detectors=False) as mon:
        for step in range(50):
            mon.log(step, {"reward_mean": 0.8 if step < 30 else 0.0})
            mon.log(step + 1, {})  # the step is finalised (and written) when the next one starts
            mon.flush()
            if step >= 40:
                follower = follower or EventFollower(tmp_path, "r", "warning")
                follower.poll()
                for v in follower.collapses:
                    first.setdefault(step, []).append(v)
    assert list(first) == [44] and [v["collapse_step"] for v in first[44]] == [34]
    [v] = first[44]
    assert v["status"] == "collapsed" and v["sentence"].startswith("Collapsed at step 34")
    assert follower.poll() == [] and follower.collapses == [] and follower.ended  # said once, not at the end again
    # a webhook: the collapse as a message of its own, in the receiver's shape (any URL: the payload; Slack: the line)
    for url, expected in ((receiver.url, {**v, "type": "collapse"}),
                          ("slack:" + receiver.url, {"text": verdict_headline(v)})):
        sink = WebhookSink(url)
        sink.collapse(v)
        sink.close()
        (_, _, body) = receiver.got.pop()
        assert {k: body[k] for k in expected} == expected and sink.sent == 1
    assert verdict_headline(v) == f"r: {v['sentence']}"


def test_a_tracker_gets_the_verdict_when_the_collapse_is_seen_and_again_at_the_end(tmp_path):
    # The series above (collapsed at 34, first said by the poll after step 44). A tracker's collapse() writes the
    # verdict as it stands then; the final verdict is written again at the end; a collapse after the final verdict
    # (watch's last poll, a Monitor's close) writes nothing more. TensorBoard's text, read back with its own reader.
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator

    from collapsewatch.sinks import make_sink, run_verdict

    follower, mid = None, None
    with Monitor(tmp_path / "store", run="r", flush_steps=1, detectors=False) as mon:
        for step in range(50):
            mon.log(step, {"reward_mean": 0.8 if step < 30 else 0.0})
            mon.log(step + 1, {})
            mon.flush()
            if step >= 40:  # said at the poll after step 44 (the test above)
                follower = follower or EventFollower(tmp_path / "store", "r")
                follower.poll()
                mid = mid or (follower.collapses or [None])[0]
    final = run_verdict(tmp_path / "store", "r")
    assert mid["collapse_step"] == final["collapse_step"] == 34 and mid["last_step"] < final["last_step"]
    sink = make_sink(f"tensorboard:{tmp_path / 'tb'}")
    sink.collapse(mid)
    sink.verdict(final)
    sink.collapse(final)
    sink.close()
    acc = EventAccumulator(str(tmp_path / "tb" / "r"), size_guidance={TENSORS: 0})
    acc.Reload()
    texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("collapsewatch/verdict/text_summary")]
    assert texts == [(v["last_step"], f"**collapsed** — {v['sentence']}") for v in (mid, final)]


def test_follows_a_live_writer_to_its_end(tmp_path, receiver):
    # 300 steps: the reward falls from 55 % of the run on, and stays down past the severity gate's 90 steps
    live = SyntheticRun(tmp_path, "live", n_steps=300, shape=SMALL, flush_every=10, heartbeat_s=3600)
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch", "watch", str(tmp_path), "--run", "live",
                             "--json", "--interval", "0.2", "--notify", receiver.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for until in range(50, 301, 50):
        live.write(until=until)
    live.close()
    out, err = proc.communicate(timeout=180)  # it ends by itself once the run is finished
    assert proc.returncode == EXIT_CRITICAL, err
    *lines, verdict = [json.loads(line) for line in out.splitlines()]
    assert verdict["type"] == "verdict" and verdict["status"] == "collapsed"
    # the collapse: a line of its own if a poll saw it while the run was still writing (the poll's timing decides),
    # never twice; the webhook gets it once either way, as a message of its own
    said = [e for e in lines if e["type"] == "collapse"]
    lines = [e for e in lines if e["type"] == "event"]
    assert len(said) <= 1 and all(c["collapse_step"] == verdict["collapse_step"] for c in said)
    [posted] = [b for _, _, b in receiver.got if b.get("type") == "collapse"]
    assert (posted["run"], posted["collapse_step"]) == ("live", verdict["collapse_step"])
    receiver.got = [m for m in receiver.got if m[2].get("type") != "collapse"]
    keys = [(e["detector"], e["phase"], e["step_start"], e["severity"]) for e in lines]
    assert len(keys) == len(set(keys))  # nothing reported twice
    final = {(d, p, s): sev for d, p, s, sev in _stored(tmp_path, "live", "warning")}
    reported: dict[tuple, str] = {}
    for d, p, s, sev in keys:  # each report of an episode is a higher severity than its last
        if (d, p, s) in reported:
            assert RANK[sev] > RANK[reported[(d, p, s)]]
        reported[(d, p, s)] = sev
    assert reported == final
    # each poll's news is one message each, or one digest when more than DIGEST_OVER: every report sent once
    sent = [b["events"] if b.get("type") == "digest" else [b] for _, _, b in receiver.got]
    assert all(len(m) > DIGEST_OVER for m in sent if len(m) > 1)
    assert [e for m in sent for e in m] == lines


def test_ctrl_c_stops_a_watch_started_with_sigint_ignored(synth):
    # a run that has not started: watch waits for it (says so once), then Ctrl-C ends it with exit 0 — also when the
    # process was started with SIGINT ignored, as a background job or a child of a process that ignores it is
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch", "watch", str(synth), "--run", "later",
                             "--interval", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "not in the store yet: waiting" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()  # the assertion below says Ctrl-C did not stop it
            proc.wait()
    assert proc.returncode == 0


def test_the_shipped_sample_store(tmp_path):
    # real runs written by an older version of the store (before migration 0002): watch still reads them
    import shutil
    from pathlib import Path

    root = tmp_path / "store"
    shutil.copytree(Path(__file__).parents[1] / "sample_runs" / "store", root)
    p = _cli(str(root), "--run", "grpo-healthy", "--once")
    assert (p.returncode, p.stdout, p.stderr) == (0, f"grpo-healthy: {_verdict(root, 'grpo-healthy').sentence}\n", "")
    p = _cli(str(root), "--run", "grpo-collapse", "--once", "--severity", "critical")
    assert p.returncode == EXIT_CRITICAL and p.stdout.count("[critical]") == len(_stored(root, "grpo-collapse",
                                                                                          "critical"))
