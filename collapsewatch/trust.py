"""How far to trust each alarm: the held-out benchmark's figures per detector/phase and severity, read from the
data file ``collapsewatch/data/trust.json`` (written by ``collapsewatch lab bench --trust-out``; the product reads
the file only, never the lab).

Per flag class (detector, phase, episodes whose worst severity is ≥ s): ``healthy_fired`` of ``healthy_runs``
healthy runs had one; it started at or before the collapse on ``preceded`` of ``collapsed_runs`` collapsed runs,
``preceded_held_out`` of them where the class was specific (≤ 10 % of healthy runs) on the *other* sources' healthy
runs and not alike on the run's own source (it fired on ≤ 10 % of that source's healthy runs). ``healthy_applicable``
/ ``collapsed_applicable`` of those runs log any of the detector's inputs: a detector of tool calls or rollout
log-probs can fire only there, so its line and row count over them (and say how many runs there are in all).
``healthy_fired_ci`` / ``preceded_ci``: the 95 % interval of those two shares over sources (runs of one source are
alike, so sources are resampled, not runs: ``collapsewatch/lab/bench_intervals.py``); a file written before the
bench gave them has none, and its lines show none.
Definitions: ``collapsewatch/lab/bench.py``. The file also keeps the bench's headline figures per group of sources
(``headline``: tuned on, held out, all — flagged collapses, first-10 caught, healthy runs warned and critical, each
share with its interval). ``python -m collapsewatch.trust`` prints both Markdown tables; ``python -m
collapsewatch.trust --docs docs/detectors.md`` rewrites them between their markers there (a test keeps them equal).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TRUST_FILE = Path(__file__).parent / "data" / "trust.json"
ROW_FIELDS = ("detector", "phase", "severity", "healthy_fired", "healthy_runs", "preceded", "collapsed_runs",
              "preceded_held_out", "specific_sources", "sources", "healthy_applicable", "collapsed_applicable",
              "healthy_fired_ci", "preceded_ci")
BEGIN, END = "<!-- trust-table: begin (python -m collapsewatch.trust --docs) -->", "<!-- trust-table: end -->"
HEADLINE = ("<!-- headline-table: begin (python -m collapsewatch.trust --docs) -->", "<!-- headline-table: end -->")
MISS_REASONS = ("alike", "not specific", "blind", "late", "silent")
"""Why a collapse was not flagged, in the order the bench tries them (defined in :mod:`.lab.bench_misses`, which
reads this list: the product shows the counts, the lab computes them)."""


def miss_field(reason: str, how: str = "held") -> str:
    """The bench row's field counting the collapses not flagged for ``reason``, judged ``how`` (``pooled`` /
    ``held``): ``missed_not_specific_held``."""
    return f"missed_{reason.replace(' ', '_')}_{how}"


HEADLINE_FIELDS = ("source", "collapsed", "flagged_held", "flagged_held_ci", "collapsed_signal", "flagged_signal_held",
                   "early_held", "first10_collapses", "first10_caught_held", "first10_caught_held_ci", "healthy",
                   "healthy_alarmed", "healthy_alarmed_ci", "healthy_critical", "healthy_critical_ci",
                   "healthy_alarms_per_1k", *map(miss_field, MISS_REASONS))
"""The bench's group rows (tuned on, held out, all) as the data file keeps them: ``headline`` (:func:`headline_table`)."""
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}

_cache: dict[Path, dict[str, Any]] = {}


def load(path: Path | None = None) -> dict[str, Any]:
    """The trust data ({} when the file is absent or unreadable: the product then shows no trust line)."""
    p = Path(path) if path is not None else TRUST_FILE
    if p not in _cache:
        try:
            data = json.loads(p.read_text())
            _cache[p] = data if isinstance(data, dict) and isinstance(data.get("rows"), list) else {}
        except (OSError, ValueError):
            _cache[p] = {}
    return _cache[p]


