"""``collapsewatch detect``: each run's verdict line, then its episodes — a compact table for a person (and one trust
line per alarm class in it: :mod:`collapsewatch.trust`), the same JSON
objects as ``watch --json`` for a script (one array, ``[]`` when there is nothing), CSV rows for a spreadsheet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import typer

from .cli_common import print_frame
from .detectors import DetectorConfig
from .detectors.events import TIMELINE_COLUMNS
from .report import RECORDED_HINT, episode_table, event_object, events_of, judge_all, verdict_object
from .store import Store


def detect_cmd(store: str | Path, run: str | None, rank: int | None, write: bool, config: DetectorConfig | None,
               evidence: bool, recorded: bool, csv: bool, as_json: bool) -> None:
    if rank is not None:
        check_rank(store, run, rank)
    if write:
        from .offline import detect_runs

        detect_runs(store, run=run, rank=rank, write=True, config=config)  # the rank read below: default the lowest
    s = Store(store)
    try:
        judged = judge_all(s, run, config, rank)
    finally:
        s.close()
    if as_json:
        out = []
        for j in judged:
            ev = events_of(j, recorded)
            at = episode_numbers(ev)
            out += [dict(event_object(r, j.run), episode=k) for r, k in zip(ev.to_dict("records"), at, strict=True)]
            out.append(verdict_object(j))
        sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
        return
    if csv:
        parts = [events_of(j, recorded).assign(run=j.run) for j in judged]
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        print_frame(frame.reindex(columns=[*TIMELINE_COLUMNS, "source", "rules"]), csv=True)
        return
    if not judged:  # a store with no run yet (only its _schema): said, not a blank screen
        typer.echo(f"no runs in {store}")
    for j in judged:
        typer.echo(f"{j.run}: {j.verdict.sentence}")
        if j.note:
            typer.echo(f"  note: {j.note}" + ("" if recorded else f" ({RECORDED_HINT})"))
        ev = events_of(j, recorded)
        if recorded:
            typer.echo(f"  stored episodes ({len(ev)}), as recorded:")
        if ev.empty:
            typer.echo("  no episodes")
        else:
            print_frame(episode_table(ev, evidence))
            trust_lines(ev)


def check_rank(store: str | Path, run: str | None, rank: int) -> None:
    """``--rank`` names a rank of every run it reads (``run``, else all), else a ValueError naming the runs without it
    and their ranks — before anything is read or written (a rank a run lacks read as a run with no step beside the
    lowest rank's episodes, and ``--write`` stored an empty event segment for it)."""
    from .store.queries import run_names

    s = Store(store)
    try:
        lacking = {}
        for r in [run] if run is not None else sorted(run_names(s)):
            if not s.has_run(r):  # an unknown name: refused below, with the known runs
                continue
            ranks = s.query(lambda r=r: f"SELECT DISTINCT rank FROM ({s.run_view('run_ranks', r)}) ORDER BY rank")["rank"]
            if rank not in ranks.tolist():
                lacking[r] = ", ".join(str(int(k)) for k in ranks) or "none"
    finally:
        s.close()
    if lacking:
        named = "; ".join(f"run {r!r} has none (its ranks: {k})" for r, k in list(lacking.items())[:5])
        more = f"; and {len(lacking) - 5} more run(s)" if len(lacking) > 5 else ""
        raise ValueError(f"--rank {rank}: {named}{more}")


def episode_numbers(events: pd.DataFrame) -> list[int]:
    """Each row's place in :func:`collapsewatch.verdict.reader_order` (0: the table's first row, the cause first) —
    the order ``detect`` prints its table in, and the ``?episode=k`` of the run page: ``detect --json``'s ``episode``
    field, so a script sorts the episodes as a person reads them."""
    from .verdict import reader_order

    rows = reader_order(events.assign(_row=range(len(events))))["_row"] if len(events) else []
    place = {int(row): k for k, row in enumerate(rows)}
    return [place[i] for i in range(len(events))]


def trust_lines(events: pd.DataFrame) -> None:
    """One line per alarm class the table shows (detector · phase at its worst severity), in the table's order: how
    often the held-out benchmark saw it on healthy runs and before collapses (:mod:`collapsewatch.trust`)."""
    from .trust import trust_line
    from .verdict import reader_order

    ordered = reader_order(events)
    for d, p, s in dict.fromkeys(zip(ordered["detector"], ordered["phase"], ordered["severity"], strict=True)):
        typer.echo(f"  trust · {d} · {p} ({s}): {trust_line(d, p, s)}")
