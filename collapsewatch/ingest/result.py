"""What an ingest returns (:class:`Ingested`, the summary ``collapsewatch ingest`` prints) and the judging of the run it
wrote (:func:`ingested`): one home for the one-shot ingest and ``--follow``'s close alike."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from .keys import in_catalogue_order, unmapped
from .sink import RunSink


@dataclass
class Ingested:
    format: str
    steps: int
    summary: str
    """What was left out or noted (empty: every row and value was kept)."""
    flagged: list[str] | None = None
    """With ``run_detectors``: the warning / critical episodes the detectors stored ("entropy/collapse @77"); None: not run."""
    filled: list[str] = field(default_factory=list)
    """The catalogue columns the logged keys filled, in the catalogue's order."""
    unmapped: list[str] = field(default_factory=list)
    """The logged keys that fill no catalogue column (kept in ``scalars`` under their names)."""
    maps: list[str] = field(default_factory=list)
    """What each ``--map KEY=COLUMN`` did (:meth:`.maps.MapUse.lines`)."""
    verdict: str | None = None
    """With ``run_detectors``: the run's verdict sentence, as ``detect`` prints it (a reward-only log's says so)."""
    span: tuple[int, int] | None = None
    """The first and last step ingested (None: none): the verdict counts a run's steps over this span."""

    def message(self, store: str | os.PathLike, run: str) -> str:
        """What ``collapsewatch ingest`` prints: what was read and left out, the catalogue columns filled (and, when no
        key gave the reward, the keys that fill nothing), the run's verdict and the detectors' findings with the command
        that details them."""
        out = f"ingested {self.steps} step(s) of {self.format} into run {run!r}"
        if self.span and self.span[1] - self.span[0] + 1 != self.steps:  # a log of every k-th step: its step numbers
            out += f" (steps {self.span[0]} to {self.span[1]})"
        out += f"; {self.summary}" if self.summary else ""
        if self.steps:  # (a --follow that read nothing has nothing to say about its keys)
            out += "\ncatalogue columns filled: " + (", ".join(self.filled) or "none")
            out += "".join(f"\n--map {line}" for line in self.maps)
        if self.steps and "reward_mean" not in self.filled:
            keys = ", ".join(self.unmapped[:UNMAPPED_SHOWN]) + (
                f" and {len(self.unmapped) - UNMAPPED_SHOWN} more" if len(self.unmapped) > UNMAPPED_SHOWN else "")
            out += ("\nno key filled reward_mean (the reward the verdict judges)" + (
                f"; keys that fill no catalogue column: {keys}" if keys else "") +
                f": map the reward's key with --map KEY=reward_mean, or rename it to one of {KEY_TABLE}")
        if self.verdict is not None:
            out += f"\nverdict: {self.verdict}"
        if self.flagged is not None:
            out += "\ndetectors: " + (", ".join(self.flagged) if self.flagged else "no warning") + (
                f" (details: collapsewatch detect {shlex.quote(str(store))} --run {shlex.quote(run)})")
        return out


UNMAPPED_SHOWN = 12
"""Unmapped keys named in the ingest summary, at most."""
KEY_TABLE = "docs/ingest.md's key table (\"What fills the catalogue's columns\")"


def _detect(store: str | os.PathLike, run: str) -> tuple[list[str], str]:
    """The detectors (built-in rules) over the stored run, their episodes stored: (the warning / critical ones, each
    at the step it first stood at that severity — the verdict's "Warning from step N" — and the rules' digest)."""
    from ..detectors.events import reached_step
    from ..detectors.rules import rules_digest
    from ..offline import detect_runs

    events = detect_runs(store, run=run, write=True)
    hot = events[events["severity"] != "info"]
    at = [reached_step(e, s, start) for e, s, start in zip(hot["evidence"], hot["severity"], hot["step_start"],
                                                           strict=True)]
    flagged = hot.assign(at=at).groupby(["detector", "phase", "severity"])["at"].min()
    return ([f"{d}/{p} {sev} @{step}" for (d, p, sev), step in sorted(flagged.items(), key=lambda kv: kv[1])],
            rules_digest(None))


def ingested(sink: RunSink, fmt: str, summary: str, store: str | os.PathLike, run_detectors: bool) -> Ingested:
    """The finished run's summary; with ``run_detectors`` the detectors run over it first, their episodes stored and
    their rules recorded in its run row (:meth:`.sink.RunSink.judged`)."""
    flagged = sentence = None
    if run_detectors and sink.steps:
        flagged, rules = _detect(store, sink.run)
        sink.judged(rules)
        sentence = _sentence(store, sink.run)
    return Ingested(fmt, len(sink.steps), summary, flagged, in_catalogue_order(sink.filled),
                    unmapped(sink.keys, sink.maps.maps), sink.maps.lines(sink.keys), sentence,
                    (min(sink.steps), max(sink.steps)) if sink.steps else None)


def _sentence(store: str | os.PathLike, run: str) -> str:
    """The run's verdict sentence under the built-in rules, from the episodes just stored (``detect``'s first line)."""
    from ..judge import judge
    from ..store import Store

    s = Store(store)
    try:
        return judge(s, run).verdict.sentence
    finally:
        s.close()
