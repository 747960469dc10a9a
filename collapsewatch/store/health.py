"""``collapsewatch check``: what of a store every command reads around, said once, and the two ways to fix it.

Three kinds of fault are reported, one line each, named by path (or URL for an object store):

* a **bad segment** (``segments.check_file``: empty, truncated, not Parquet, foreign columns) — skipped by every
  read; ``--quarantine`` moves it to ``<store>/_quarantine/<run>/<table>/``;
* a missing or corrupt **``_schema`` file** (``segments.schema_problems``) — reads use the package's own schema
  (``segments.schema_file``) and never write it; ``--repair`` rewrites it atomically from the migrations (and the
  next writer does too, ``writer.ensure_schema``);
* on an object store, a **published flush missing a segment** (``mirror.broken_flushes``) — its other segments
  are not read (all of a flush or none); nothing can bring the lost segment back, so it is reported only.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import mirror, segments
from .opening import open_location
from .writer import ensure_schema


def check_store(store: str | os.PathLike, quarantine: bool = False, repair: bool = False) -> tuple[list[str], bool]:
    """(the lines to print, whether the store has no fault left) after moving bad segments aside (``quarantine``)
    and rewriting ``_schema`` (``repair``) if asked."""
    where = open_location(store)  # an object store's files are checked in its synced mirror, named by URL
    root = where.local
    bad = segments.bad_files(root)
    schema = segments.schema_problems(root)
    broken = mirror.broken_flushes(root) if where.mirror else []
    lines: list[str] = []
    if quarantine and bad:
        moved = segments.quarantine(root, [p for p, _ in bad], where)
        lines.append(f"moved {len(moved)} file(s) to {where.show(root / segments.QUARANTINE)}")
        bad = []
    if repair and schema:
        written = ensure_schema(root)
        for path in written:
            where.push(path)
        lines.append(f"rewrote {len(written)} _schema file(s) from the package's migrations: "
                     + ", ".join(where.show(p) for p in written))
        schema = segments.schema_problems(root)
    lines += [f"{where.show(p)}: {why}" for p, why in bad]
    lines += [f"{where.show(p)}: {why} (every command reads without it; collapsewatch check STORE --repair rewrites "
              "it)" for p, why in schema]
    lines += [f"{where.show(Path(root) / marker)}: {why}" for marker, why in broken]
    if not (bad or schema or broken) and not lines:
        lines.append("no bad files")
    return lines, not (bad or schema or broken)
