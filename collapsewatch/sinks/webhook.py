"""Webhook sink: reported episodes POSTed to one URL (``--notify URL``, ``--to slack:URL``, the trainer's
``notify:URL`` action) in the body its service takes (:mod:`collapsewatch.webhooks`: Slack, Discord, or
collapsewatch's own event payload).

Rate limit: one message per (run, episode, severity) — the news filter of :class:`collapsewatch.sinks.Sinks`, so an
episode that stays open is not sent again, and one that becomes critical is; more than
:data:`~collapsewatch.webhooks.DIGEST_OVER` episodes reported at once (one check of ``watch``, one delivery of the
Monitor, or everything queued while a POST was in flight) go out as one digest message listing them.

Fail soft: POSTs run on a background thread, so a slow or dead receiver never holds training or ``watch``; a failed
POST is reported once per sink (one line — the library's log, or ``watch``'s stderr: its owner's ``warn`` — naming the
URL's scheme and host, never its token-bearing path; then silence; later messages are still tried) and counted in
``failed``.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from ..alerts import NotifyError, collapse_body, event_body, event_headline, event_payload, post_json
from ..detectors.events import SEVERITY_RANK
from ..webhooks import DIGEST_OVER, digest_text, service_of, webhook_body
from .base import Sink, Warn, failed_line, logged


def message_bodies(service: str, rows: list[dict[str, Any]], digest_over: int = DIGEST_OVER) -> list[dict[str, Any]]:
    """The JSON bodies for ``rows`` reported together: one per row, or one digest when there are more than
    ``digest_over``."""
    if len(rows) <= digest_over:
        return [event_body(service, row) for row in rows]
    text = digest_text([event_headline(r) for r in rows])
    return [webhook_body(service, text, {"type": "digest", "text": text, "events": [event_payload(r) for r in rows]})]


class WebhookSink(Sink):
    """POSTs to ``url`` (``slack:`` / ``discord:`` prefix allowed) the episodes at or above ``least``."""

    name = "webhook"

    def __init__(self, url: str, least: str = "warning", digest_over: int = DIGEST_OVER, timeout: float = 10.0,
                 warn: Warn | None = None) -> None:
        self.service, self.url = service_of(url)
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"a webhook URL must start with http:// or https:// (or slack: / discord:), got {url!r}")
        if least not in SEVERITY_RANK:
            raise ValueError(f"severity must be one of {', '.join(SEVERITY_RANK)}, got {least!r}")
        self.where = self.url  # shown as its scheme and host alone (Sink.label): the path holds a webhook's token
        self.least, self.digest_over, self.timeout = SEVERITY_RANK[least], digest_over, timeout
        self.warn = warn or logged
        self.sent = self.failed = 0
        self._queue: queue.Queue[list[dict[str, Any]] | dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._warned = False

    def events(self, rows: list[dict[str, Any]]) -> None:
        rows = [r for r in rows if SEVERITY_RANK.get(str(r["severity"]), 0) >= self.least]
        if rows:
            self._send(rows)

    def _send(self, item: list[dict[str, Any]] | dict[str, Any]) -> None:
        """Queue episode rows (a list) or a ready message body (a dict) for the sending thread."""
        self._queue.put(item)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="collapsewatch-webhook", daemon=True)
            self._thread.start()

    def collapse(self, verdict: dict[str, Any]) -> None:
        """A running run's reward collapse: one message of its own (never part of a digest)."""
        self._send(collapse_body(self.service, verdict))

    def close(self, timeout: float = 30.0) -> None:
        """Send what is queued (waiting at most ``timeout`` seconds) and stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:  # everything queued meanwhile goes out with it: many episodes at once make one digest
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            rows = [row for item in batch if isinstance(item, list) for row in item]
            bodies = message_bodies(self.service, rows, self.digest_over) if rows else []
            for body in bodies + [item for item in batch if isinstance(item, dict)]:  # a collapse: its own message
                self._post(body)
            if stop:
                return

    def _post(self, body: dict[str, Any]) -> None:
        try:
            post_json(self.url, body, self.timeout)
            self.sent += 1
        except (NotifyError, ValueError) as e:
            self.failed += 1
            if not self._warned:  # once per sink: a dead receiver is one line, not one per event
                self._warned = True
                self.warn(failed_line(self.label, getattr(e, "reason", str(e))))
