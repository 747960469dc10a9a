"""Ground truth per run for the lab: drill kind and onset, reward collapse, and user-supplied labels.

* **Drill onset**: ``drill.at_step`` from the run's config in the store (the built-in trainer records it).
* **Reward collapse** (the documented rule, one home): level = median of ``reward_mean`` over the last
  ``SMOOTH`` logged (non-NULL) points, undefined until ``SMOOTH`` points exist (warm-up: one lucky early rollout
  must not set the best); best = running max of the level. The collapse step is the first step where
  best ≥ ``MIN_BEST``, level ≤ ``COLLAPSE_FRAC`` × best, and the level then stays ≤ ``RECOVER_FRAC`` × that
  best *for the rest of the run and for at least* ``SUSTAIN`` *more logged points* (sustained: a dip the run
  recovers from is not a collapse, and neither is a dip in the run's last ``SUSTAIN`` points, which has had no
  time to recover — the last level then comes from a window disjoint from the one that first fell).
  ``MIN_BEST`` 0.1 keeps runs that never learned out (a best under one success in ten is within a rollout's
  noise of 0) and keeps runs whose best is ≈ 0.15 in: the built-in warm starts succeed at ≈ 0.2, and a run that
  peaks at a level of 0.15 and then scores 0 for 300 steps collapsed.
* **Near best**: the severity gate's rule (``detectors.severity.near_best_points``) — a ``critical`` flag
  there breaks the severity promise (no critical near the best reward); one definition for the gate and the lab.
* **User labels**: a CSV with columns ``run, kind, onset, collapse`` (empty cells = none) overrides the
  derived labels of the runs it names — for TRL / verl / ingested histories whose config has no drill.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..detectors.config import DetectorConfig
from ..detectors.severity import near_best_points

SMOOTH = 10
MIN_BEST = 0.1
COLLAPSE_FRAC = 0.5
RECOVER_FRAC = 0.75
SUSTAIN = 10


@dataclass(frozen=True)
class RunLabel:
    """What is known about one run: the drill (kind "" = none), its onset and the reward collapse step."""

    run: str
    kind: str
    onset: int | None
    collapse: int | None
    first_step: int
    last_step: int

    @property
    def n_steps(self) -> int:
        return self.last_step - self.first_step + 1

    @property
    def healthy(self) -> bool:
        """Undrilled and no reward collapse: every flag on it is a false flag."""
        return not self.kind and self.collapse is None


def reward_level(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH) -> tuple[np.ndarray, np.ndarray]:
    """(level, running best) per row: trailing median over the last ``smooth`` non-NaN points, NaN until
    ``smooth`` of them exist (the warm-up), and its running max (-inf before the first level)."""
    reward = np.asarray(reward, dtype="float64")
    logged = ~np.isnan(reward)
    level = np.full(len(reward), np.nan)
    level[logged] = pd.Series(reward[logged]).rolling(smooth, min_periods=smooth).median().to_numpy()
    best = np.fmax.accumulate(np.where(np.isnan(level), -np.inf, level))
    return level, best


def reward_collapse(steps: np.ndarray, reward: np.ndarray, smooth: int = SMOOTH,
                    sustain: int = SUSTAIN) -> int | None:
    """First step of a sustained reward collapse by the rule of the module docstring, or None."""
    level, best = reward_level(steps, reward, smooth)
    defined = np.flatnonzero(~np.isnan(level))  # rows with a level: logged points past the warm-up
    for j, i in enumerate(defined):
        b = best[i]
        if not (b >= MIN_BEST and level[i] <= COLLAPSE_FRAC * b):
            continue
        later = level[defined[j + 1:]]
        if len(later) < sustain:  # too close to the run's end to tell a dip from a collapse (nor can any later row)
            return None
        if not np.any(later > RECOVER_FRAC * b):
            return int(steps[i])
    return None


def near_best_steps(steps: np.ndarray, reward: np.ndarray, cfg: DetectorConfig | None = None) -> set[int]:
    """Steps where the reward is at or near its running best by the severity gate's own rule
    (:func:`collapsewatch.detectors.severity.near_best_points`, one home): a ``critical`` flag there breaks
    the promise the gate makes."""
    steps, reward = np.asarray(steps), np.asarray(reward, dtype="float64")
    keep = ~np.isnan(reward)
    ok = near_best_points(reward[keep], cfg)
    return {int(s) for s, k in zip(steps[keep], ok, strict=True) if k}


def drill_of(config: Mapping[str, Any] | str | None) -> tuple[str, int | None]:
    """(kind, onset) from a run's stored config (parsed, or its JSON); ("", None) without a drill."""
    if isinstance(config, str) or config is None:
        try:
            config = json.loads(config) if config else {}
        except json.JSONDecodeError:
            return "", None
    drill = config.get("drill") or {}
    if not drill.get("kind"):
        return "", None
    return str(drill["kind"]), int(drill["at_step"])


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
              user: dict[str, str | int | None] | None = None) -> RunLabel:
    """The run's label: drill from its config, collapse by the rule; a user label overrides both."""
    kind, onset = drill_of(config)
    collapse = reward_collapse(steps, reward)
    if user is not None:
        kind, onset, collapse = str(user["kind"] or ""), user["onset"], user["collapse"]  # type: ignore[assignment]
    if kind and onset is None:
        raise ValueError(f"run {run!r}: kind {kind!r} given without an onset step")
    first, last = (int(steps[0]), int(steps[-1])) if len(steps) else (0, -1)
    return RunLabel(run, kind, onset, collapse, first, last)
