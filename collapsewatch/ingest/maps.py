"""``collapsewatch ingest --map KEY=COLUMN``: a user's own alias for a logged key the key table (:mod:`.keys`) does not
know — ``--map reward_avg=reward_mean`` — checked here before anything is read or written, applied where every
format's steps go (:class:`.sink.RunSink`, through :func:`.keys.catalogue_values`), and reported in the summary.

Usage errors (:class:`MapError`, one line each, exit code 2): a map that is not ``KEY=COLUMN``, a COLUMN that is no
number column of the catalogue's steps (the closest named), two maps onto one column, one key mapped twice. A KEY
the file does not log is no error: the summary says so and the rest is ingested. A map wins over what the file's
own keys give its column, and the summary says which key it replaced.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..catalogue import LOGGED_SCALARS, STEP_METRICS
from .keys import mapped_over

COLUMNS: tuple[str, ...] = tuple(m.name for m in STEP_METRICS + LOGGED_SCALARS if m.dtype == "DOUBLE")
"""The columns a map may fill: the catalogue's number step columns (counts, flags and text are the monitor's own)."""
_TYPES = {m.name: m.dtype for m in STEP_METRICS + LOGGED_SCALARS if m.dtype != "DOUBLE"}
_LOGGED = {m.name for m in LOGGED_SCALARS}
EXAMPLE = "e.g. --map reward_avg=reward_mean"


class MapError(ValueError):
    """Bad ``--map`` values: :attr:`lines`, one per problem (the message joins them)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def closest(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the closest of ``known`` to ``name`` (empty when none is close). The detectors
    file's unknown-setting message lists every known name too (``detectors.config._known``): for the catalogue's 81
    number columns that list would bury the line, so docs/metrics.md is named instead."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_maps(specs: Iterable[str]) -> dict[str, str]:
    """``KEY=COLUMN`` strings (``--map``, repeatable) → {key: column}; :class:`MapError` naming every bad one. A key
    may hold ``=`` itself: the last ``=`` splits (no column does)."""
    pairs: list[tuple[str, str]] = []
    bad: list[str] = []
    for spec in specs:
        key, sep, column = spec.rpartition("=")
        if not sep or not key.strip() or not column.strip():
            bad.append(f"--map {spec!r} is not KEY=COLUMN ({EXAMPLE})")
        else:
            pairs.append((key.strip(), column.strip()))
    try:
        maps = check_maps(pairs)
    except MapError as e:
        raise MapError(bad + e.lines) from None
    if bad:
        raise MapError(bad)
    return maps


def check_maps(maps: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """``maps`` (key → column, or (key, column) pairs) as a dict, each column a catalogue number column, no column
    filled twice and no key mapped twice; :class:`MapError` naming every problem otherwise."""
    pairs = list(dict.fromkeys(maps.items() if isinstance(maps, Mapping) else maps))  # a map given twice: once
    bad = [f"--map '{k}={c}': " + (
        f"{c!r} is a {_TYPES[c]} column the monitor measures itself, not one a logged number fills" if c in _TYPES
        else f"{c!r} is not a catalogue step column{closest(c, COLUMNS) or ' (docs/metrics.md lists them)'}")
        for k, c in pairs if c not in COLUMNS]
    for i in (1, 0):  # the column, the key
        twice = [name for name, n in Counter(p[i] for p in pairs).items() if n > 1]
        for name in twice:
            given = [f"--map '{k}={c}'" for k, c in pairs if (k, c)[i] == name]
            bad.append(f"{' and '.join(given)} {'both' if len(given) == 2 else 'all'} {'fill' if i else 'map'} "
                       f"{name!r}: keep one")
    if bad:
        raise MapError(bad)
    return dict(pairs)


@dataclass
class MapUse:
    """What the user's ``maps`` did over the steps an ingest wrote (:meth:`see` each logged row; a step logged in
    several rows counts once)."""

    maps: dict[str, str]
    steps: defaultdict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    """Mapped key → the steps that logged it."""
    replaced: defaultdict[tuple[str, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    """(mapped key, what else gave its column a value: :func:`.keys.mapped_over`) → the steps the map replaced it."""
    kept: defaultdict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    """Mapped key → steps where the file logs a key named its column itself, a logged scalar the ``steps`` view
    reads under that name (the store keeps every key under its own name): there the file's value stays."""

    def see(self, step: int, values: dict[str, float | None]) -> None:
        if not self.maps:
            return
        over = mapped_over(values, self.maps)
        for key, column in self.maps.items():
            if key not in values:
                continue
            self.steps[key].add(step)
            if column in _LOGGED and column in values:
                self.kept[key].add(step)
            elif column in over:
                self.replaced[(key, over[column])].add(step)

    def lines(self, keys: Iterable[str]) -> list[str]:
        """One phrase per map: the steps it filled, what it replaced, or that the file (its logged ``keys``) lacks
        the key, with the closest key it does log."""
        out = []
        for key, column in self.maps.items():
            said = f"{key}={column}: "
            if not self.steps[key]:
                out.append(said + f"the file logs no key {key!r}, nothing mapped{closest(key, keys)}")
                continue
            kept, filled = len(self.kept[key]), len(self.steps[key] - self.kept[key])
            if filled:
                said += f"filled {column} at {filled} step(s)" + "".join(
                    f", replacing what {by} gave it at {len(at)} (your map wins)"
                    for (k, by), at in sorted(self.replaced.items()) if k == key)
            if kept:
                said += ("; not" if filled else "not applied") + (
                    f" at the {kept} step(s) that also log {column!r} itself: the store keeps every key under its own "
                    f"name, and the steps view reads that one as {column}")
            out.append(said)
        return out
