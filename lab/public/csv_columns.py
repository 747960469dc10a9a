"""What the lab's CSV-to-CSV converters share (lab/public/trinity_csv.py, terrense_csv.py, rfs_metrics.py,
minio3_csv.py, drgrpo_csv.py, arlca_csv.py): a header
renamed to the trainer keys the columns stand for, and the command line that reads a source CSV (gzipped or not),
converts it and writes the CSV `collapsewatch ingest` reads — one line on stderr and exit 1 for a file it cannot read."""

from __future__ import annotations

import csv
import gzip
import io
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

Rows = list[list[str]]


def rename_columns(rows: Rows, rename: Mapping[str, str], drop: set[str], step: str) -> Rows:
    """The header renamed by ``rename``, the ``drop`` columns removed, empty rows left out; the ``step`` column must
    be there."""
    header, body = rows[0], rows[1:]
    if step not in header:
        raise ValueError(f"no {step!r} column in the header {header[:6]}")
    keep = [i for i, h in enumerate(header) if h not in drop]
    return [[rename.get(header[i], header[i]) for i in keep]] + [[r[i] for i in keep] for r in body if r]


def main_csv(argv: list[str], convert: Callable[[Rows], Rows], script: str) -> int:
    """``python SCRIPT SOURCE.csv[.gz] OUT.csv``: read, ``convert``, write; 2 on a wrong command line, 1 on a file
    it cannot read (named, one line), 0 when written."""
    if len(argv) != 2:
        print(f"usage: python {script} SOURCE.csv[.gz] OUT.csv", file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    try:
        data = src.read_bytes()
        text = (gzip.decompress(data) if src.suffix == ".gz" else data).decode("utf-8")
        rows = convert(list(csv.reader(io.StringIO(text, newline=""))))
    except (OSError, ValueError, IndexError, EOFError, csv.Error) as e:
        print(f"error: {src}: {e!r}", file=sys.stderr)
        return 1
    with dst.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    print(f"{src}: {len(rows) - 1} rows → {dst}")
    return 0
