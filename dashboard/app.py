"""The Dash app: ``create_app(store)`` builds it, ``serve(store)`` runs it (127.0.0.1 by default).

Pages live in ``pages/`` (one module each, registered with ``dash.register_page``); they are imported
explicitly after the app exists, because the package is installed as ``collapsewatch.dashboard`` from a
``dashboard/`` folder, which Dash's folder scan would import under the wrong module name.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

import dash
from dash import _callback, dcc, html

from . import ids, state

PAGES = ("runs", "overview", "tokens", "compare", "sweep", "sql")
ASSETS = Path(__file__).parent / "assets"
_page_callbacks: tuple[dict, list] | None = None


def _load_pages() -> None:
    """Import the page modules once; a later app in the same process gets the same callbacks again
    (``dash.callback`` hands its registrations to the first app that serves a request)."""
    global _page_callbacks
    if _page_callbacks is None:
        for name in PAGES:
            module = importlib.import_module(f"{__package__}.pages.{name}")
            # what Dash's own folder scan does: the module's layout() becomes the page's layout
            dash.page_registry[module.__name__]["layout"] = module.layout
        _page_callbacks = (dict(_callback.GLOBAL_CALLBACK_MAP), list(_callback.GLOBAL_CALLBACK_LIST))
        return
    callback_map, callback_list = _page_callbacks
    for key, value in callback_map.items():
        if key not in _callback.GLOBAL_CALLBACK_MAP:
            _callback.GLOBAL_CALLBACK_MAP[key] = value
            _callback.GLOBAL_CALLBACK_LIST.extend(c for c in callback_list if c["output"] == key)


def shell() -> html.Div:
    """Navigation bar over the page container."""
    links = [("Runs", "/"), ("Compare", "/compare"), ("Sweep", "/sweep"), ("SQL", "/sql")]
    return html.Div(className="shell", children=[
        dcc.Location(id=ids.NAV_URL, refresh="callback-nav"),
        html.Nav(className="nav", children=[
            html.Span("collapsewatch", className="brand"),
            *[dcc.Link(text, href=href, className="nav-link") for text, href in links],
            html.Span(str(state.store_path()), id=ids.NAV_STORE_PATH, className="nav-store", title="store"),
        ]),
        html.Main(dash.page_container, className="page"),
    ])


def create_app(store: str | Path) -> dash.Dash:
    """The dashboard over ``store`` (a collapsewatch store folder). Every page visit re-reads the store."""
    state.configure(store)
    app = dash.Dash(__name__, use_pages=True, pages_folder="", assets_folder=str(ASSETS), title="collapsewatch",
                    update_title=None, suppress_callback_exceptions=True)
    _load_pages()
    app.layout = shell
    return app


def wait_for_store(store: str | Path, poll_s: float = 1.0, say: Callable[[str], None] = print) -> Path:
    """Return once ``store`` is a collapsewatch store. A folder that does not exist yet, or has no ``_schema`` yet,
    is waited for (a run about to start creates it), saying so once; a path that is a file is an error."""
    from collapsewatch.store.opening import StoreNotFoundError

    if Path(store).expanduser().is_file():
        raise StoreNotFoundError(f"store {str(store)!r} is a file, not a store folder")
    announced = False
    while True:
        try:
            return state.configure(store)
        except StoreNotFoundError as e:
            if not announced:
                say(f"{e}: waiting for a run to create it (Ctrl-C to stop) …")
                announced = True
            time.sleep(poll_s)


PORTS = range(1, 65536)
"""The ports ``serve`` takes (0, "any free port", is refused: Dash would serve on 8050 instead)."""


def _bind_error(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on now (None: it can), bound the way the server binds it (Werkzeug's
    address family and address, ``SO_REUSEADDR``): a port whose connections from a dashboard stopped a moment ago
    are only in TIME_WAIT is free, as it is to the server."""
    from werkzeug.serving import get_sockaddr, select_address_family

    family = select_address_family(host, port)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(get_sockaddr(host, port, family))
    except OSError as e:
        return e
    return None


def port_in_use(host: str, port: int) -> bool:
    """Whether a server could not listen on ``host:port`` now (busy, or ``host`` not an address of this machine)."""
    return _bind_error(host, port) is not None


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, an address the server could not listen on: a port outside 1–65535 (ValueError), a busy
    port, or a host this machine cannot bind (RuntimeError, with the system's reason)."""
    if port not in PORTS:
        raise ValueError(f"--port {port}: a port is a number from {PORTS.start} to {PORTS.stop - 1}")
    e = _bind_error(host, port)
    if e is None:
        return
    if e.errno == errno.EADDRINUSE:
        raise RuntimeError(f"port {port} on {host} is already in use (another dashboard?): stop it or pass --port")
    raise RuntimeError(f"cannot bind {host}:{port}: {e.strerror or e}")


def serve(store: str | Path, host: str = "127.0.0.1", port: int = 8050, debug: bool = False,
          say: Callable[[str], None] = print) -> None:
    """Serve the dashboard of ``store`` until interrupted. Binds to localhost unless ``host`` says otherwise:
    the SQL console reads every run in the store. An address it cannot listen on (busy port, port outside
    1–65535, host not of this machine) is refused first, in one line; a store that does not exist yet is waited
    for; then ``say`` gets the dashboard's address."""
    check_port(host, port)
    wait_for_store(store, say=say)
    app = create_app(store)
    say(f"collapsewatch dashboard on http://{host}:{port}  (store {store})")
    app.run(host=host, port=port, debug=debug)


def main(argv: list[str] | None = None) -> None:
    """``python -m collapsewatch.dashboard``: ``collapsewatch dash``'s refusals are one ``error:`` line here too."""
    p = argparse.ArgumentParser(prog="python -m collapsewatch.dashboard", description=serve.__doc__)
    p.add_argument("store")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--debug", action="store_true")
    a = p.parse_args(argv)
    try:
        serve(a.store, a.host, a.port, a.debug)
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:  # Ctrl-C, here while it waits for a store that does not exist yet: no traceback
        raise SystemExit(130) from None
