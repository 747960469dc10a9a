"""The command line of a lab/public converter whose source is a JSONL file of a repository's own logger
(cs336_metrics.py, taoger_metrics.py, dequeueing_metrics.py,
rlor_trl_logs.py, shaider_metrics.py, axiom_metrics.py, ece405_metrics.py, cs336hw5_metrics.py): read its rows, ``convert`` them, write one JSON object per step; :func:`write` is that last part,
for a converter whose source is not JSONL (trace_easyr1.py, omnilora_curve.py, slime_tb.py, json_rows.py); :func:`main_text` the command line of one whose source is a text log."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(argv: list[str], script: str, convert: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> int:
    """``python lab/public/<script> METRICS.jsonl OUT.jsonl``: 0 done, 1 a file it could not read or convert (one
    line naming it), 2 a wrong call."""
    if len(argv) != 2:
        print(f"usage: python lab/public/{script} METRICS.jsonl OUT.jsonl", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[1]),
                 lambda: convert([json.loads(line) for line in src.read_text().splitlines() if line.strip()]))


def main_text(argv: list[str], usage: str, convert: Callable[[str], list[dict[str, Any]]]) -> int:
    """``python lab/public/<script> LOG OUT.jsonl`` for a converter of a text log (titan_console.py,
    beita_console.py, rezero_console.py; unorl_metrics.py parses its JSON document from the text): ``convert`` the whole file's text (undecodable bytes replaced); exit codes as :func:`main`."""
    if len(argv) != 2:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[1]), lambda: convert(src.read_text(errors="replace")))


def main_json(argv: list[str], usage: str, convert: Callable[[Any, str], list[dict[str, Any]]]) -> int:
    """``python lab/public/<script> DOC.json ARG OUT.jsonl`` for a converter that takes one part of a JSON document
    (akna_series.py: an arm; json_rows.py: a key path): ``convert(doc, ARG)``; exit codes as :func:`main`."""
    if len(argv) != 3:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    src = Path(argv[0])
    return write(src, Path(argv[2]), lambda: convert(json.loads(src.read_text()), argv[1]))


def merge_steps(rows: list[dict[str, Any]], name: Callable[[str], str],
                extra: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Rows that each carry a ``step`` → one dict per step, steps ascending: every other key of a row becomes
    ``name(key)`` in its step's dict (rows of one step merge), plus ``extra(row)``'s derived columns."""
    out: dict[int, dict[str, Any]] = {}
    for n, row in enumerate(rows, start=1):
        if "step" not in row:
            raise ValueError(f"line {n}: a row needs a step")
        into = out.setdefault(int(row["step"]), {"step": int(row["step"])})
        into.update({name(key): value for key, value in row.items() if key != "step"})
        if extra is not None:
            into.update(extra(row))
    return [out[s] for s in sorted(out)]


def merge_by(rows: list[dict[str, Any]], step_key: str, name: Callable[[str], str]) -> list[dict[str, Any]]:
    """:func:`merge_steps` for rows whose step is logged under ``step_key`` (``train_step``, ``optimizer_step``): that
    key becomes the step (an integer) and is not kept as a value; a row without it is an error naming its line."""
    for n, row in enumerate(rows, start=1):
        if step_key not in row:
            raise ValueError(f"line {n}: no {step_key!r} (the step) in the row")
    return merge_steps([{"step": int(r[step_key]), **{k: v for k, v in r.items() if k != step_key}} for r in rows], name)


def write(src: Path, dst: Path, steps: Callable[[], list[dict[str, Any]]]) -> int:
    """Write ``steps()`` (read from ``src``) to ``dst``, one JSON object a line: 0 done, 1 when reading or converting
    ``src`` failed (one line naming it; nothing written)."""
    try:
        rows = steps()
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        print(f"error: {src}: {e!r}", file=sys.stderr)
        return 1
    dst.write_text("".join(json.dumps(s) + "\n" for s in rows))
    print(f"{src}: {len(rows)} steps → {dst}")
    return 0
