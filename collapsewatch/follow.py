"""Follow a store's detector events as runs write them: the engine of ``collapsewatch watch``.

Each poll reads every selected run's episodes under the reader's detector rules (:func:`collapsewatch.judge.judge`:
the stored ones when these rules found them, else computed on read — the same episodes as the run page and
``detect``) and returns the episodes not reported yet whose severity reaches the threshold. An episode is reported once
when it first reaches the threshold, and once more each time its severity rises (a warning that becomes
critical is news); a longer ``step_end`` alone is not. Whether a critical was reported is kept for the exit
code, and so is whether every sink failed to deliver (which failed is said in one line at the end). Following
ends when every selected run has finished or crashed (or on ``--once`` / Ctrl+C); then each run's verdict is
printed (a ``{"type": "verdict"}`` object with ``--json``). A run whose reward collapses while it goes on (its
verdict says ``collapsed``: the reward's level fell to half its best, net of noise, and stayed down,
:mod:`collapsewatch.verdict`) is news at the poll that first sees it, once per collapse step: its verdict line (a
``{"type": "collapse"}`` object with ``--json``) — the first word a log that holds the reward alone gets — and a message of its own to the sinks
(``Sink.collapse``: a webhook posts it; the last poll's collapses are said by the verdict lines, not printed
twice). What is reported also goes to the sinks (``--to``, ``--notify``: :mod:`collapsewatch.sinks`), a check's
episodes in one call, then each run's verdict. With ``--once``
a run name the store does not have is an error naming the known runs; without it, watch waits for that run to start.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .alerts import collapse_payload, event_headline, verdict_headline
from .detectors.events import SEVERITY_RANK
from .judge import judge, unknown_run_message
from .report import event_object, verdict_object
from .sinks import News, Sink, Sinks
from .store import Store
from .store.opening import StoreNotFoundError
from .store.queries import run_rows

EXIT_CRITICAL = 2
"""Exit code of ``watch`` when a critical event was reported (0: none; 1: an error)."""
EXIT_SINKS_FAILED = 3
"""Exit code of ``watch`` when it had sinks (``--to``, ``--notify``) and every one of them failed to deliver: what it
reported reached none of them. A critical event reported wins (:data:`EXIT_CRITICAL`; the line says it either way);
some sinks failing and others delivering is a line and exit 0."""


class EventFollower:
    """Polls a store for new episodes of one run (or every run) at or above ``severity``."""

    def __init__(self, store: str | Path, run: str | None = None, severity: str = "warning",
                 must_exist: bool = False) -> None:
        if severity not in SEVERITY_RANK:
            raise ValueError(f"--severity must be one of {', '.join(SEVERITY_RANK)}, got {severity!r}")
        self.path, self.run, self.min_rank = store, run, SEVERITY_RANK[severity]  # a URL as typed: no Path()
        s = Store(self.path)  # a bad path fails here, with the store's one-line message
        try:
            self.missing = run is not None and not s.has_run(run)
            if self.missing and must_exist:
                raise ValueError(unknown_run_message(s, run))  # type: ignore[arg-type]
        finally:
            s.close()
        self.verdicts: dict[str, dict[str, Any]] = {}
        """Each watched run's verdict object at the last poll."""
        self.collapses: list[dict[str, Any]] = []
        """The verdicts of the last poll that say a reward collapse not said before (a run, a collapse step: once)."""
        self._collapses_said: set[tuple[str, Any]] = set()
        self._news = News(severity)
        self.critical = False
        self.ended = False
        """True once every selected run had finished or crashed at the last poll (and one existed)."""

    def poll(self) -> list[dict[str, Any]]:
        """The episodes to report now (events rows with ``run``), in order of run and start step."""
        store = Store(self.path)
        try:
            status = dict(zip(*(run_rows(store)[c].tolist() for c in ("run", "status")), strict=True))
            runs = [self.run] if self.run is not None else sorted(status)
            statuses = [status.get(run, "absent") for run in runs]  # absent: not started yet
            out, self.collapses = [], []
            for run in runs:
                if run in status:
                    j = judge(store, run)
                    v = self.verdicts[run] = verdict_object(j)
                    out += self._new(run, j.events.to_dict("records"))
                    said = (run, v.get("collapse_step"))
                    if v["status"] == "collapsed" and said not in self._collapses_said:
                        self._collapses_said.add(said)
                        self.collapses.append(v)
        finally:
            store.close()
        self.ended = bool(statuses) and all(s in ("finished", "crashed") for s in statuses)
        return sorted(out, key=lambda r: (r["run"], r["step_start"], r["detector"], r["phase"]))

    def _new(self, run: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = self._news(dict(row, run=run) for row in rows)
        self.critical |= any(row["severity"] == "critical" for row in out)
        return out


def follow(store: str | Path, *, run: str | None = None, severity: str = "warning", notify: str | None = None,
           as_json: bool = False, once: bool = False, interval: float = 2.0, sinks: Sequence[str | Sink] = (),
           emit: Callable[[str], None] = print, warn: Callable[[str], None] | None = None) -> int:
    """Report events (a line each, or JSON lines) until the runs end; returns 0, EXIT_CRITICAL when a critical event
    was reported, else EXIT_SINKS_FAILED when every sink failed to deliver (which sinks failed is one line). ``notify`` and ``sinks`` get what is reported; a failed notify POST is one warning
    on stderr per host, never the end of watching."""
    if interval <= 0:
        raise ValueError(f"--interval must be > 0 seconds, got {interval!r}")
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        follower = EventFollower(store, run, severity, must_exist=once)
    except StoreNotFoundError as e:
        raise ValueError(str(e)) from e
    out = _sinks(notify, sinks, severity, warn)
    try:  # from the first line it prints on, Ctrl+C ends it cleanly
        if follower.missing:
            warn(f"run {run!r} is not in the store yet: waiting for it to start")
        while True:
            rows = follower.poll()
            for row in rows:
                emit(json.dumps(event_object(row, row["run"]), allow_nan=False) if as_json else event_headline(row))
            last = once or follower.ended
            if not last:  # a reward collapse is news while the run goes on; the last poll's verdict lines say it
                for v in follower.collapses:
                    emit(json.dumps(collapse_payload(v), allow_nan=False) if as_json else verdict_headline(v))
            sys.stdout.flush()
            out.events(rows)
            if last:
                for v in follower.verdicts.values():
                    emit(json.dumps(v, allow_nan=False) if as_json else verdict_headline(v))
                    out.verdict(v)
            for v in follower.collapses:  # after a last poll's verdicts: a tracker that has the verdict skips it
                out.collapse(v)
            if last:
                if once and not follower.verdicts:  # a store with no run yet: said, not an empty silence
                    warn(f"no runs in {store}")
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        out.close()
    sinks_failed = _sinks_said(out, warn)  # said whatever the exit code
    return EXIT_CRITICAL if follower.critical else sinks_failed


def _sinks_said(out: Sinks, warn: Callable[[str], None]) -> int:
    """Says which sinks failed to deliver, in one line; :data:`EXIT_SINKS_FAILED` when every one did, else 0."""
    failed = out.failed()
    if failed and len(failed) == len(out.sinks):
        warn(f"error: every sink failed to deliver ({', '.join(failed)}): what watch reported reached none of them")
        return EXIT_SINKS_FAILED
    if failed:
        warn(f"warning: {len(failed)} of {len(out.sinks)} sinks failed to deliver ({', '.join(failed)}); the others "
             "delivered")
    return 0


def _sinks(notify: str | None, sinks: Sequence[str | Sink], severity: str, warn: Callable[[str], None]) -> Sinks:
    """``--to`` sinks plus ``--notify``'s webhook (every event ``watch`` reports: ``severity`` is its filter); a
    sink's failure is said as watch's other warnings are (``warning: LINE`` on stderr), whichever option made it."""
    if notify is not None and not notify.startswith(("http://", "https://", "slack:", "discord:")):
        raise ValueError(f"--notify must be an http:// or https:// URL, got {notify!r}")
    return Sinks([*sinks, *([notify] if notify is not None else [])], severity, warn=lambda msg: warn(f"warning: {msg}"))
