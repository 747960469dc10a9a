"""Webhook bodies: which service a notify URL points at, and the body that service accepts.

    service_of(url) -> (service, url)   # "slack" | "discord" | "generic"; a "slack:"/"discord:" prefix is stripped
    webhook_body(service, text, payload) -> dict

Slack incoming webhooks take ``{"text", "blocks"}`` (one section block, mrkdwn); Discord webhooks take
``{"content"}`` of at most 2,000 characters; any other URL gets collapsewatch's own event payload unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

DISCORD_LIMIT = 2000
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


def webhook_body(service: str, text: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The JSON body ``service`` accepts for a message whose sentence is ``text``."""
    if service == "slack":
        return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    if service == "discord":
        content = text if len(text) <= DISCORD_LIMIT else text[:DISCORD_LIMIT - 1] + "…"
        return {"content": content}
    return payload
