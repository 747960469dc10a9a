"""A list of per-step log dicts inside a JSON document → a JSONL file `collapsewatch ingest` reads
(docs/lab/public_runs.md).

Some projects keep their runs' histories in one results file: a JSON object whose key path (dotted: ``training.
gsm8k_partial_e3_clean.rows`` in cfw20/cs224r-project-e3's ``project_writeup/results_version_G.json``) leads to a
list of the dicts a tracker logged, one per step (W&B's ``_step`` and the framework's own keys, verl's there). This
script writes that list one dict a line, unchanged: ingest reads the step and the keys as it reads any JSONL log. A
path that does not lead to a list of objects is one line naming the missing key, nothing written.

    python lab/public/json_rows.py RESULTS.json KEY.PATH OUT.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402


def rows_at(doc: Any, path: str) -> list[dict[str, Any]]:
    """The list of dicts at the dotted ``path`` of ``doc``."""
    at: Any = doc
    for n, key in enumerate(path.split(".")):
        if not isinstance(at, dict) or key not in at:
            here = ".".join(path.split(".")[:n]) or "the top level"
            keys = ", ".join(sorted(at)[:8]) if isinstance(at, dict) else type(at).__name__
            raise KeyError(f"no key {key!r} at {here} (there: {keys})")
        at = at[key]
    if not isinstance(at, list) or not all(isinstance(r, dict) for r in at):
        raise ValueError(f"{path} is not a list of objects")
    return at


def main(argv: list[str]) -> int:
    return jsonl_convert.main_json(argv, "python lab/public/json_rows.py RESULTS.json KEY.PATH OUT.jsonl", rows_at)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
