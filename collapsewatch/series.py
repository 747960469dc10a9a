"""The ``collapsewatch/…`` series: the per-step summaries collapsewatch adds to the metrics a framework already sends
to its trackers — TRL's ``logs`` dict (every ``report_to`` backend: W&B, TensorBoard, MLflow, trackio …) and verl's
step metrics (its ``Tracking`` backends). The names, what each one reads, the severity number and the rule that picks
each value live here, once; docs/trl.md and docs/verl.md print :func:`markdown_table`.

The rule. A monitor finishes a step when the next one begins (the recorder thread), so when the framework logs step
N the newest finished step S is usually N − 1. At each log call:

* ``collapsewatch/step`` = S; nothing at all is added while S has not moved since the last call;
* every other column-backed series gets its newest value at a step ≤ S — the value the store holds for that step —
  sent once: a series with nothing newer since its last send, or NULL / NaN there, is left out (never 0). The
  sentinels (scored every ``sentinel_every`` steps) therefore appear when a new scoring exists;
* ``collapsewatch/severity`` = the worst severity of the detector events raised at steps ≤ S (:data:`SEVERITY_LEVEL`:
  0 none, 1 info, 2 warning, 3 critical); left out when the detectors are off.

Values are rank-local: each process adds its own rank's (the trackers log rank 0's). Reading them costs no device
sync: the recorder publishes a :class:`Snapshot` after each step it finishes, and the training thread only reads it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from .catalogue import by_name
from .detectors.events import SEVERITY_LEVEL

PREFIX = "collapsewatch/"


@dataclass(frozen=True)
class Series:
    """One series: its key in the framework's logs, the catalogue step column it reads (None: step / severity)."""

    key: str
    column: str | None
    label: str


STEP_KEY, SEVERITY_KEY = PREFIX + "step", PREFIX + "severity"
SERIES: tuple[Series, ...] = (
    Series(STEP_KEY, None, "the step the values are of"),
    Series(PREFIX + "ratio_p05_pos", "ratio_p05_pos", "A>0 ratio, p05"),
    Series(PREFIX + "ratio_p50_pos", "ratio_p50_pos", "A>0 ratio, median"),
    Series(PREFIX + "sentinel_logp_correct_mean", "sentinel_logp_correct_mean", "sentinel L"),
    Series(PREFIX + "sentinel_logp_incorrect_mean", "sentinel_logp_incorrect_mean", "sentinel I"),
    Series(PREFIX + "entropy_mean_correct", "entropy_mean_correct", "entropy of correct responses"),
    Series(PREFIX + "entropy_mean_incorrect", "entropy_mean_incorrect", "entropy of incorrect responses"),
    Series(PREFIX + "zero_std_group_frac", "zero_std_group_frac", "zero-std group share"),
    Series(SEVERITY_KEY, None, "worst severity so far"),
)
"""Every series, in the order it is added to the logs."""

COLUMNS: tuple[str, ...] = tuple(s.column for s in SERIES if s.column is not None)
"""The catalogue step columns the series read."""

_DEFINITIONS = {
    STEP_KEY: "S, the last step the monitor had finished when the framework logged: usually the logged step − 1 (a "
              "step is finished when the next one begins); the run's last step is finished before its last log "
              "(TRL: train()'s summary log; verl: the workers close their Monitors inside that step). The other "
              "series are the store's values at steps ≤ S",
    SEVERITY_KEY: "the worst severity of the detector events raised at steps ≤ S: " + ", ".join(
        f"{level} {name}" for name, level in SEVERITY_LEVEL.items()) + "; left out when the detectors are off",
}


def definition(series: Series) -> str:
    """What ``series`` holds: the catalogue's formula and population for a column, else its own words."""
    if series.column is None:
        return _DEFINITIONS[series.key]
    m = by_name("step")[series.column]
    return f"`{m.name}`: {m.formula} (over {m.population}{', ' + m.unit if m.unit else ''})"


