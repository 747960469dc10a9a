"""A store read as a labelled corpus: each run's step rows, its label, and detector flags over it.

The lab re-detects offline (``detect_frame``, the online code path) with the configuration under test rather
than reading the stored events; :func:`online_matches_offline` checks that the two agree per run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd

from ..detectors import DetectorConfig, detect_frame
from ..detectors.events import SEVERITY_RANK, reached_step
from ..offline import run_steps
from ..store.queries import Store, run_names
from .hold import objective_of
from .labels import RunLabel, label_run, near_best_steps, read_label_file
from .score import FLAG_COLUMNS


@dataclass
class Corpus:
    """Runs of one store (rank 0) with their step rows and labels."""

    frames: dict[str, pd.DataFrame]
    labels: dict[str, RunLabel]
    near_best: dict[str, set[int]] = field(default_factory=dict)
    online: dict[str, pd.DataFrame] = field(default_factory=dict)
    """The online detector episodes the store holds per run (source = online)."""
    objectives: dict[str, str] = field(default_factory=dict)
    """The objective each run's config names ("?" for runs without one)."""

    def subset(self, runs: list[str]) -> Corpus:
        return Corpus({r: self.frames[r] for r in runs}, {r: self.labels[r] for r in runs},
                      {r: self.near_best.get(r, set()) for r in runs},
                      {r: self.online[r] for r in runs if r in self.online},
                      {r: self.objectives.get(r, "?") for r in runs})


def load_corpus(store_path: str | os.PathLike, labels_file: str | os.PathLike | None = None,
                strict: bool = True) -> Corpus:
    """Every run of the store that has step rows, labelled (user labels override derived ones). ``strict``: a label
    naming a run the store lacks is an error (False: ignored — the bench lists such runs itself)."""
    user = read_label_file(labels_file) if labels_file is not None else {}
    store = Store(store_path)
    try:
        # the runs view, not queries.run_info: it reads stores written before migration 0002 too
        configs = dict(store.query("SELECT run, any_value(config) AS config FROM runs GROUP BY run")
                       .itertuples(index=False, name=None))
        # the stored episodes (the events view: one row each, recorded online or re-recorded offline)
        events = store.query("SELECT run, detector, phase, severity, step_start FROM events WHERE rank = 0")
        frames, labels, near = {}, {}, {}
        for run in run_names(store):
            df = run_steps(store, run)
            if df.empty:
                continue
            steps, reward = df["step"].to_numpy(), df["reward_mean"].to_numpy(dtype="float64")
            frames[run] = df
            score = df["eval_score"].to_numpy(dtype="float64") if "eval_score" in df else None
            labels[run] = label_run(run, configs.get(run), steps, reward, user.get(run), score)
            near[run] = near_best_steps(steps, reward)
    finally:
        store.close()
    unknown = sorted(set(user) - set(labels))
    if unknown and strict:
        raise ValueError(f"labels name run(s) not in the store: {', '.join(unknown[:5])}")
    online = {r: g.reset_index(drop=True) for r, g in events.groupby("run")}
    return Corpus(frames, labels, near, online, {r: objective_of(configs.get(r)) for r in frames})


def flags(corpus: Corpus, config: DetectorConfig | None = None) -> pd.DataFrame:
    """Offline detector episodes over every run of the corpus (columns FLAG_COLUMNS)."""
    rows = [{"run": run, "detector": e.detector, "phase": e.phase, "severity": e.severity,
             "step_start": e.step_start, "step_end": e.step_end,
             **{f"{s}_at": reached_step(e.evidence, s, e.step_start) if SEVERITY_RANK[e.severity] >= SEVERITY_RANK[s]
                else None for s in ("warning", "critical")}}
            for run, df in corpus.frames.items() for e in detect_frame(df, config)]
    return pd.DataFrame(rows, columns=FLAG_COLUMNS)


def online_matches_offline(corpus: Corpus, offline: pd.DataFrame) -> dict[str, bool]:
    """Per run: the stored episodes (recorded online, or re-recorded with ``make sample-events``) equal the offline
    ones (detector, phase, start, severity). Only meaningful for runs recorded with the same rules
    (``collapsewatch.judge`` tells which were not)."""
    out = {}
    key = ["detector", "phase", "step_start", "severity"]
    for run in corpus.frames:
        on = corpus.online.get(run, pd.DataFrame(columns=FLAG_COLUMNS))
        off = offline[offline["run"] == run]
        as_set = lambda d: set(map(tuple, d[key].astype(str).to_numpy().tolist()))  # noqa: E731
        out[run] = as_set(on) == as_set(off)
    return out
