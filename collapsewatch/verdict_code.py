"""The verdict code's digest: what a kept verdict was made by, beside the rules digest (``detectors.rules``).

A run's verdict sentence — its wording, its notes and the columns they read — comes from :data:`VERDICT_CODE`, which
the rules digest does not cover (it hashes the detectors only). Everything kept between processes that holds a
verdict (``judged``: the judgement, the runs page's row; ``runlines``: the line of ``collapsewatch runs``) puts this
digest in its key, so after an upgrade that changed the verdict a kept one is made again, not shown stale. Light on
purpose (no pandas, NumPy or DuckDB): ``runlines`` reads it on the fast path of ``collapsewatch runs``.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources

from .detectors.rules import code_text

VERDICT_CODE = ("verdict.py", "reward.py", "judge.py")
"""The modules that turn a run's episodes and steps into its verdict sentence."""


@lru_cache(maxsize=1)
def verdict_code() -> str:
    """sha1[:12] of :data:`VERDICT_CODE`'s syntax trees without docstrings (``detectors.rules.code_text``: comments and
    the wording of docs do not count; a changed sentence or rule does)."""
    h = hashlib.sha1()
    for name in VERDICT_CODE:
        h.update(code_text(resources.files("collapsewatch").joinpath(name).read_text(encoding="utf-8")).encode())
    return h.hexdigest()[:12]
