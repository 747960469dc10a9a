"""The webhook sink's rate limit and fail-soft, on a real Monitor whose grad detector opens one episode that rises
info → warning → critical (tests/sinks_run.py), POSTing to the local receiver on 127.0.0.1 (exact bodies)."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler, HTTPServer

from collapsewatch.alerts import event_headline, event_payload
from collapsewatch.sinks import run_verdict
from collapsewatch.sinks.webhook import WebhookSink, message_bodies
from collapsewatch.webhooks import DIGEST_OVER, digest_text
from tests.sinks_run import first, grad_run


def test_one_message_per_episode_and_severity_in_slacks_shape(tmp_path, receiver):
    events = grad_run(tmp_path, [f"slack:{receiver.url}/s"])
    # the Monitor delivered the episode at every step it held (40–43, info at 40–41), but Slack gets it once at
    # warning (step 42) and once at critical (step 43): info is below the sink's least severity, an extension is
    # not news
    assert len(events) >= 4 and {e["severity"] for e in events} == {"info", "warning", "critical"}
    want = [event_headline(first(events, 42, "warning")), event_headline(first(events, 43, "critical"))]
    assert want[0].startswith("g steps 40–42 [warning] grad/explosion: ")
    assert [(path, body) for path, _, body in receiver.got] == [
        ("/s", {"text": t, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": t}}]}) for t in want]


def test_a_monitors_webhook_hears_the_reward_collapse_while_it_trains_and_once(tmp_path, receiver):
    # reward_mean 0.8 at steps 0–29, 0 from 30 on, nothing else logged (no detector fires): the verdict's trailing
    # 10-point median is (0 + 0.8) / 2 = 0.4 ≤ 0.5 × 0.8 at step 34 and 0 after it; once 10 levels follow (step 44)
    # with none back above 0.75 × 0.8 = 0.6 it is a collapse at 34 (tests/test_watch.py derives the same series).
    # Flushed after every step, the Monitor says it while the run trains — one message, Slack's shape, the verdict
    # line as the store had it then — and not again at close. Through step 43 nothing can be said: no reading starts.
    import time

    from collapsewatch import Monitor

    with Monitor(tmp_path, run="r", detectors=False, flush_steps=1, sinks=[f"slack:{receiver.url}/s"]) as mon:
        for step in range(60):
            mon.log(step, {"reward_mean": 0.8 if step < 30 else 0.0})
            mon.flush()
            if step == 43:
                assert receiver.got == []
        deadline = time.monotonic() + 60
        while not receiver.got and time.monotonic() < deadline:  # the verdict's reading and the POST: threads
            mon.flush()  # hands what was read to the sinks
            time.sleep(0.05)
        during = list(receiver.got)
    [(path, _, body)] = during
    assert path == "/s" and body["text"].startswith("r: Collapsed at step 34")
    assert body["blocks"][0]["text"]["text"] == body["text"]
    assert receiver.got == during  # close said nothing more
    assert run_verdict(tmp_path, "r")["collapse_step"] == 34
    # Restarted from a checkpoint at step 55 (resume=True): steps 55–69 replayed or new, reward 0 throughout. The
    # store's verdict still says "Collapsed at step 34" — the earlier process's news, said above: the resumed Monitor
    # says nothing, neither while it trains nor with its final verdict (before, its fresh series missed steps 0–54,
    # and close said the stored collapse a second time)
    with Monitor(tmp_path, run="r", detectors=False, flush_steps=1, resume=True,
                 sinks=[f"slack:{receiver.url}/s"]) as mon:
        for step in range(55, 70):
            mon.log(step, {"reward_mean": 0.0})
            mon.flush()
    assert receiver.got == during
    assert run_verdict(tmp_path, "r")["collapse_step"] == 34


def test_many_at_once_make_one_digest(tmp_path, receiver):
    events = grad_run(tmp_path / "s", [])
    # four distinct (episode, severity) reports in one call: more than DIGEST_OVER (3) → one digest message
    rows = [dict(first(events, 43, "critical"), run=f"r{i}") for i in range(DIGEST_OVER + 1)]
    sink = WebhookSink(f"discord:{receiver.url}/d", least="info")
    sink.events(rows)
    sink.close()
    text = digest_text([event_headline(r) for r in rows])
    assert text.startswith("collapsewatch: 4 episodes\n• r0 steps 40–43 [critical] grad/explosion: ")
    assert [b for _, _, b in receiver.got] == [{"content": text}]
    # three are three messages; a generic URL's digest carries the payloads
    assert len(message_bodies("slack", rows[:DIGEST_OVER])) == DIGEST_OVER
    assert message_bodies("generic", rows) == [{"type": "digest", "text": text,
                                                 "events": [event_payload(r) for r in rows]}]


def test_a_dead_receiver_is_one_log_line_and_training_goes_on(tmp_path, caplog):
    server = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_port
    server.server_close()  # nothing listens there now
    sink = WebhookSink(f"http://127.0.0.1:{port}/hook")
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        grad_run(tmp_path, [sink])
    assert run_verdict(tmp_path, "g")["last_step"] == 45  # the run went to its end
    assert sink.failed == 2 and sink.sent == 0  # warning and critical were both tried
    lines = [r.getMessage() for r in caplog.records if f"127.0.0.1:{port}" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"collapsewatch: the webhook:http://127.0.0.1:{port} sink failed (")
    assert "/hook" not in lines[0] and "its later errors are not logged" in lines[0]


def test_a_refusing_receiver_is_reported_once(tmp_path, receiver, caplog):
    receiver.status = 500
    sink = WebhookSink(f"slack:{receiver.url}/services/T0/B0/s3cret")  # the path: a Slack webhook's token
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        grad_run(tmp_path, [sink])
    assert len(receiver.got) == 2 and sink.failed == 2
    assert [r.getMessage() for r in caplog.records if "HTTP 500" in r.getMessage()] == [
        f"collapsewatch: the webhook:{receiver.url} sink failed (the receiver answered HTTP 500); its later errors "
        "are not logged, a failure stops neither training nor watch"]
