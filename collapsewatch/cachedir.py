"""The local folder of this user's collapsewatch caches (reader caches, mirrors, writer spools, schema files, the
rules digest): ``$COLLAPSEWATCH_CACHE`` or ``~/.cache/collapsewatch``. Its own module, importing nothing of the
package, so that any subpackage may use it."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$COLLAPSEWATCH_CACHE``, or ``~/.cache/collapsewatch`` where it is unset or empty."""
    return Path(os.environ.get("COLLAPSEWATCH_CACHE") or Path.home() / ".cache" / "collapsewatch")
