"""The runs table's kept lines: each settled run's row of ``collapsewatch runs`` (compact and full), kept between
processes (``store.manifest``) and keyed by the rules' digest, the verdict code's (:mod:`.verdict_code`) and the
mtimes of the run's folders (``manifest.run_signature``: a flush, a compaction, a heartbeat or a resume changes them).

Light on purpose (no pandas, NumPy or DuckDB): when every run of a store has a kept line, ``collapsewatch runs``
prints its table from these records alone (``report.runs_table`` builds and keeps them).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

from .detectors.rules import rules_digest
from .store.manifest import load_record, run_folders, run_signature, save_record
from .verdict_code import verdict_code

KIND = "runs-line"
LAYOUT = 3  # 2: a line's steps count the steps a run only logged scalars at (store.summaries); 3: none is 0, not null
COMPACT_COLUMNS = ("run", "status", "objective", "steps", "updated", "verdict", "episodes", "sentence")


def computed_footnote(store: str | os.PathLike, starred: list[str]) -> str:
    """The runs table's footnote to its ``*`` verdicts (the runs ``starred``), with the command that shows what those
    runs stored: ``--run`` that run when there is one."""
    cmd = f"collapsewatch detect {shlex.quote(str(store))}" + (
        f" --run {shlex.quote(starred[0])}" if len(starred) == 1 else "") + " --recorded"
    return ("* episodes computed on read with today's detector rules: the stored ones were found by other rules, or "
            f"the run was recorded without detectors (`{cmd}` shows what it stored)")


def kept_lines(root: Path) -> tuple[dict[str, dict], dict[str, list | None]]:
    """(kept, keys): the kept line of each run that has one under today's rules and its folders' mtimes, and the
    key of every run (None for a run whose folders changed in the last two seconds: it is not kept)."""
    rules, now = rules_digest(None), time.time_ns()
    kept: dict[str, dict] = {}
    keys: dict[str, list | None] = {}
    for run in run_folders(root):
        sig = run_signature(root / run, now)
        keys[run] = None if sig is None else [LAYOUT, rules, verdict_code(), list(sig)]
        line = load_record(root, KIND, run, keys[run]) if keys[run] is not None else None
        if isinstance(line, dict) and isinstance(line.get("compact"), dict) and isinstance(line.get("full"), dict) \
                and isinstance(line.get("order"), list):
            kept[run] = line
    return kept, keys


def keep_line(root: Path, run: str, key: list, compact: dict[str, Any], full: dict[str, Any], order: list) -> None:
    """Keep a settled run's line: ``compact`` plain JSON values, ``full`` as ``judged.typed`` wrote them, ``order``
    its sort key (no start time first, then the start's nanoseconds)."""
    save_record(root, KIND, run, key, {"compact": compact, "full": full, "order": order})


def ordered(lines: dict[str, dict]) -> list[str]:
    """The runs of ``lines`` oldest first, a run with no start time last, ties by name (``ORDER BY started_at,
    run``)."""
    return sorted(lines, key=lambda run: (*lines[run]["order"], run))


def table_rows(lines: dict[str, dict]) -> list[list[Any]]:
    """The compact table's cells in ``ordered`` order, each column typed as a pandas frame of them would be (an
    integer column with a missing value is a float column)."""
    rows = [[lines[run]["compact"].get(c) for c in COMPACT_COLUMNS] for run in ordered(lines)]
    for i in range(len(COMPACT_COLUMNS)):
        column = [row[i] for row in rows]
        if None in column and all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in column):
            for row in rows:
                row[i] = float("nan") if row[i] is None else float(row[i])
    return rows
