"""Ground truth per run for the lab: drill kind and onset, reward collapse, and user-supplied labels.

* **Drill onset** and **reward collapse**: by the product's rule (:mod:`collapsewatch.reward`, one home); a derived
  label the run's end decides (``reward.undecided``) carries why in ``RunLabel.undecided`` and is neither healthy
  nor collapsed; where the reward never had a best to fall from, the run's evaluation of its starting policy is
  the witness (``reward.start_collapse``, ``RunLabel.witness``).
* **Near best**: the severity gate's rule (``detectors.severity.near_best_points``) — a ``critical`` flag
  there breaks the severity promise (no critical near the best reward); one definition for the gate and the lab.
* **User labels**: a CSV with columns ``run, kind, onset, collapse`` (empty cells = none) overrides the
  derived labels of the runs it names — for TRL / verl / ingested histories whose config has no drill.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..detectors.config import DetectorConfig
from ..detectors.severity import near_best_points
from ..reward import (
    COLLAPSE_FRAC,
    MIN_BEST,
    RECOVER_FRAC,
    SMOOTH,
    SUSTAIN,
    drill_of,
    reward_collapse,
    reward_level,
    start_collapse,
    undecided,
)

__all__ = ["COLLAPSE_FRAC", "MIN_BEST", "RECOVER_FRAC", "SMOOTH", "SUSTAIN", "RunLabel", "drill_of", "label_run",
           "near_best_steps", "read_label_file", "reward_collapse", "reward_level", "start_collapse", "undecided"]


@dataclass(frozen=True)
class RunLabel:
    """What is known about one run: the drill (kind "" = none), its onset and the reward collapse step;
    ``undecided``: why a derived "no collapse" rests on the run's last points ('' where it does not);
    ``witness``: "evaluation" where the starting evaluation dated the collapse (``reward.start_collapse``), else ''."""

    run: str
    kind: str
    onset: int | None
    collapse: int | None
    first_step: int
    last_step: int
    undecided: str = ""
    witness: str = ""

    @property
    def n_steps(self) -> int:
        return self.last_step - self.first_step + 1

    @property
    def healthy(self) -> bool:
        """Undrilled, no reward collapse and a label its end does not decide: every flag on it is a false flag."""
        return not self.kind and self.collapse is None and not self.undecided


def near_best_steps(steps: np.ndarray, reward: np.ndarray, cfg: DetectorConfig | None = None) -> set[int]:
    """Steps where the reward is at or near its running best by the severity gate's own rule
    (:func:`collapsewatch.detectors.severity.near_best_points`, one home): a ``critical`` flag there breaks
    the promise the gate makes."""
    steps, reward = np.asarray(steps), np.asarray(reward, dtype="float64")
    keep = ~np.isnan(reward)
    ok = near_best_points(reward[keep], cfg)
    return {int(s) for s, k in zip(steps[keep], ok, strict=True) if k}


def read_label_file(path: str | os.PathLike) -> dict[str, dict[str, str | int | None]]:
    """run → {kind, onset, collapse} from a labels CSV (header: run, kind, onset, collapse)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"labels file {str(p)!r} does not exist")
    out: dict[str, dict[str, str | int | None]] = {}
    with p.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = {"run", "kind", "onset", "collapse"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"labels file {str(p)!r}: missing column(s) {sorted(missing)}; "
                             "expected run, kind, onset, collapse")
        for line, row in enumerate(reader, start=2):
            try:
                out[row["run"]] = {"kind": (row["kind"] or "").strip(),
                                   "onset": _int_or_none(row["onset"]), "collapse": _int_or_none(row["collapse"])}
            except ValueError as e:
                raise ValueError(f"labels file {str(p)!r}, line {line}: {e}") from e
    return out


def _int_or_none(text: str | None) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"step {text!r} is not an integer")
    return int(value)


def label_run(run: str, config: Mapping[str, Any] | str | None, steps: np.ndarray, reward: np.ndarray,
              user: dict[str, str | int | None] | None = None, score: np.ndarray | None = None) -> RunLabel:
    """The run's label: drill from its config, collapse by the rule (undecided where the run's end decides it; the
    starting evaluation its witness where the reward has no best, ``score``: the evaluation per row, NaN where none);
    a user label overrides all three."""
    kind, onset = drill_of(config)
    collapse = reward_collapse(steps, reward)
    witness = ""
    if collapse is None and score is not None and (collapse := start_collapse(steps, reward, score)) is not None:
        witness = "evaluation"
    why = "" if collapse is not None else undecided(steps, reward)
    if user is not None:
        kind, onset, collapse = str(user["kind"] or ""), user["onset"], user["collapse"]  # type: ignore[assignment]
        why, witness = "", ""
    if kind and onset is None:
        raise ValueError(f"run {run!r}: kind {kind!r} given without an onset step")
    first, last = (int(steps[0]), int(steps[-1])) if len(steps) else (0, -1)
    return RunLabel(run, kind, onset, collapse, first, last, why, witness)
