"""What ``runs``, ``detect`` and ``watch`` print: a run's verdict and episodes for a person (compact tables, one
sentence per episode) and for a script (JSON objects; the same objects in ``detect --json`` and ``watch --json``).

    event_object(row, run)   {"type": "event", "run", …events row…, "evidence": {…}, "text": "…"}
    verdict_object(j)        {"type": "verdict", "run", "status", "sentence", …, "events_computed", "note"}
    episode_table(events)    steps · severity · detector · phase · what it saw (· evidence)
    runs_table(store)        one row per run with its verdict

Episodes and verdicts come from :func:`collapsewatch.judge.judge` (the reader's rules); episode rows are listed in
:func:`collapsewatch.verdict.reader_order` (the cause first).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from .alerts import event_message, event_payload
from .detectors.events import SEVERITY_RANK
from .judge import Judgement, judge, summary
from .store.queries import Store, runs_summary
from .verdict import reader_order

RECORDED_HINT = "--recorded shows the stored ones"


def event_object(row: Any, run: str) -> dict[str, Any]:
    """One episode as the JSON object ``detect --json`` lists and ``watch --json`` prints (and POSTs)."""
    return event_payload(dict(row, run=run))


def verdict_object(j: Judgement) -> dict[str, Any]:
    """A run's verdict as a JSON object: the verdict's fields, and whether its episodes were computed on read."""
    return {"type": "verdict", "run": j.run, **j.verdict.as_dict(), "rules": j.rules,
            "events_computed": j.computed, "note": j.note}


def events_of(j: Judgement, recorded: bool = False, least: str = "info") -> pd.DataFrame:
    """The judgement's episodes (or the stored ones) at or above severity ``least``, in order of start."""
    ev = j.recorded if recorded else j.events
    if ev.empty:
        return ev
    keep = ev["severity"].map(lambda s: SEVERITY_RANK.get(str(s), 0) >= SEVERITY_RANK[least])
    return ev[keep].sort_values(["step_start", "detector", "phase"], kind="stable", ignore_index=True)


def episode_table(events: pd.DataFrame, evidence: bool = False) -> pd.DataFrame:
    """A person's table of episodes: the cause first; the evidence JSON only when asked for."""
    cols = ["steps", "severity", "detector · phase", "what it saw"] + (["evidence"] if evidence else [])
    rows = []
    for ev in reader_order(events).to_dict("records"):
        a, b = int(ev["step_start"]), int(ev["step_end"])
        row = [f"{a}–{b}" if b > a else str(a), ev["severity"], f"{ev['detector']} · {ev['phase']}",
               event_message(ev)]
        if evidence:
            row.append(ev["evidence"] if isinstance(ev["evidence"], str) else json.dumps(ev["evidence"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def judge_all(store: Store, run: str | None, config: Any = None, rank: int | None = None) -> list[Judgement]:
    """Judgements of one run (ValueError listing the known runs when it is not one) or of every run, read from
    ``rank`` (default: each run's lowest)."""
    from .store.queries import run_names

    runs = [run] if run is not None else sorted(run_names(store))
    return [judge(store, r, config, rank) for r in runs]


def short_time(v: Any) -> str | None:
    """A timestamp as ``2026-11-25 12:50`` (UTC), None for NULL."""
    if v is None or (isinstance(v, float) and v != v) or v is pd.NaT:
        return None
    ts = pd.Timestamp(v)
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%d %H:%M")


def runs_table(store: Store) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(compact table, full rows): one row per run, oldest first, with its verdict. The full rows (for --json /
    --csv) hold every ``runs_summary`` column plus the verdict's fields; n_events counts the shown episodes."""
    base = runs_summary(store)
    full, compact = [], []
    for r in base.to_dict("records"):
        j = summary(store, r["run"])
        v = j.verdict
        fields = {k: x for k, x in v.as_dict().items() if k not in ("status", "n_steps", "last_step")}
        full.append({**r, "n_events": j.n_events, "events_computed": j.computed, "verdict": v.status, **fields})
        compact.append({"run": r["run"], "status": r["status"], "objective": r["objective"],
                        "steps": r["n_steps"], "updated": short_time(r["updated_at"]),
                        "verdict": v.status + ("*" if j.computed else ""), "episodes": j.n_events,
                        "sentence": v.sentence})
    cols = ["run", "status", "objective", "steps", "updated", "verdict", "episodes", "sentence"]
    return pd.DataFrame(compact, columns=cols), pd.DataFrame(full)


COMPUTED_FOOTNOTE = ("* episodes computed on read with today's detector rules: the stored ones were found by other "
                     "rules (`collapsewatch detect STORE --run RUN --recorded` shows them)")
