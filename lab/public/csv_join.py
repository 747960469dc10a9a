"""Wide per-step CSVs of one run → one wide CSV `collapsewatch ingest` reads (docs/lab/public_runs.md): a run whose
curves were exported one file per panel or per process (BasiaKoch/tpu-2026's report_assets/baseline_mean_reward_curve.csv
``step,rewards/train/mean`` and baseline_kl_curve.csv ``step,actor/train/kl``, logged one step apart; prime-rl's
orchestrator and trainer W&B histories).

Each file's step column is the first header among ``step``, ``global_step``, ``train/global_step``, ``_step``,
``Step``; ``--offset FILE=N`` adds N to that file's steps (FILE: the path as given, its name or its stem). The output
is ``step`` and the union of the files' other columns, in the order the files name them, one row per step in numeric
order. Rows are not invented: a step only one file has keeps empty cells for the other files' columns; no value is
read or changed. Refused, one line naming it, nothing written: a column two files both have (``--drop COL`` leaves a
column out of every file, e.g. W&B's ``_runtime``), a step twice in one file, a row of another width than its header,
a row with no step, a step that is no number.

    python lab/public/csv_join.py OUT.csv A.csv B.csv [...] [--offset B.csv=-1] [--drop COL]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

STEP_COLUMNS = ("step", "global_step", "train/global_step", "_step", "Step")


def _number(raw: str, where: str) -> int | float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{where}: step {raw!r} is no number") from None
    return int(value) if value.is_integer() else value


def read_one(path: Path, offset: int | float, drop: set[str]) -> tuple[list[str], dict[int | float, dict[str, str]]]:
    """A file's metric columns (its step column and ``drop`` left out) and its rows by step (plus ``offset``)."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{path}: empty")
    header = [h.strip() for h in rows[0]]
    step = next((s for s in STEP_COLUMNS if s in header), None)
    if step is None:
        raise ValueError(f"{path}: no step column (one of {', '.join(STEP_COLUMNS)}) in its header")
    at = header.index(step)
    columns = [h for i, h in enumerate(header) if i != at and h not in drop]
    by_step: dict[int | float, dict[str, str]] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        where = f"{path} line {n}"
        if len(row) != len(header):
            raise ValueError(f"{where}: {len(row)} fields, the header {len(header)}")
        if not row[at].strip():
            raise ValueError(f"{where}: no step")
        key = _number(row[at].strip(), where)
        key = key + offset if offset else key
        if key in by_step:
            raise ValueError(f"{where}: step {row[at].strip()} is there twice")
        by_step[key] = {h: row[i] for i, h in enumerate(header) if i != at and h not in drop}
    return columns, by_step


def join(files: list[Path], offsets: dict[Path, int | float], drop: set[str]) -> list[list[str]]:
    """The joined rows, header first."""
    columns: list[str] = []
    owner: dict[str, Path] = {}
    steps: dict[int | float, dict[str, str]] = {}
    for path in files:
        names, by_step = read_one(path, offsets.get(path, 0), drop)
        for name in names:
            if name in owner:
                raise ValueError(f"column {name!r} is in both {owner[name]} and {path} (--drop {name} leaves it out)")
            owner[name] = path
        columns += names
        for key, values in by_step.items():
            steps.setdefault(key, {}).update(values)
    return [["step", *columns]] + [[str(key), *(steps[key].get(c, "") for c in columns)] for key in sorted(steps)]


def _offsets(specs: list[str], files: list[Path]) -> dict[Path, int | float]:
    out: dict[Path, int | float] = {}
    for spec in specs:
        name, _, raw = spec.rpartition("=")
        match = [p for p in files if name in (str(p), p.name, p.stem)]
        if len(match) != 1:
            raise ValueError(f"--offset {spec}: {name!r} names {len(match)} of the input files")
        out[match[0]] = _number(raw.strip(), f"--offset {spec}")
    return out


def main(argv: list[str]) -> int:
    """0 written, 1 a file or column it refuses (one line naming it; nothing written), 2 a wrong call."""
    ap = argparse.ArgumentParser(prog="python lab/public/csv_join.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--offset", action="append", default=[], metavar="FILE=N")
    ap.add_argument("--drop", action="append", default=[], metavar="COL")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if len(args.files) < 2:
        print("error: give two files or more to join", file=sys.stderr)
        return 2
    try:
        rows = join(args.files, _offsets(args.offset, args.files), set(args.drop))
    except (OSError, ValueError, csv.Error) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with args.out.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    print(f"{len(args.files)} files: {len(rows) - 1} steps, {len(rows[0]) - 1} columns → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
