"""collapsewatch dashboard (Dash Pages): runs, run overview with phase bands, token drill-down, compare,
read-only SQL. ``create_app(store)`` builds the app, ``serve(store)`` runs it on 127.0.0.1.

Installed as ``collapsewatch.dashboard`` from the top-level ``dashboard/`` folder (package-dir mapping).
"""

from .app import create_app, serve

__all__ = ["create_app", "serve"]