def severity_level(severities: Iterable[str]) -> int:
    """The worst of ``severities`` as :data:`SEVERITY_LEVEL`'s number (0 when there is none)."""
    return max((SEVERITY_LEVEL.get(str(s), 0) for s in severities), default=0)


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, (str, bool)):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Snapshot:
    """What the monitor holds after finishing ``step``: each column's newest non-NULL, finite value as (its step,
    value), and the worst severity so far (None: the detectors are off). Immutable: the recorder thread replaces
    it whole after each step; a reader never sees one half-updated."""

    step: int
    values: Mapping[str, tuple[int, float]]
    severity: int | None


def after_step(prev: Snapshot | None, step: int, row: Mapping[str, Any], severities: Iterable[str] | None) -> Snapshot:
    """``prev`` advanced by one finished step: its metrics ``row`` (step metrics and logged scalars by column) and
    the severities of the events raised there (None: the detectors are off)."""
    values = dict(prev.values) if prev is not None else {}
    for col in COLUMNS:
        v = _finite(row.get(col))
        if v is not None:
            values[col] = (step, v)
    severity = None
    if severities is not None:
        severity = max(prev.severity or 0 if prev is not None else 0, severity_level(severities))
    return Snapshot(step if prev is None else max(step, prev.step), MappingProxyType(values), severity)


class Feed:
    """One consumer's side of the rule (module docstring): remembers what it sent, so each value goes out once."""

    def __init__(self) -> None:
        self._step: int | None = None
        self._sent: dict[str, int] = {}  # column -> step of the value last sent

    def take(self, snap: Snapshot | None) -> dict[str, float]:
        """The series to add to one log call, from the newest snapshot (empty when S has not moved)."""
        if snap is None or (self._step is not None and snap.step <= self._step):
            return {}
        self._step = snap.step
        out: dict[str, float] = {}
        for s in SERIES:
            if s.key == STEP_KEY:
                out[s.key] = float(snap.step)
            elif s.key == SEVERITY_KEY:
                if snap.severity is not None:
                    out[s.key] = float(snap.severity)
            elif s.column in snap.values:
                step, value = snap.values[s.column]
                if step > self._sent.get(s.column, -1):
                    out[s.key], self._sent[s.column] = value, step
        return out


class StoreSnapshots:
    """Snapshots read back from a store, for a process that holds no Monitor of the run (verl's driver; its workers
    write the store): rank ``rank``'s finished steps — those whose step-metrics row has arrived — read incrementally,
    only steps after the last one read. The severity comes from the event rows (every write of an episode) of steps
    ≤ S; the workers' Monitors always run the detectors, so it is 0 when none fired."""

    def __init__(self, store: str | os.PathLike, run: str, rank: int = 0) -> None:
        self.path, self.run, self.rank = store, run, rank
        self.snap: Snapshot | None = None
        self._store: Any = None

    def read(self) -> Snapshot | None:
        """The newest snapshot (the previous one while no new step is finished, None before the first)."""
        from .store.opening import StoreNotFoundError
        from .store.queries import Store, event_severities, step_rows

        if self._store is None:
            try:
                self._store = Store(self.path)
            except StoreNotFoundError:  # no worker has written it yet
                return self.snap
        if not self._store.has_run(self.run):
            return self.snap
        rows = step_rows(self._store, self.run, COLUMNS, after=self.snap.step if self.snap else -1, rank=self.rank)
        finished = rows.loc[rows["has_metrics"].astype(bool), "step"]
        if finished.empty:
            return self.snap
        last, snap = int(finished.max()), self.snap
        for rec in rows[rows["step"] <= last].to_dict("records"):
            snap = after_step(snap, int(rec["step"]), rec, None)
        worst = severity_level(event_severities(self._store, self.run, self.rank, last))
        self.snap = replace(snap, severity=worst)
        return self.snap


def markdown_table() -> str:
    """:data:`SERIES` as the Markdown table docs/trl.md and docs/verl.md print."""
    rows = ["| series | what | definition |", "|---|---|---|"]
    rows += [f"| `{s.key}` | {s.label} | {definition(s)} |" for s in SERIES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m collapsewatch.series: the table docs/trl.md and docs/verl.md print
    print(markdown_table(), end="")


__all__ = ["COLUMNS", "PREFIX", "SERIES", "SEVERITY_KEY", "SEVERITY_LEVEL", "STEP_KEY", "Feed", "Series", "Snapshot",
           "StoreSnapshots", "after_step", "definition", "markdown_table", "severity_level"]
