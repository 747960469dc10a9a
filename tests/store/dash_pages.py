"""Dash Pages' routing callback (URL → layout()) as the browser calls it: one request body for the store tests
that render every page."""

from __future__ import annotations

from typing import Any

PAGES = ".._pages_content.children..._pages_store.data.."


def page_request(url: str) -> dict[str, Any]:
    """The JSON body of ``POST /_dash-update-component`` that renders ``url`` (path and optional ``?query``)."""
    path, _, search = url.partition("?")
    return {"output": PAGES, "outputs": [{"id": "_pages_content", "property": "children"},
                                         {"id": "_pages_store", "property": "data"}],
            "inputs": [{"id": "_pages_location", "property": "pathname", "value": path},
                       {"id": "_pages_location", "property": "search", "value": f"?{search}" if search else ""}],
            "changedPropIds": ["_pages_location.pathname"], "state": []}


def assert_pages_render(client, paths: tuple[str, ...]) -> None:
    """Every page renders through a Flask test client: HTTP 200, and the run is found."""
    assert client.get("/").status_code == 200
    for path in paths:
        r = client.post("/_dash-update-component", json=page_request(path))
        assert r.status_code == 200, (path, r.data[:300])
        assert b"No run named" not in r.data, path
