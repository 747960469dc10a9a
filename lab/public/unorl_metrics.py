"""One repository's per-run metrics snapshot → a JSONL file `collapsewatch ingest` reads (docs/lab/public_runs.md).

Quarkstar/unorl (SkyRL runs of Qwen3-4B-Base on maths RLVR) keeps each run's history as ``research/data/<run>.json``:
one JSON object (``run_id``, ``config``, ``analysis`` — the authors' words —, ``provenance`` …) whose ``metrics`` is a
list of ``{"step": n, "metrics": {key: value, …}}``, the dict SkyRL's trainer sent its tracker at that step, under
SkyRL's own keys (``reward/avg_raw_reward``, ``policy/policy_entropy``, ``policy/grad_norm``, ``eval/<set>/…`` …).
Step 0 holds the evaluation before training alone. This script only flattens that list, one dict a step with its
``step``: ingest reads SkyRL's keys as it reads any SkyRL log (``collapsewatch/ingest/key_table.py``). A document
without such a list, or an entry without a step or a metrics dict, is one line naming it, nothing written.

    python lab/public/unorl_metrics.py RUN.unorl.json OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path: its sibling
import jsonl_convert  # noqa: E402


def convert(doc: Any) -> list[dict[str, Any]]:
    """``doc["metrics"]`` → one dict per step, steps ascending: ``{"step": n, **entry["metrics"]}``."""
    entries = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no list 'metrics' at the top level")
    out: dict[int, dict[str, Any]] = {}
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict) or "step" not in entry or not isinstance(entry.get("metrics"), dict):
            raise ValueError(f"metrics[{n}] is not an object with a step and a metrics dict")
        step = int(entry["step"])
        if step in out:
            raise ValueError(f"metrics[{n}]: step {step} appears twice")
        out[step] = {"step": step, **entry["metrics"]}
    return [out[s] for s in sorted(out)]


def main(argv: list[str]) -> int:
    return jsonl_convert.main_text(argv, "python lab/public/unorl_metrics.py RUN.unorl.json OUT.jsonl",
                                   lambda text: convert(json.loads(text)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
