"""DetectorSuite (online, one row per step) and detect_frame (offline, a DataFrame): the same code path.

Online == offline: ``detect_frame`` feeds the frame's rows through a fresh suite, so the same rows give the
same episodes. Per-step cost is O(history_steps): detectors are stateless functions of a bounded deque of
normalised rows; the only other state is the episode tracker's per-phase record and a few counters.

Restarts. A row whose step is ≤ the last step seen is a restart from an earlier checkpoint: the suite
rolls back to its state just before that step (history rows and tracker states with step ≥ it are dropped;
rows are kept ``rollback_steps`` beyond the longest window and the tracker is snapshotted at every step, so
this is exact for restarts up to ``rollback_steps`` rows back), then processes the row. Episodes that
started on the discarded branch move to :attr:`DetectorSuite.retracted` (their rows stay in the store unless
the caller removes them); episodes open across the restart step are re-emitted with their ``step_end`` cut
back. An older restart starts the detectors cold (``cold_restarts`` counts these; only then can online and
offline differ).

Ranks. A suite watches one stream: the Monitor runs one per rank. ``detect_frame`` refuses a frame that
mixes runs or ranks unless ``rank=`` picks one; ``detect_each`` runs one suite per (run, rank).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import pandas as pd

from .config import DetectorConfig
from .events import Event, PhaseState, Verdict, advance
from .history import History, Row, column_kinds, normalise
from .registry import specs
from .rules import rules_digest
from .severity import gate


class Detector(Protocol):
    name: str
    phases: tuple[str, ...]
    inputs: tuple[str, ...]

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict: ...


REGISTRY: dict[str, type] = {name: spec.cls for name, spec in specs().items()}
PHASES: dict[str, tuple[str, ...]] = {name: spec.phases for name, spec in specs().items()}
"""Detector → the phases it reports: the one list that phase names given by users are checked against."""
PRIMARY: dict[str, tuple[str, ...]] = {name: spec.primary for name, spec in specs().items()}
"""Columns whose presence makes a detector applicable (ISDD additionally needs an off-policy step)."""


@dataclass(frozen=True)
class Applicability:
    """Whether a detector can say anything about this stream so far."""

    status: Literal["applicable", "not_applicable", "no_data"]
    reason: str = ""


@dataclass(frozen=True)
class _Snapshot:
    step: int
    states: dict[tuple[str, str], PhaseState]
    seen: dict[str, int]


class DetectorSuite:
    """Runs the enabled detectors on one step stream; ``update(row)`` returns new or extended episodes."""

    def __init__(self, config: DetectorConfig | None = None):
        self.config = config or DetectorConfig()
        self.detectors: list[Detector] = [REGISTRY[name](self.config) for name in self.config.enabled]
        kinds = column_kinds()
        wanted = {"on_policy", "reward_mean", *(c for d in self.detectors for c in d.inputs)}  # reward: the gate
        self._columns = {c: kinds.get(c, "num") for c in sorted(wanted)}
        self._history = History(self.config.history_steps + self.config.rollback_steps)
        self._states: dict[tuple[str, str], PhaseState] = {}
        self._seen: dict[str, int] = {}
        self._snapshots: deque[_Snapshot] = deque(maxlen=self.config.rollback_steps + 1)  # +1: the state before
        self._episodes: dict[tuple[str, str, int], Event] = {}
        self._first_step: int | None = None
        self.retracted: list[Event] = []
        """Episodes that started on a branch a restart discarded (latest version of each)."""
        self.restarts = 0
        self.cold_restarts = 0
        self.rules = rules_digest(self.config)
        """Digest of the rules this suite runs (settings + rule code): stored with each episode it finds."""

    @property
    def last_step(self) -> int | None:
        return self._history.step if len(self._history) else None

    def update(self, row: Mapping[str, Any]) -> list[Event]:
        """Process one step row; return the episodes entered or extended at this step (and any cut back)."""
        r = normalise(row, self._columns)
        out = self._rollback(r.step) if len(self._history) and r.step <= self._history.step else []
        if self._first_step is None:
            self._first_step = r.step
        self._history.push(r)
        self._count(r)
        for det in self.detectors:
            timing = getattr(self.config, det.name)
            open_phases = frozenset(p for p in det.phases if self._state(det.name, p).episode is not None)
            for phase, finding in det.evaluate(self._history, open_phases).items():
                finding = gate(finding, det.name, self._history, self.config, phase)
                state, event = advance(self._state(det.name, phase), r.step, finding, det.name, phase,
                                       timing.confirm_steps, timing.exit_patience)
                self._states[(det.name, phase)] = state
                if event is not None:
                    self._episodes[event.key] = event
                    out.append(event)
        self._snapshots.append(_Snapshot(r.step, dict(self._states), dict(self._seen)))
        return out

    def episodes(self) -> list[Event]:
        """Every episode on the current branch, latest version, ordered by start step."""
        return sorted(self._episodes.values(), key=lambda e: (e.step_start, e.detector, e.phase))

    def open_episodes(self) -> list[Event]:
        """Episodes still open (in their exit-patience period included)."""
        return [s.episode for s in self._states.values() if s.episode is not None]

    def applicability(self) -> dict[str, Applicability]:
        """Per detector: applicable, not applicable (with the reason) or no data yet."""
        out = {}
        for det in self.detectors:
            if self._first_step is None:
                out[det.name] = Applicability("no_data", "no step seen yet")
            elif self._seen.get(det.name, 0) > 0:
                out[det.name] = Applicability("applicable")
            else:
                reason = specs()[det.name].why_not_applicable()
                if det.name == "isdd" and not self._seen.get("isdd_on_policy"):
                    reason = "ratio columns NULL on every step"
                out[det.name] = Applicability("not_applicable", reason)
        return out

    def _state(self, detector: str, phase: str) -> PhaseState:
        return self._states.get((detector, phase)) or PhaseState()

    def _count(self, r: Row) -> None:
        for det in self.detectors:
            present = any(c in r.values or c in r.nonfinite for c in PRIMARY[det.name])
            if det.name == "isdd" and r.flag("on_policy") is True:
                self._seen["isdd_on_policy"] = self._seen.get("isdd_on_policy", 0) + 1
                present = False
            if present:
                self._seen[det.name] = self._seen.get(det.name, 0) + 1

    def _rollback(self, step: int) -> list[Event]:
        """Return to the state just before ``step``; the episodes cut back are returned for re-writing."""
        self.restarts += 1
        self._history.truncate(step)
        while self._snapshots and self._snapshots[-1].step >= step:
            self._snapshots.pop()
        if self._snapshots:
            snap = self._snapshots[-1]
            self._states, self._seen = dict(snap.states), dict(snap.seen)
        else:  # before the first row (a fresh start), or older than the snapshots reach (cold)
            if self._first_step is not None and self._first_step < step:
                self.cold_restarts += 1
            self._history = History(self.config.history_steps + self.config.rollback_steps)
            self._states, self._seen, self._first_step = {}, {}, None
        restored = {s.episode.key: s.episode for s in self._states.values() if s.episode is not None}
        cut: list[Event] = []
        for key, event in list(self._episodes.items()):
            if event.step_end < step:
                continue
            if key in restored:
                self._episodes[key] = restored[key]
                cut.append(restored[key])
            else:
                del self._episodes[key]
                self.retracted.append(event)
        return cut


def final_branch(df: pd.DataFrame, order_by: str | None = "ts") -> pd.DataFrame:
    """The rows a suite ends up having processed, in step order.

    With an ``order_by`` column (arrival time) without NULLs, rows are replayed in that order and each row
    discards the earlier-arrived rows with step ≥ its own, exactly like :meth:`DetectorSuite.update`.
    Otherwise the arrival order is unknown: rows are sorted by step and the last row of each step (in frame
    order) wins. (The store's ``steps`` view already keeps the latest row per step.)
    """
    if order_by is not None and order_by in df.columns and not df[order_by].isna().any():
        arrived = df.sort_values(order_by, kind="stable")
        kept: list[int] = []
        steps: list[int] = []
        for pos, step in enumerate(arrived["step"].to_numpy()):
            while steps and steps[-1] >= step:
                steps.pop()
                kept.pop()
            steps.append(step)
            kept.append(pos)
        return arrived.iloc[kept]
    return df.drop_duplicates("step", keep="last").sort_values("step", kind="stable")


def replay(
    df: pd.DataFrame, config: DetectorConfig | None = None, *, rank: int | None = None, order_by: str | None = "ts",
) -> DetectorSuite:
    """A fresh suite fed one run's step rows (any order, repeated steps, NULL/NaN allowed).

    ``rank`` selects one rank of a frame with a ``rank`` column; a frame mixing ranks or runs without it is
    refused (use :func:`detect_each`). The suite answers ``episodes()`` and ``applicability()``.
    """
    frame = df
    if rank is not None:
        if "rank" not in frame.columns:
            raise ValueError("rank= given but the frame has no 'rank' column")
        frame = frame[frame["rank"] == rank]
    for col in ("run", "rank"):
        if col in frame.columns and frame[col].nunique(dropna=False) > 1:
            raise ValueError(f"frame mixes several {col}s {sorted(frame[col].unique().tolist())}: "
                             f"pass rank= or use detect_each")
    suite = DetectorSuite(config)
    for record in final_branch(frame, order_by).to_dict("records"):
        suite.update(record)
    return suite


def detect_frame(
    df: pd.DataFrame, config: DetectorConfig | None = None, *, rank: int | None = None, order_by: str | None = "ts",
) -> list[Event]:
    """Offline detection: each episode once, in its latest version (see :func:`replay` for the arguments)."""
    return replay(df, config, rank=rank, order_by=order_by).episodes()


def detect_each(df: pd.DataFrame, config: DetectorConfig | None = None, **kw: Any) -> dict[tuple, list[Event]]:
    """detect_frame per (run, rank) group of a frame; keys are tuples of the grouping columns present."""
    keys = [c for c in ("run", "rank") if c in df.columns]
    if not keys:
        return {(): detect_frame(df, config, **kw)}
    return {k if isinstance(k, tuple) else (k,): detect_frame(g, config, **kw)
            for k, g in df.groupby(keys, sort=True, dropna=False)}
