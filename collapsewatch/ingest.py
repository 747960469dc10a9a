"""`collapsewatch ingest`: import the logged step scalars of a run made without the monitor.

Reads a Hugging Face / TRL ``trainer_state.json`` (its ``log_history``), a JSONL file of
``{"step": N, "key": value, ...}`` rows, or verl's file logger (``trainer.logger=[file]``: one
``{"step": N, "data": {"actor/ppo_kl": ...}}`` line per step), and writes them as a run whose ``scalars`` keep the
original keys (TRL's ``clip_ratio/region_mean``, verl's ``actor/pg_clipfrac`` …) and, where a key means exactly a
catalogue metric, a second row under the catalogue's name (``KEY_MAP``: ``learning_rate`` → ``lr``,
``actor/ppo_kl`` → ``ppo_kl``). The ``steps`` view shows the logged-scalar columns (``lr``, ``grad_norm``, …); the
others are in ``scalars``. Per-token metrics cannot be recovered from logs: they are NULL.

``follow=True`` (``collapsewatch ingest --follow``) tails a growing file: :class:`Tail` reads the complete lines
appended since its last poll and publishes them as one flush; the run stays ``running`` until the tail stops.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .runlock import rank_has_rows
from .store.writer import StoreWriter

KEY_MAP = {
    "learning_rate": "lr", "train/learning_rate": "lr", "train/grad_norm": "grad_norm", "train/loss": "loss",
    # verl 0.9.1 (trainer/ppo/ray_trainer.py, metric_utils.py, core_algos.compute_policy_loss_vanilla,
    # rollout_corr_helper.py): only keys whose definition is the catalogue metric's
    "actor/grad_norm": "grad_norm", "actor/lr": "lr", "actor/pg_loss": "loss_policy",
    "actor/pg_clipfrac": "clip_region_frac",      # mean over mask of [clipped branch active] = clip_low ∨ clip_high
    "actor/pg_clipfrac_lower": "dual_clip_frac",  # A < 0 ∧ −A·r > −A·c  ⇔  r > c (verl's dual clip, c = 3)
    "actor/ppo_kl": "ppo_kl",                     # masked mean of −clamp(logp − logp_old, ±20)
    "actor/entropy": "entropy_mean",              # agg_loss(entropy, loss_agg_mode): the token mean in token-mean
    "critic/score/mean": "reward_mean",           # mean over sequences of Σ token_level_scores (verl leaves aborted,
    #                                               empty responses out when any other exists)
    "response_length/mean": "response_length_mean",  # Σ attention over the response: equal without tool tokens (verl
    #                                                  counts multi-turn tool observations, the catalogue does not)
    "response_length/clip_ratio": "truncated_frac",  # share of responses that filled the length budget
    "rollout_corr/chi2_token": "is_chi2",         # mean over mask of ρ² − 1, ρ = π_old / π_rollout per token
    "timing_s/step": "step_time", "timing_s/gen": "rollout_time",
}
"""Logged key → catalogue name, where the definitions agree (the one home of this mapping). Keys not listed
(verl's truncated-weight ``rollout_corr/rollout_is_eff_sample_size``, ``critic/advantages/*`` …) keep their own
name only."""


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
    return _json_lines(text, path, 1)


def _json_lines(text: str, path: Path, first_line: int) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(text.splitlines(), first_line):
        if line.strip():
            try:
                rows.append(_flat(json.loads(line)))
            except json.JSONDecodeError as e:
                raise ValueError(f"{str(path)!r} line {i} is not JSON: {e}") from e
    return rows


def _flat(row: Any) -> dict[str, Any]:
    """verl's ``{"step": N, "data": {...}}`` as ``{"step": N, ...}``; other rows unchanged."""
    if isinstance(row, dict) and isinstance(row.get("data"), dict) and "step" in row:
        return {**row["data"], "step": row["step"]}
    return row if isinstance(row, dict) else {}


def _columns(rows: list[dict[str, Any]], run: str) -> dict[str, list]:
    cols: dict[str, list] = {"run": [], "rank": [], "step": [], "key": [], "value": []}
    for r in rows:
        step = r.get("step", r.get("global_step"))
        if not isinstance(step, int):
            continue
        for key, value in r.items():
            if key in ("step", "global_step") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            for k in {key, KEY_MAP.get(key, key)}:
                cols["run"].append(run)
                cols["rank"].append(0)
                cols["step"].append(step)
                cols["key"].append(k)
                cols["value"].append(float(value) if math.isfinite(value) else None)
    return cols


def _new_run(store: str | os.PathLike, path: Path, run: str) -> StoreWriter:
    if not path.is_file():
        raise ValueError(f"file {str(path)!r} does not exist")
    writer = StoreWriter(store, run)
    if rank_has_rows(writer.root, run, 0):  # writer.root: the folder, or an object store's local spool (its run rows)
        raise ValueError(f"run {run!r} already exists in {str(store)!r}")
    writer.set_run_info(config={"ingested_from": str(path.resolve())})
    return writer


def ingest_file(store: str | os.PathLike, file: str | os.PathLike, run: str) -> int:
    path = Path(file)
    writer = _new_run(store, path, run)
    cols = _columns(_rows(path), run)
    if not cols["step"]:
        raise ValueError(f"{str(path)!r} holds no rows with an integer 'step'")
    writer.append("scalars", cols)
    writer.flush("finished")
    return len(set(cols["step"]))


class Tail:
    """Follows a JSONL log as it grows (verl's file logger writes one line per step, unbuffered). Each
    :meth:`poll` ingests the complete lines appended since the last one as one flush; :meth:`close` marks the run
    finished. A partial last line (the logger mid-write) waits for the next poll."""

    def __init__(self, store: str | os.PathLike, file: str | os.PathLike, run: str) -> None:
        self.path = Path(file)
        self.run = run
        self.writer = _new_run(store, self.path, run)
        self.writer.flush()  # listed as running before the first line
        self._offset, self._line = 0, 1
        self.steps: set[int] = set()

    def poll(self) -> int:
        """Ingest the new complete lines; returns how many steps they held."""
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            return 0
        text = chunk[:end].decode()
        self._offset += end
        rows = _json_lines(text, self.path, self._line)
        self._line += text.count("\n")
        cols = _columns(rows, self.run)
        if cols["step"]:
            self.writer.append("scalars", cols)
            self.writer.flush()
        self.steps.update(cols["step"])
        return len(set(cols["step"]))

    def close(self) -> None:
        self.poll()
        self.writer.flush("finished")
