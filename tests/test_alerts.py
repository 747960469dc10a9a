"""alerts: the event sentence from real detector evidence, the JSON payload, and a POST to a local receiver."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from fixtures.synthetic_steps import make_run

from collapsewatch.alerts import NotifyError, event_headline, event_message, event_payload, post_event
from collapsewatch.detectors import detect_frame


def _first(scenario: str, detector: str, phase: str | None = None):
    events = detect_frame(make_run(scenario, seed=0).frame)
    return next(e for e in events if e.detector == detector and (phase is None or e.phase == phase))


def test_isdd_sentence_from_real_evidence():
    ev = _first("isdd", "isdd")
    text = event_message(ev)
    e = ev.evidence
    # the ISDD sentence names the ratio's fall, its window span and the silent clip, values from the evidence
    span = ev.step_end - e["ratio_p50_pos_peak_step"]  # from the peak level's step to the episode's latest step
    assert text.startswith(f"median ratio of A>0 tokens fell from {e['ratio_p50_pos_peak']:.2f} "
                           f"to {e['ratio_p50_pos_level']:.2f} over {span} steps")
    assert e["ratio_p50_pos_peak"] > 0.95 and e["ratio_p50_pos_level"] < 0.9  # healthy ≈ 1, drifted below 0.9
    assert f"while clip_low stayed {e['clip_low_frac']:.2f}" in text


@pytest.mark.parametrize("scenario,detector", [("lld", "lld"), ("grad", "grad"), ("nonfinite", "nonfinite"),
                                               ("starvation", "starvation"), ("length", "length"),
                                               ("mismatch", "mismatch"), ("entropy", "entropy")])
def test_every_detector_gets_a_sentence_not_the_fallback(scenario, detector):
    ev = _first(scenario, detector)
    text = event_message(ev)
    assert text != ev.message, f"{detector}/{ev.phase} fell back to the stored message: evidence keys drifted"


def test_row_with_json_evidence_equals_event_and_foreign_evidence_falls_back():
    ev = _first("grad", "grad")
    row = dict(ev.as_row(), run="r1", rank=0, source="online")  # evidence as the JSON string the view holds
    assert event_message(row) == event_message(ev)
    g, med = ev.evidence["grad_norm"], ev.evidence["reference_median"]
    assert f"{g / med:.1f}× its median" in event_message(row)
    foreign = dict(row, evidence='{"slope_L": -0.004}', detector="lld", phase="steady_decay", message="hand-made")
    assert event_message(foreign) == "hand-made"
    assert event_headline(row).startswith(f"r1 steps {ev.step_start}–{ev.step_end} [{ev.severity}] grad/explosion: ")
    with pytest.raises(TypeError, match="events row"):
        event_message(42)


def test_post_event_reaches_a_local_receiver(receiver):
    ev = _first("isdd", "isdd")
    url = f"{receiver.url}/hook"
    assert post_event(url, dict(ev.as_row(), run="r1"), timeout=5) == 200
    path, ctype, body = receiver.got[0]
    assert (path, ctype) == ("/hook", "application/json")
    assert body == event_payload(dict(ev.as_row(), run="r1"))
    assert body["run"] == "r1" and body["detector"] == "isdd" and body["text"] == event_message(ev)
    assert body["evidence"]["ratio_p50_pos_level"] == ev.evidence["ratio_p50_pos_level"]
    receiver.status = 500
    with pytest.raises(NotifyError, match="HTTP 500"):
        post_event(url, ev, timeout=5)


def test_post_event_bad_url_and_refused_connection():
    with pytest.raises(ValueError, match="http:// or https://"):
        post_event("ftp://x", {"detector": "grad"})
    server = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_port
    server.server_close()  # nothing listens there now
    with pytest.raises(NotifyError, match=f"127.0.0.1:{port}"):
        post_event(f"http://127.0.0.1:{port}/", {"detector": "grad"}, timeout=2)


def test_post_event_slack_and_discord_bodies_by_prefix(receiver):
    ev = dict(_first("isdd", "isdd").as_row(), run="r1")
    # a chat gets the headline: "r1 steps A–B [severity] isdd/drift: " + the sentence (one line a reader places)
    text = f"r1 steps {ev['step_start']}–{ev['step_end']} [{ev['severity']}] isdd/drift: {event_message(ev)}"
    assert ev["step_start"] < ev["step_end"] and text == event_headline(ev)
    # slack: {"text": headline, "blocks": [one section block whose mrkdwn text is the headline]}
    assert post_event(f"slack:{receiver.url}/s", ev, timeout=5) == 200
    assert receiver.got[-1][2] == {"text": text,
                                   "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    # discord: {"content": headline} (< 2,000 characters, so untruncated)
    assert post_event(f"discord:{receiver.url}/d", ev, timeout=5) == 200
    assert receiver.got[-1][2] == {"content": text}
    assert [g[0] for g in receiver.got] == ["/s", "/d"]   # the prefix is stripped from the POSTed URL


def test_webhook_service_from_host_prefix_and_discord_limit():
    from collapsewatch.webhooks import DISCORD_LIMIT, service_of, webhook_body

    # the host decides; a prefix wins and is stripped; a Discord URL outside /api/webhooks/ is generic
    assert service_of("https://hooks.slack.com/services/T/B/x") == ("slack", "https://hooks.slack.com/services/T/B/x")
    assert service_of("https://discord.com/api/webhooks/1/abc")[0] == "discord"
    assert service_of("https://discordapp.com/api/webhooks/1/abc")[0] == "discord"
    assert service_of("https://discord.com/channels/1")[0] == "generic"
    assert service_of("slack:http://127.0.0.1:9/h") == ("slack", "http://127.0.0.1:9/h")
    assert service_of("http://127.0.0.1:9/h") == ("generic", "http://127.0.0.1:9/h")
    # 3,000 characters -> the first 1,999 and "…": exactly 2,000
    body = webhook_body("discord", "x" * 3000, {})
    assert len(body["content"]) == DISCORD_LIMIT == 2000 and body["content"] == "x" * 1999 + "…"
    assert webhook_body("discord", "short", {}) == {"content": "short"}
    assert webhook_body("generic", "s", {"a": 1}) == {"a": 1}
