"""A Jupyter notebook's training-progress table → a CSV `collapsewatch ingest` reads (docs/lab/public_runs.md).

HF Trainer's ``NotebookProgressCallback`` draws the training log as an HTML table in a cell's output
(``transformers.utils.notebook.text_to_html_table``: ``<th>`` names, ``<td>`` values, floats printed with 6
decimals). In TRL 0.14–0.16-era notebooks (Unsloth's GRPO notebooks among them) every logged key is a column, its
``/`` printed as `` / `` (``completions / mean_length``); today's transformers prints only Step and Training Loss. This
lab script takes the largest such table holding a ``reward`` column (or the one in cell N) and writes it as a CSV with
TRL's own key names, which ingest maps: ``Step`` → ``step``, ``Training Loss`` → ``loss``, ``a / b`` → ``a/b``. A cell
that is not a number (``No log``) is left empty.

    python nb_table_csv.py NOTEBOOK.ipynb OUT.csv [--cell N]
"""

from __future__ import annotations

import csv
import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

TABLE, TH, TD, TR = (re.compile(p, re.S) for p in (r"<table.*?</table>", r"<th>(.*?)</th>", r"<td>(.*?)</td>",
                                                    r"<tr>(.*?)</tr>"))
NAMES = {"Step": "step", "Training Loss": "loss"}


def tables(notebook: dict) -> Iterator[tuple[int, list[str], list[list[str]]]]:
    """(cell index, header, rows) of every HTML table in the notebook's outputs."""
    for i, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []) or []:
            data = output.get("data")
            text = data.get("text/html", "") if isinstance(data, dict) else ""
            text = "".join(text) if isinstance(text, list) else text
            for table in TABLE.findall(text):
                head = [html.unescape(x).strip() for x in TH.findall(table)]
                body = table.split("</thead>")[-1]
                rows = [[html.unescape(x).strip() for x in TD.findall(r)] for r in TR.findall(body)]
                yield i, head, [r for r in rows if r]


def key(name: str) -> str:
    return NAMES.get(name, re.sub(r"\s*/\s*", "/", name))


def number(text: str) -> str:
    try:
        float(text)
    except ValueError:
        return ""
    return text


def convert(notebook: dict, cell: int | None = None) -> tuple[int, list[str], list[list[str]]]:
    """The chosen table: its cell, CSV header and rows."""
    found = [t for t in tables(notebook) if "reward" in t[1] and "Step" in t[1] and (cell is None or t[0] == cell)]
    if not found:
        raise ValueError("no progress table with Step and reward columns" + (f" in cell {cell}" if cell is not None else ""))
    i, head, rows = max(found, key=lambda t: len(t[2]))
    return i, [key(h) for h in head], [[number(v) for v in r] for r in rows]


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--cell"):
        print("usage: python lab/public/nb_table_csv.py NOTEBOOK.ipynb OUT.csv [--cell N]", file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    try:
        i, head, rows = convert(json.loads(src.read_text()), int(argv[3]) if len(argv) == 4 else None)
    except (OSError, ValueError) as e:
        print(f"error: {src}: {e!r}", file=sys.stderr)
        return 1
    with dst.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        w.writerows(rows)
    print(f"{src}: cell {i}, {len(rows)} steps → {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