def dump(rows: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    """Write the trust data: ``meta`` (command, date, sources, ``runs_used`` / ``runs_missing``: runs scored and
    runs of the corpus absent; a file written before they were counted lacks them) and one row per flag class (ROW_FIELDS)."""
    missing = [f for r in rows for f in ROW_FIELDS if f not in r]
    if missing:
        raise ValueError(f"trust rows lack field(s) {sorted(set(missing))}")
    body = {**meta, "rows": [{f: r[f] for f in ROW_FIELDS} for r in rows]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    _cache.pop(Path(path), None)


def row_for(detector: str, phase: str, severity: str, data: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The figures of the class an episode of worst severity ``severity`` belongs to (None without bench data)."""
    data = load() if data is None else data
    return next((r for r in data.get("rows", []) if (r["detector"], r["phase"], r["severity"])
                 == (detector, phase, severity)), None)


def trust_line(detector: str, phase: str, severity: str, data: dict[str, Any] | None = None) -> str:
    """One line for an episode of worst severity ``severity`` (its class: episodes at ``severity`` or worse): 'fired
    on 2 of 29 healthy runs; preceded 4 of 13 collapses (3 as a held-out specific flag)'."""
    data = load() if data is None else data
    r = row_for(detector, phase, severity, data)
    if r is None:
        return "no benchmark figures for this alarm"
    hs, cs = applicable(r)
    fired = share(r["healthy_fired"], hs, r.get("healthy_fired_ci"), "95 % interval by source ")
    before = share(r["preceded"], cs, r.get("preceded_ci"))
    if (hs, cs) == (r["healthy_runs"], r["collapsed_runs"]):
        text = (f"fired on {r['healthy_fired']} of {hs} healthy runs{fired and f' ({fired})'}; preceded "
                f"{r['preceded']} of {cs} collapses ({before and f'{before}; '}{r['preceded_held_out']} as a "
                "held-out specific flag)")
    else:
        text = (f"fired on {r['healthy_fired']} of the {hs} healthy runs that log its inputs ({fired and f'{fired}; '}"
                f"{r['healthy_runs']} in all); preceded {r['preceded']} of the {cs} collapses that do "
                f"({before and f'{before}; '}{r['collapsed_runs']} in all; {r['preceded_held_out']} as a held-out "
                "specific flag)")
    return text + ("" if current(data) else f" — measured on other rules ({data.get('date', '?')})")


def share(k: int, n: int, ci: list[float] | None, label: str = "") -> str:
    """'3 %, 95 % interval by source 1–6 %' (``label`` before the interval; '' for none), or '' without runs or
    without an interval (figures written before the bench gave one)."""
    if not n or not isinstance(ci, list) or len(ci) != 2:
        return ""
    return f"{_pct(k / n)} %, {label}{interval(ci)}"


def interval(ci: list[float] | None) -> str:
    """'1.1–19 %' for an interval [0.011, 0.185]; '—' for none."""
    return f"{_pct(ci[0])}–{_pct(ci[1])} %" if isinstance(ci, list) and len(ci) == 2 else "—"


def _pct(x: float) -> str:
    """A share as a percentage: 0 (under 0.05 %), one decimal under 20 % (0.4, 10.7: the 10 % aims are read to a
    tenth), whole above (56)."""
    return "0" if round(100 * x, 1) == 0 else f"{100 * x:.1f}" if 100 * x < 19.95 else f"{100 * x:.0f}"


def applicable(r: dict[str, Any]) -> tuple[int, int]:
    """(healthy, collapsed) runs of a row that log the detector's inputs; all of them for a row written before the
    bench counted that."""
    return r.get("healthy_applicable", r["healthy_runs"]), r.get("collapsed_applicable", r["collapsed_runs"])


def current(data: dict[str, Any]) -> bool:
    """Whether the figures were measured on today's built-in rules (the rules digest they record is this code's)."""
    from .detectors.rules import rules_digest

    return data.get("rules") == rules_digest()


def markdown_table(data: dict[str, Any] | None = None) -> str:
    """The trust data as a Markdown table (the section of docs/detectors.md between BEGIN and END)."""
    data = load() if data is None else data
    lines = ["| detector / phase | severity ≥ | healthy runs it fired on | collapses it preceded | "
             "… held out (specific on the other sources, not alike in its own) | sources where specific |", "|---|---|---|---|---|---|"]
    rows = sorted(data.get("rows", []), key=lambda r: (r["detector"], r["phase"], SEVERITY_ORDER[r["severity"]]))
    for i, r in enumerate(rows):
        up = rows[i + 1] if i + 1 < len(rows) else None
        if up is not None and (up["detector"], up["phase"]) == (r["detector"], r["phase"]) and \
                all(up.get(f) == r.get(f) for f in ROW_FIELDS[3:]):
            continue  # the same figures as the next severity: no episode of this phase stayed at this one
        hs, cs = applicable(r)
        fired = share(r["healthy_fired"], hs, r.get("healthy_fired_ci")) or (
            f"{100 * r['healthy_fired'] / hs:.0f} %" if hs else "")
        before = share(r["preceded"], cs, r.get("preceded_ci"))
        h_all = "" if hs == r["healthy_runs"] else f", {r['healthy_runs']} in all"
        c_all = "" if cs == r["collapsed_runs"] else f", {r['collapsed_runs']} in all"
        lines.append(f"| `{r['detector']}` / `{r['phase']}` | {r['severity']} | {r['healthy_fired']} of "
                     f"{hs}{fired and f' ({fired})'}{h_all} | {r['preceded']} of {cs}"
                     f"{f' ({before}{c_all})' if before else (f' ({c_all[2:]})' if c_all else '')} | "
                     f"{r['preceded_held_out']} of {cs} | {r['specific_sources']} of {r['sources']} |")
    split = data.get("split") or {}
    tuned = (f" Split: the {len(split['tuned_on'])} source(s) of `{split['from']}` tuned on, every other source held "
             "out." if split.get("tuned_on") and split.get("from") not in (None, "--tuned-on") else "")
    head = (f"Bench of {data.get('date', '?')}: `{data.get('command', '?')}` (rules digest {data.get('rules', '?')})."
            f"{tuned} Runs counted: those that log any of the detector's inputs (the others, where it cannot fire, "
            "are said as \"in all\"). (k %, lo–hi %): the share and its 95 % interval over sources (sources resampled, not "
            "runs; Wilson's bound where the share is 0 or 1 or one source holds its runs). A row whose figures equal the "
            "next severity's is left out."
            f"{_partial(data)}\n\n")
    return head + "\n".join(lines) + "\n"


def headline_table(data: dict[str, Any] | None = None) -> str:
    """The bench's headline figures per group of sources (held out first), each share with its 95 % interval over
    sources, against issue 31's aims (a Markdown table; empty without ``headline`` in the data)."""
    data = load() if data is None else data
    groups = sorted(data.get("headline") or [], key=lambda r: (not r["source"].startswith("not tuned"),
                                                                r["source"] == "all"))
    if not groups:
        return ""
    lines = ["| sources | collapses flagged at or before the collapse (aim ≥ 80 %) | … of logs with an early signal "
             "| ≥ 20 steps early | collapses in a run's first 10 points caught within 2 (aim: all) | healthy runs "
             "warned (aim ≤ 10 %) | healthy runs with a critical (aim 0) | warnings per 1,000 healthy steps | "
             "collapses not flagged, why |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in groups:
        name = ("held out: " if r["source"].startswith("not tuned") else "") + r["source"].replace("not tuned on",
                                                                                                   "no rule chosen on")
        per_1k = r.get("healthy_alarms_per_1k")
        lines.append(f"| {name} | {_count(r, 'flagged_held', 'collapsed')} | {r['flagged_signal_held']} of "
                     f"{r['collapsed_signal']} | {r['early_held']} | "
                     f"{_count(r, 'first10_caught_held', 'first10_collapses')} | "
                     f"{_count(r, 'healthy_alarmed', 'healthy')} | {_count(r, 'healthy_critical', 'healthy')} | "
                     f"{'—' if per_1k is None else f'{per_1k:.2f}'} | {why_missed(r)} |")
    return (f"Bench of {data.get('date', '?')}: `{data.get('command', '?')}` (rules digest {data.get('rules', '?')}), "
            f"{data.get('runs_used', '?')} runs at hand. (k %, lo–hi %): the share and its 95 % interval over "
            f"sources.{_partial(data)}\n\n" + "\n".join(lines) + "\n")


def why_missed(r: dict[str, Any]) -> str:
    """'alike 3, blind 11, late 3, silent 8': a bench row's held-out misses by reason (:mod:`.lab.bench_misses`), the
    reasons with none left out ('none' where nothing was missed); '—' in a file written before the bench counted
    them."""
    counts = {m: r[miss_field(m)] for m in MISS_REASONS if miss_field(m) in r}
    if not counts:
        return "—"
    return ", ".join(f"{m} {n}" for m, n in counts.items() if n) or "none"


def _count(r: dict[str, Any], top: str, bottom: str) -> str:
    """'33 of 56 (59 %, 28–82 %)' — or '0 of 0' where there is nothing to count."""
    k, n = r[top], r[bottom]
    return f"{k} of {n}" + (f" ({share(k, n, r.get(top + '_ci')) or _pct(k / n) + ' %'})" if n else "")


def _partial(data: dict[str, Any]) -> str:
    """A warning for figures written with ``lab bench --partial`` (a file written before the bench counted its
    missing runs has none)."""
    missing = data.get("runs_missing") or 0
    return (f" **Partial:** {missing} run(s) of the corpus were missing; {data.get('runs_used', '?')} were scored."
            if missing else "")


def replace_section(text: str, table: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """``text`` with the part between the markers (default: the trust table's) replaced by ``table``."""
    begin, end = markers
    if begin not in text or end not in text:
        raise ValueError(f"no table markers in the document (expected {begin!r} … {end!r})")
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + table + rest[rest.index(end):]


def section(text: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """The part of ``text`` between the markers (without the newline after the first)."""
    return text.split(markers[0], 1)[1].split(markers[1], 1)[0][1:]


if __name__ == "__main__":  # python -m collapsewatch.trust [--docs docs/detectors.md]
    if sys.argv[1:2] == ["--docs"] and len(sys.argv) == 3:
        doc = Path(sys.argv[2])
        doc.write_text(replace_section(replace_section(doc.read_text(), markdown_table()), headline_table(),
                                       HEADLINE))
    else:
        print(headline_table() + "\n" + markdown_table(), end="")
