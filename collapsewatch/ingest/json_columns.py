"""A JSON object of per-step lists — ``{"step": [1, 2, …], "reward": [0.1, 0.2, …], …}``, what
``json.dump(df.to_dict("list"), f)`` or a script's own ``history`` dict writes (a "merged history" of a run).

* **The step**: the list under one of the step keys (:data:`.records.STEP_KEYS`, or ``steps``); without one, each
  value's position in the lists, from 0, and the summary says so.
* **Per-step values**: every list as long as the step list (numbers, numeric strings, null; the rest is skipped and
  counted per key, as in every format).
* **Lists of another length** are read where a step list of their own stands beside them: ``eval_step`` (or
  ``eval_steps``, ``eval/step``) gives the steps of every list of its length whose key starts with ``eval_`` (``eval/``)
  — an evaluation every N steps. Their values join the step they name (a step the main list lacks gets a row of its
  own, in step order). A list that neither fits is left out, named in the summary.
* Top-level strings, booleans and nulls (a run name, a flag) are metadata, not metrics: left out silently. A
  top-level number or object (a config constant such as ``"lr": 1e-6``, a nested ``"config": {…}``) is no per-step
  series: left out, each key named once in the summary, the lists beside it read. A file with no non-empty list is
  refused in one line naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .csv_table import Notes
from .records import STEP_KEYS, IngestError, Record, Skip
from .trainer_state import load_json

NAME = "json_columns"
GROWS = False
SNIFF_FORCED = True  # a forced --format still sniffs the file (collapsewatch.ingest.records.Reader)
STEP_LISTS = (*STEP_KEYS, "steps")
"""Keys whose list is read as the steps, the first present."""
_LIST = re.compile(r'"\s*:\s*\[')
"""A key whose value is a list."""
_OWN_STEP = re.compile(r"^(?P<prefix>.+?[_/])steps?$")
"""``eval_step``, ``eval_steps``, ``eval/step``: the steps of the lists whose keys start with the prefix."""


def sniff(path: Path, head: str) -> bool:
    """An object holding a list (:func:`read` refuses one whose lists are all empty, naming the file) — and not a
    JSONL log whose rows hold lists: a first line that is a whole object is a table of columns only when it is the
    whole file."""
    if not (head.lstrip().startswith("{") and _LIST.search(head)):
        return False
    first = next(ln for ln in head.splitlines() if ln.strip())
    try:
        json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        return True  # an indented object, or a one-line one longer than the head
    return not head[head.index(first) + len(first):].strip()


def _columns(path: Path, data: Any, notes: Notes) -> dict[str, list[Any]]:
    """The file's lists by key (its top-level numbers and objects named in the notes); IngestError naming the file
    when it is not an object or holds no non-empty list."""
    what = 'expected a JSON object of per-step lists, {"step": [...], "reward": [...], ...}'
    if not isinstance(data, dict):
        raise IngestError(f"{str(path)!r} is JSON but not an object ({what})")
    cols = {k: v for k, v in data.items() if isinstance(v, list)}
    if not any(cols.values()):
        raise IngestError(f"{str(path)!r} holds no non-empty list ({what})")
    kinds = {k: "object" if isinstance(v, dict) else "number" for k, v in data.items()
             if isinstance(v, (dict, int, float)) and not isinstance(v, bool)}
    if kinds:
        notes.lines.append("left out top-level value(s) that are not per-step lists (a constant or an object is no "
                           "series): " + ", ".join(f"{k!r} ({kind})" for k, kind in kinds.items()))
    return cols


def _steps(cols: dict[str, list[Any]], notes: Notes) -> tuple[str | None, list[Any]]:
    """(the step list's key, its steps) — positions from 0 where no key names the steps (said in the notes)."""
    key = next((k for k in STEP_LISTS if k in cols), None)
    if key is not None:
        return key, cols[key]
    n = max(len(v) for v in cols.values())
    notes.lines.append(f"no step list ({', '.join(STEP_LISTS)}): steps are the lists' positions, from 0")
    return None, list(range(n))


def read(path: Path, parser: Notes | None = None, **_: Any) -> Iterator[Record | Skip]:
    notes = parser if parser is not None else Notes()
    cols = _columns(path, load_json(path), notes)
    step_key, steps = _steps(cols, notes)
    n = len(steps)
    owned = _owned(cols, step_key)
    aligned = {*owned, *(k for joined in owned.values() for k in joined)}
    main = [k for k, v in cols.items() if k != step_key and k not in aligned and len(v) == n]
    rows: dict[int, tuple[Any, dict[str, Any]]] = {i: (s, {k: cols[k][i] for k in main}) for i, s in enumerate(steps)}
    at: dict[Any, int] = {}
    for i, s in enumerate(steps):
        at[s] = i  # a step logged twice (a resumed run): its later row gets what joins it
    extra: list[tuple[Any, str, dict[str, Any]]] = []
    for own, joined in owned.items():
        for j, s in enumerate(cols[own]):
            values = {k: cols[k][j] for k in joined}
            if _numbers((s,)) and s in at:
                rows[at[s]][1].update(values)
            elif _numbers((s,)):
                extra.append((s, f"{own}[{j}]", values))
            else:
                raise IngestError(f"{str(path)!r} {own}[{j}]: step {s!r} is not a number")
    left = [k for k in cols if k != step_key and k not in {*main, *aligned}]
    if left:
        notes.lines.append("left out list(s) of another length than the steps' "
                           f"({n}) with no step list of their own: " + ", ".join(
                               f"{k!r} ({len(cols[k])})" for k in left))
    where = f"{step_key}[{{}}]" if step_key else "position {}"
    if not _increasing(steps):  # a resumed run's steps: a row out of order would read as a rewind, so none is added
        for s, w, _values in extra:
            yield Skip(w, f"names step {s!r}, not one of the step list's, whose steps are not in order")
        extra = []
    pending = iter(sorted(extra, key=lambda e: e[0]))
    nxt = next(pending, None)
    for i, (s, values) in rows.items():
        while nxt is not None and nxt[0] < s:
            yield Record(nxt[1], nxt[0], nxt[2])
            nxt = next(pending, None)
        yield Record(where.format(i), s, values)
    for s, w, values in ([nxt] if nxt is not None else []) + list(pending):
        yield Record(w, s, values)


def _owned(cols: dict[str, list[Any]], step_key: str | None) -> dict[str, list[str]]:
    """Each list of steps of its own (``eval_step``) → the keys it gives steps to: those starting with its prefix, as
    long as it (of any length, the step list's too: an evaluation at every step is still read by its own steps)."""
    out: dict[str, list[str]] = {}
    for own in cols:
        m = _OWN_STEP.match(own)
        if own == step_key or m is None:
            continue
        joined = [k for k in cols if k not in (own, step_key) and k.startswith(m.group("prefix"))
                  and not _OWN_STEP.match(k) and len(cols[k]) == len(cols[own])]
        if joined:
            out[own] = joined
    return out


def _numbers(values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _increasing(steps: list[Any]) -> bool:
    return _numbers(steps) and all(a < b for a, b in zip(steps, steps[1:], strict=False))


Parser = Notes  # not a growing log: its notes only (collapsewatch.ingest.records.Reader)
Snapshot = None  # re-read whole at each poll of --follow (collapsewatch.ingest.records.Reader)
