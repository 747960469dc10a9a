"""`collapsewatch ingest`: import the logged step scalars of a run made without the monitor.

Reads a Hugging Face / TRL ``trainer_state.json`` (its ``log_history``) or a JSONL file of
``{"step": N, "key": value, ...}`` rows, and writes them as a finished run whose ``scalars`` keep the original
keys (TRL's ``clip_ratio/region_mean`` …) and whose ``steps`` view shows the catalogue's names where a key
maps onto one (``learning_rate`` → ``lr``). Per-token metrics cannot be recovered from logs: they are NULL.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .store.writer import StoreWriter

KEY_MAP = {"learning_rate": "lr", "train/learning_rate": "lr", "train/grad_norm": "grad_norm",
           "train/loss": "loss", "actor/grad_norm": "grad_norm", "actor/lr": "lr", "actor/pg_loss": "loss_policy"}


def _rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{str(path)!r} is not valid JSON: {e}") from e
        if not isinstance(data, dict) or "log_history" not in data:
            raise ValueError(f"{str(path)!r} has no 'log_history' (expected an HF/TRL trainer_state.json)")
        return data["log_history"]
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{str(path)!r} line {i} is not JSON: {e}") from e
    return rows


def ingest_file(store: str | os.PathLike, file: str | os.PathLike, run: str) -> int:
    path = Path(file)
    if not path.is_file():
        raise ValueError(f"file {str(path)!r} does not exist")
    if (Path(store) / run / "runs").is_dir():
        raise ValueError(f"run {run!r} already exists in {str(store)!r}")
    rows = [r for r in _rows(path) if isinstance(r.get("step", r.get("global_step")), int)]
    if not rows:
        raise ValueError(f"{str(path)!r} holds no rows with an integer 'step'")
    cols: dict[str, list] = {"run": [], "rank": [], "step": [], "key": [], "value": []}
    for r in rows:
        step = r.get("step", r.get("global_step"))
        for key, value in r.items():
            if key in ("step", "global_step") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            for k in {key, KEY_MAP.get(key, key)}:
                cols["run"].append(run)
                cols["rank"].append(0)
                cols["step"].append(step)
                cols["key"].append(k)
                cols["value"].append(float(value) if math.isfinite(value) else None)
    writer = StoreWriter(store, run)
    writer.set_run_info(config={"ingested_from": str(path.resolve())})
    writer.append("scalars", cols)
    writer.flush("finished")
    return len({s for s in cols["step"]})
