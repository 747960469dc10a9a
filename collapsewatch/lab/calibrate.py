"""`lab calibrate`: choose each detector's thresholds on a training split, score them on the held-out split.

Split: within each drill kind (undrilled runs are one more kind) runs are sorted by name and alternate
train, held-out, train, … — deterministic, balanced per kind. ``--split-key seed`` style schemes are not needed
while names carry the seed.

Choice, per detector with an own drill (``score.OWN_DETECTORS``), over the small grid :data:`CANDIDATES`
(only that detector enabled, the others at their values): among candidates whose flags on the training split's
healthy runs are ≤ ``MAX_HEALTHY_WARN_PER_1K`` warnings per 1,000 steps and 0 criticals, take the highest
share of own-drill runs flagged at warning or above (phase ``*``), then the shorter median delay, then the
fewer false flags before onset, then the current value. If no candidate meets the healthy-run bound the one
with the fewest healthy-run warnings wins (the report says so). A detector that no candidate lets flag a single
training drill keeps its values (no evidence to move them); so do detectors without a drill.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from ..detectors import DetectorConfig
from .corpus import Corpus, flags
from .score import OWN_DETECTORS, score

MAX_HEALTHY_WARN_PER_1K = 1.0

CANDIDATES: dict[str, dict[str, list[Any]]] = {
    # p05 bars up to 0.85: real drift on the built-in model moves the A>0 p05 to 0.4–0.9, never near 0.1
    "isdd": {"median_threshold": [0.8, 0.9, 0.95, 0.98], "p05_threshold": [0.1, 0.3, 0.5, 0.7, 0.85]},
    "lld": {"decay_change": [0.02, 0.05, 0.1], "slope_window": [15, 20, 30]},
    "grad": {"spike_factor": [3.0, 5.0, 8.0], "spike_z": [3.0, 5.0]},
    "entropy": {"blowup_factor": [1.3, 1.5, 2.0, 3.0]},
    "mismatch": {"abs_min": [0.01, 0.02, 0.05], "rise_factor": [1.5, 2.0, 3.0]},
    "starvation": {"warn_frac": [0.6, 0.7, 0.8, 0.9]},
}


def split(corpus: Corpus) -> tuple[list[str], list[str]]:
    """(train, held-out) run names: per drill kind, sorted by name, alternating."""
    train, held = [], []
    by_kind: dict[str, list[str]] = {}
    for run, lab in corpus.labels.items():
        by_kind.setdefault(lab.kind, []).append(run)
    for runs in by_kind.values():
        for i, run in enumerate(sorted(runs)):
            (train if i % 2 == 0 else held).append(run)
    return sorted(train), sorted(held)


def _own_row(table: pd.DataFrame, detector: str, kind: str, severity: str) -> dict[str, Any]:
    sel = table[(table["detector"] == detector) & (table["phase"] == "*") & (table["severity"] == severity)
                & (table["drill"] == kind)]
    return sel.iloc[0].to_dict() if len(sel) else {}


def _key(warn: dict[str, Any], crit: dict[str, Any]) -> tuple:
    healthy_warn = warn.get("false_healthy_per_1k") or 0.0
    healthy_crit = crit.get("false_healthy_per_1k") or 0.0
    ok = healthy_warn <= MAX_HEALTHY_WARN_PER_1K and healthy_crit == 0
    delay = warn.get("delay_median")
    return (ok, -healthy_warn if not ok else 0.0, warn.get("flagged_share") or 0.0,
            -(delay if delay is not None and not math.isnan(delay) else 1e9),
            -(warn.get("false_pre_onset_per_1k") or 0.0))


def calibrate(corpus: Corpus, base: DetectorConfig | None = None,
              echo: Callable[[str], None] = lambda s: None) -> tuple[DetectorConfig, dict[str, dict[str, Any]]]:
    """(calibrated config, chosen values per detector) from the corpus's training split."""
    base = base or DetectorConfig()
    train, _ = split(corpus)
    part = corpus.subset(train)
    kinds = {lab.kind for lab in part.labels.values()}
    chosen: dict[str, dict[str, Any]] = {}
    config = base
    for det, grid in CANDIDATES.items():
        kind = next((k for k, ds in OWN_DETECTORS.items() if det in ds and k in kinds), None)
        if kind is None:
            continue
        current = {k: getattr(getattr(base, det), k) for k in grid}
        best, best_key = None, None
        for combo in itertools.product(*grid.values()):
            values = dict(zip(grid, combo, strict=True))
            trial = replace(base, enabled=(det,), **{det: replace(getattr(base, det), **values)})
            table = score(flags(part, trial), part.labels.values(), part.near_best)
            key = (*_key(_own_row(table, det, kind, "warning"), _own_row(table, det, kind, "critical")),
                   values == current)
            if best_key is None or key > best_key:
                best, best_key = values, key
        assert best is not None and best_key is not None
        if not best_key[2]:
            echo(f"{det}: kept {current} (no candidate flags a training {kind} run at warning)")
            continue
        echo(f"{det}: {best} (train: flagged {best_key[2]:.0%} of {kind} runs"
             + ("" if best_key[0] else "; healthy-run bound NOT met") + ")")
        chosen[det] = best
        config = replace(config, **{det: replace(getattr(config, det), **best)})
    return config, chosen


def to_toml(chosen: dict[str, dict[str, Any]], header: str = "") -> str:
    """A detectors.toml holding the chosen values (``DetectorConfig.from_file`` reads it back)."""
    lines = [f"# {line}" for line in header.splitlines()]
    for det, values in chosen.items():
        lines += ["", f"[{det}]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ValueError(f"cannot write {v!r} to TOML")
