"""Webhook bodies: which service a notify URL points at, and the body that service accepts.

    service_of(url) -> (service, url)   # "slack" | "discord" | "generic"; a "slack:"/"discord:" prefix is stripped
    shown(url) -> str                   # what a message shows of a URL: no user, password, query, nor an http path
    scrubbed(text) -> str               # every URL in a message (a library's error) as shown() shows it
    webhook_body(service, text, payload) -> dict
    digest_text(headlines) -> str    # one message for many episodes reported at once

Slack incoming webhooks take ``{"text", "blocks"}`` (one section block, mrkdwn, its text at most 3,000 characters);
Discord webhooks take ``{"content"}`` of at most 2,000 characters; any other URL gets collapsewatch's own event
payload unchanged (a digest: ``{"type": "digest", "text", "events": [payload, …]}``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

DISCORD_LIMIT = 2000
SLACK_BLOCK_LIMIT = 3000
"""Slack's longest text of a section block (the top-level ``text`` keeps the whole message)."""
DIGEST_OVER = 3
"""More episodes than this reported to one URL at once (one check) go out as one digest message."""
_PREFIXES = ("slack:", "discord:")


def service_of(url: str) -> tuple[str, str]:
    """The service a notify URL addresses and the URL to POST to (an explicit prefix wins over the host)."""
    for p in _PREFIXES:
        if url.startswith(p) and url[len(p):].startswith(("http://", "https://")):
            return p[:-1], url[len(p):]
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host == "hooks.slack.com":
        return "slack", url
    if host in ("discord.com", "discordapp.com") and parts.path.startswith("/api/webhooks/"):
        return "discord", url
    return "generic", url


def shown(where: str) -> str:
    """What a message shows of a URL or a sink's target (a webhook, ``--to KIND:WHERE``): never what can hold a
    secret — a URL's user and password, query and fragment, and an http(s) URL's path (a Slack or Discord webhook's
    token is its path): ``https://hooks.slack.com/services/T/B/XYZ`` → ``https://hooks.slack.com``,
    ``postgresql://u:pw@db:5432/mlflow`` → ``postgresql://db:5432/mlflow``. Anything else (a folder, a project,
    ``sqlite:///mlflow.db``) is shown as given."""
    parts = urlsplit(where)
    if not (parts.scheme and parts.netloc):
        return where
    host = parts.netloc.rpartition("@")[2]
    path = "" if parts.scheme in ("http", "https") else parts.path
    return f"{parts.scheme}://{host}{path}"


URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")
"""A URL inside free text (an exception's message)."""


def scrubbed(text: str) -> str:
    """``text`` with every URL in it as :func:`shown` shows it: a library's error message can quote the tracking URI
    or webhook it failed on, credentials and token included."""
    return URL.sub(lambda m: shown(m.group(0)), text)


def webhook_body(service: str, text: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The JSON body ``service`` accepts for a message whose sentence is ``text``."""
    if service == "slack":
        return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                      "text": _cut(text, SLACK_BLOCK_LIMIT)}}]}
    if service == "discord":
        return {"content": _cut(text, DISCORD_LIMIT)}
    return payload


def digest_text(headlines: list[str]) -> str:
    """One message listing episodes reported together, a line each."""
    return f"collapsewatch: {len(headlines)} episodes\n" + "\n".join(f"• {h}" for h in headlines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
