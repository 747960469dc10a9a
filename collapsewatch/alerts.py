"""Alerts: one detector event → one sentence with its evidence, and the JSON POST of an event.

    event_message(event) -> str       # "median ratio of A>0 tokens fell from 0.98 to 0.71 over 40 steps …"
    event_payload(event) -> dict      # JSON-safe: the events row, evidence parsed, plus "text"
    post_event(url, event, timeout)   # POST event_body as JSON; returns the HTTP status
    event_body(service, event)        # Slack / Discord: the headline in their shape; else event_payload
    post_json(url, body, timeout)     # POST any JSON body (a digest: collapsewatch.sinks.webhook)
    verdict_headline(verdict)         # 'run: sentence', watch's verdict line
    collapse_payload(verdict) / collapse_body   # a reward collapse as news (watch, a Monitor's sinks)

``event`` is anything shaped like a row of the store's ``events`` view: a mapping (a DataFrame record, a
dict) whose ``evidence`` is a JSON string or a mapping, or a :class:`collapsewatch.detectors.Event`. The
sentence is built from the evidence keys the detectors in :mod:`collapsewatch.detectors` write; an event
whose evidence lacks them (an older store, a user's own events) falls back to the event's stored
``message``. This module is the one home of the wording: the dashboard's events table, ``collapsewatch
watch`` and the trainer's ``notify`` action all call it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from .detectors.events import EPISODE_FIELDS, evidence_dict
from .detectors.registry import Sentence, specs
from .detectors.registry import num as _num
from .webhooks import service_of, shown, webhook_body

EVENT_FIELDS = ("run", "rank", "source", "rules", *(c for c in EPISODE_FIELDS if c != "evidence"))


class NotifyError(OSError):
    """A notify POST that did not reach its receiver or was refused: ``reason`` says why; the message names the URL
    as :func:`collapsewatch.webhooks.shown` shows it (no token)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"notify {shown(url)}: {reason}")
        self.reason = reason


def _row(event: Any) -> dict[str, Any]:
    """The event as a plain dict with ``evidence`` parsed into a dict."""
    if hasattr(event, "as_row") and not isinstance(event, Mapping):
        row = dict(event.as_row())
    elif isinstance(event, Mapping):
        row = dict(event)
    else:
        raise TypeError(f"event must be a mapping (an events row) or an Event, got {type(event).__name__}")
    row["evidence"] = evidence_dict(row.get("evidence"))
    return row


def _int(x: Any) -> int | None:
    v = _num(x)
    return int(v) if v is not None else None


SENTENCES: dict[str, Sentence] = {name: spec.sentence for name, spec in specs().items()}
"""Detector → sentence builder (phase, evidence, the step the evidence was taken at): each detector's own
(``@register_detector``, :mod:`collapsewatch.detectors.registry`)."""


def event_message(event: Any) -> str:
    """One sentence saying what the event saw, with its evidence values; the stored message as fallback."""
    row = _row(event)
    build = SENTENCES.get(str(row.get("detector")))
    text = None
    if build is not None:
        try:  # an event's latest version ends at the step its evidence was taken at
            text = build(str(row.get("phase")), row["evidence"], _int(row.get("step_end")))
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            text = None  # evidence of an unexpected shape: the detector's own message says it
    return text or str(row.get("message") or f"{row.get('detector')} · {row.get('phase')}")


def event_headline(event: Any) -> str:
    """``run · steps a–b · severity · detector/phase: sentence`` — one line for a terminal or a chat."""
    row = _row(event)
    run = f"{row['run']} " if row.get("run") else ""
    steps = (f"step {row.get('step_start')}" if row.get("step_start") == row.get("step_end")
             else f"steps {row.get('step_start')}–{row.get('step_end')}")
    return (f"{run}{steps} [{row.get('severity')}] {row.get('detector')}/{row.get('phase')}: "
            f"{event_message(row)}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, str)):
        return v
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        v = v.item()
    if isinstance(v, int):
        return v
    x = _num(v)
    return x if x is not None or not isinstance(v, float) else None


def event_payload(event: Any) -> dict[str, Any]:
    """The event as a JSON-safe dict: ``"type": "event"``, its events-row fields, ``evidence`` as an object, and
    ``text`` (``watch --json`` lines, ``detect --json`` items and notify POSTs alike)."""
    row = _row(event)
    out: dict[str, Any] = {"type": "event"}
    out.update({k: _jsonable(row.get(k)) for k in EVENT_FIELDS if k in row})
    out["evidence"] = _jsonable(row["evidence"])
    if row.get("written_at") is not None:
        out["written_at"] = _jsonable(row["written_at"])
    out["text"] = event_message(row)
    return out


def post_event(url: str, event: Any, timeout: float = 5.0) -> int:
    """POST the event to an http(s) ``url`` in its service's body (webhooks.py); the HTTP status, or NotifyError."""
    service, url = service_of(url) if isinstance(url, str) else ("generic", url)
    return post_json(url, event_body(service, event), timeout)


def event_body(service: str, event: Any) -> dict[str, Any]:
    """The body ``service`` takes for one event: a chat (Slack, Discord) gets its headline — run, steps, severity
    and sentence —, any other receiver the event payload."""
    payload = event_payload(event)
    return webhook_body(service, event_headline(event) if service != "generic" else payload["text"], payload)


def collapse_payload(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """A running run's collapsed verdict (:func:`collapsewatch.report.verdict_object`) as the news ``watch --json``
    prints and a webhook receives: ``"type": "collapse"`` and the verdict's fields."""
    return {**{k: _jsonable(v) for k, v in verdict.items()}, "type": "collapse"}


def verdict_headline(verdict: Mapping[str, Any]) -> str:
    """``run: sentence`` — the line ``watch`` prints for a run's verdict at its end, and for a reward collapse while
    the run goes on."""
    return f"{verdict['run']}: {verdict['sentence']}"


def collapse_body(service: str, verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The body ``service`` takes for a running run's collapse: a chat its headline, any other receiver the
    payload."""
    return webhook_body(service, verdict_headline(verdict), collapse_payload(verdict))


def post_json(url: str, body: dict[str, Any], timeout: float = 5.0) -> int:
    """POST ``body`` as JSON to an http(s) ``url``; the HTTP status, or NotifyError naming the URL's host."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"notify URL must start with http:// or https://, got {url!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    data = json.dumps(body, allow_nan=False).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "collapsewatch"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (scheme checked above)
            return int(resp.status)
    except urllib.error.HTTPError as e:
        raise NotifyError(url, f"the receiver answered HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise NotifyError(url, str(reason)) from e
