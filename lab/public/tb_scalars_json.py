"""A TensorBoard scalar export kept as JSON → the long CSV `collapsewatch ingest` reads (docs/lab/public_runs.md).

Some projects dump a run's TensorBoard scalars into one JSON object, a list of points per tag — ``{"train/reward":
[{"step": 10, "value": 0.41, "wall_time": 1777190000.0}, …], …}`` (sanjuhs/open-env-meta-final-hackathon's
``training/reports/<run>/tensorboard_scalars.json``, from TRL's TensorBoard callback: tags ``train/<TRL key>``). This
script writes it as the long table TensorBoard's and tbparse's CSV downloads are — ``step,tag,value,wall_time``, one
row per point — which ingest pivots to one row per step and maps by the tags' keys (``train/`` stripped, as for
TRL's TensorBoard logs). Nothing is renamed or dropped here. A document that is not such an object is one line naming
the file and what was found, nothing written.

    python lab/public/tb_scalars_json.py EXPORT.json OUT.csv
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def long_rows(doc: Any) -> Iterator[tuple[int, str, float, float | None]]:
    """(step, tag, value, wall_time) of every point, tag by tag in the file's order."""
    if not isinstance(doc, dict) or not doc:
        raise ValueError(f"not a TensorBoard scalar export: the top level is a {type(doc).__name__}, not an object of "
                         "tags")
    for tag, points in doc.items():
        if not isinstance(points, list):
            raise ValueError(f"tag {tag!r} holds a {type(points).__name__}, not a list of points")
        for n, p in enumerate(points):
            if not isinstance(p, dict) or "step" not in p or "value" not in p:
                raise ValueError(f"tag {tag!r}, point {n}: not an object with step and value")
            yield int(p["step"]), tag, float(p["value"]), p.get("wall_time")


def convert(src: Path, out: Path) -> int:
    """Write ``src``'s points to ``out``; the number of rows."""
    rows = list(long_rows(json.loads(Path(src).read_text())))
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tag", "value", "wall_time"])
        w.writerows(rows)
    return len(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python lab/public/tb_scalars_json.py EXPORT.json OUT.csv", file=sys.stderr)
        return 2
    try:
        n = convert(Path(argv[0]), Path(argv[1]))
    except (OSError, ValueError) as exc:
        print(f"tb_scalars_json: {argv[0]}: {exc}", file=sys.stderr)
        return 1
    print(f"tb_scalars_json: {n} points of {argv[0]} → {argv[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
