"""`collapsewatch lab bench`: gather the corpora (:mod:`.bench_sources`), score them (:mod:`.bench`), print the
tables or JSON, and write the trust data the product reads (:mod:`collapsewatch.trust`)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pandas as pd
import typer

from .. import trust
from ..cli_common import print_frame
from ..detectors import DetectorConfig
from ..detectors.rules import rules_digest
from .bench import (
    EARLY,
    FIRST_POINTS,
    NOISY_POINTS,
    SPECIFIC_MAX,
    WITHIN_POINTS,
    bench_table,
    group_sources,
    run_records,
    trust_rows,
)
from .bench_intervals import interval_lines, with_intervals
from .bench_misses import MISSES, miss_lines
from .bench_sources import PUBLIC_SPLIT, SAMPLE_SOURCE, Bench, add_public, add_store, named_paths, tuned_on_sources

DEFINITIONS = {"specific_max": SPECIFIC_MAX, "early_steps": EARLY, "first_points": FIRST_POINTS,
               "within_points": WITHIN_POINTS, "noisy_points": NOISY_POINTS}


def gather(public: Path | None, public_dir: Path, sample: Path | None, stores: list[str], labels: list[str],
           config: DetectorConfig | None, echo=lambda s: None) -> Bench:
    """Every corpus asked for, in one :class:`.bench_sources.Bench`."""
    bench = Bench()
    extra, extra_labels = named_paths(stores, "--store"), named_paths(labels, "--labels")
    unknown = sorted(set(extra_labels) - set(extra))
    if unknown:
        raise ValueError(f"--labels names no --store: {', '.join(unknown)}")
    if public is not None:
        echo(f"public runs: {public} (sources {public_dir / 'sources.csv'})")
        add_public(bench, public, public_dir, config)
    if sample is not None:
        if sample.exists():
            add_store(bench, SAMPLE_SOURCE, sample, None, config)
        else:
            bench.missing.append({"source": SAMPLE_SOURCE, "run": "*", "why": f"store {sample} not found"})
    for name, path in extra.items():
        add_store(bench, name, path, extra_labels.get(name), config)
    if not bench.runs:
        raise ValueError("no runs to score: give --public STORE, --store NAME=PATH or the sample runs")
    return bench


def run_bench(public: Path | None, public_dir: Path, sample: Path | None, stores: list[str], labels: list[str],
              config: DetectorConfig | None, per_run: bool, markdown: bool, trust_out: Path | None,
              as_json: bool, detectors: Path | None = None, tuned_on: list[str] | None = None,
              partial: bool = False, tuned_only: bool = False) -> None:
    if tuned_only and (trust_out is not None or markdown):
        raise ValueError("--tuned-only shows the tuned-on sources only; --trust-out and --markdown need every source")
    bench = gather(public, public_dir, sample, stores, labels, config, echo=lambda s: typer.echo(s, err=True))
    recs = run_records(bench.runs, bench.flags)
    if trust_out is not None and bench.missing and not partial:
        raise ValueError(f"--trust-out: {len(bench.missing)} run(s) of the corpus are missing (`lab bench` without "
                         f"--trust-out lists them): the figures would come from {len(recs)} run(s) only. Fetch the "
                         "raw files first (python lab/public/from_mirror.py MIRRORS, then lab/public/score.sh STORE), "
                         "or pass --partial to write them anyway")
    split = split_of(recs, public_dir if public is not None else None, tuned_on)
    if split["from"] != "--tuned-on" and split["tuned_on"]:
        typer.echo(f"split: {len(split['tuned_on'])} source(s) a rule was chosen on ({split['from']}); the others "
                   "are held out", err=True)
    table = with_intervals(bench_table(recs, split["tuned_on"]), group_sources(recs, split["tuned_on"]))
    rows = [] if tuned_only else trust_rows(bench.runs, bench.flags)  # they pool every source
    groups = set(group_sources(recs, split["tuned_on"]))
    meta = {"command": _command(public, public_dir, sample, stores, labels, detectors, tuned_on), "split": split,
            "headline": [{k: r[k] for k in trust.HEADLINE_FIELDS if k in r}
                         for r in _records(table) if r["source"] in groups],
            "date": dt.date.today().isoformat(), "rules": rules_digest(config), "definitions": DEFINITIONS,
            "runs_used": len(recs), "runs_missing": len(bench.missing),
            "sources": {s: {"healthy": int(g["status"].eq("healthy").sum()),
                            "collapsed": int(g["status"].eq("collapsed").sum())}
                        for s, g in recs.groupby("source", sort=True)}}
    if tuned_only:
        recs, table, meta, bench.missing = _tuned_only(recs, table, meta, bench.missing, split["tuned_on"])
    if trust_out is not None:
        trust.dump(rows, meta, trust_out)
        typer.echo(f"trust figures written to {trust_out}" + (f" from {len(recs)} run(s), {len(bench.missing)} "
                   "missing (--partial)" if bench.missing else ""), err=True)
    if markdown:
        sys.stdout.write(trust.headline_table(meta) + "\n" + trust.markdown_table({**meta, "rows": rows}))
        return
    untrusted = recs[recs["status"] == "untrusted"][["source", "run", "collapse", "reason"]]
    if as_json:
        sys.stdout.write(json.dumps({**meta, "table": _records(table), "trust": rows,
                                     "untrusted": _records(untrusted), "missing": bench.missing,
                                     **({"runs": _records(recs)} if per_run else {})},
                                    default=_plain, allow_nan=False) + "\n")
        return
    _print_tables(recs, table, rows, untrusted, bench.missing, per_run, groups)


def _tuned_only(recs: pd.DataFrame, table: pd.DataFrame, meta: dict, missing: list[dict],
                tuned_on: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, dict, list[dict]]:
    """``--tuned-only``: what a rule may be chosen on — the tuned-on sources' runs, rows and group row. The held-out and
    pooled rows and the held-out runs are withheld (the trust rows are not computed: they pool every source), so a
    candidate is screened without a look at the figures it will be judged on once."""
    if not tuned_on:
        raise ValueError("--tuned-only: no source is tuned on (give --tuned-on SOURCE or a tuned_on.csv in --public-dir)")
    keep = set(tuned_on)
    group = f"tuned on ({len(keep)} source(s))"
    meta = {**meta, "tuned_only": True, "headline": [h for h in meta["headline"] if h["source"] == group],
            "sources": {s: v for s, v in meta["sources"].items() if s in keep},
            "runs_used": int(recs["source"].isin(keep).sum())}
    table = table[table["source"].isin(keep | {group})].reset_index(drop=True)
    return (recs[recs["source"].isin(keep)].reset_index(drop=True), table, meta,
            [m for m in missing if m["source"] in keep])


def split_of(recs: pd.DataFrame, public_dir: Path | None, tuned_on: list[str] | None) -> dict:
    """Which sources the bench reports as tuned on: ``--tuned-on`` where given (every name must be a source of this
    bench), else the public folder's ``tuned_on.csv`` (:func:`.bench_sources.tuned_on_sources`) — those of its sources
    this bench has; the ones it lacks (a store not given, ``--no-sample``) are listed, not an error."""
    if tuned_on:
        return {"from": "--tuned-on", "tuned_on": list(tuned_on), "absent": []}
    listed = tuned_on_sources(public_dir) if public_dir is not None else None
    if listed is None:
        return {"from": None, "tuned_on": [], "absent": []}
    have = set(recs["source"])
    return {"from": str(Path(public_dir) / PUBLIC_SPLIT) if not Path(public_dir).is_absolute() else PUBLIC_SPLIT,
            "tuned_on": [s for s in listed if s in have], "absent": [s for s in listed if s not in have]}


def _command(public: Path | None, public_dir: Path, sample: Path | None, stores: list[str], labels: list[str],
             detectors: Path | None, tuned_on: list[str] | None = None) -> str:
    """The command that reproduces the bench, as recorded with its figures (machine paths as STORE)."""
    args = ["collapsewatch", "lab", "bench"]
    args += ["--public", str(public)] if public is not None else []
    args += ["--public-dir", str(public_dir)] if public_dir != Path("lab/public") else []
    args += ["--no-sample"] if sample is None else [] if sample == Path("sample_runs/store") else ["--sample", str(sample)]
    args += [a for s in stores for a in ("--store", s)] + [a for s in labels for a in ("--labels", s)]
    args += ["--detectors", str(detectors)] if detectors is not None else []
    args += [a for s in tuned_on or [] for a in ("--tuned-on", s)]
    return " ".join(_placeholder(a) for a in args)


def _placeholder(arg: str) -> str:
    """An argument as the recorded command shows it: an absolute path (a machine's) becomes STORE."""
    name, sep, value = arg.partition("=")
    if sep and Path(value).is_absolute():
        return f"{name}=STORE"
    return "STORE" if Path(arg).is_absolute() else arg


def _records(frame: pd.DataFrame) -> list[dict]:
    """Records with NaN as null and whole floats (steps, counts) as ints."""
    return [{k: None if v is None or (isinstance(v, float) and v != v) else
             int(v) if isinstance(v, float) and v.is_integer() and not k.startswith(("lead", "healthy_alarms")) else v
             for k, v in r.items()} for r in frame.astype(object).to_dict("records")]


def _plain(value):
    """JSON for numpy scalars and NaN-free optionals."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _frac(n: int, of: int) -> str:
    return f"{n}/{of}" if of else "—"


def _both(r: dict, key: str, of: int) -> str:
    return f"{_frac(r[key + '_pooled'], of)} | {_frac(r[key + '_held'], of)}"


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """The bench table for a person: 'pooled | held out' side by side, counts as n/of."""
    out = []
    for r in table.to_dict("records"):
        c, h = r["collapsed"], r["healthy"]
        lead = " | ".join("—" if pd.isna(r[f"lead_median_{w}"]) else f"{r[f'lead_median_{w}']:g}"
                          for w in ("pooled", "held"))
        out.append({"source": r["source"], "runs (h/c/other/untrusted)":
                    f"{r['runs']} ({h}/{c}/{r['other']}/{r['untrusted']})",
                    "flagged ≤ collapse": _both(r, "flagged", c),
                    "… each source once": " | ".join(
                        "—" if pd.isna(r[f"flagged_source_mean_{w}"]) else f"{100 * r[f'flagged_source_mean_{w}']:.0f}%"
                        for w in ("pooled", "held")) + f" of {r['collapse_sources']}",
                    "… of logs with a signal": _both(r, "flagged_signal", r["collapsed_signal"]),
                    "… still standing at the collapse": _both(r, "flagged_standing", c),
                    f"≥ {EARLY} before": _both(r, "early", c), "lead": lead,
                    "first-10 caught": _both(r, "first10_caught", r["first10_collapses"]),
                    "healthy alarmed": _frac(r["healthy_alarmed"], h),
                    "healthy alarmed, of logs with a signal": _frac(r["healthy_alarmed_signal"], r["healthy_signal"]),
                    "healthy critical": _frac(r["healthy_critical"], h),
                    "alarms/1k healthy steps": "—" if pd.isna(r["healthy_alarms_per_1k"])
                    else f"{r['healthy_alarms_per_1k']:.2f}",
                    "healthy specific alarm": _both(r, "healthy_specific", h)})
    return pd.DataFrame(out)


def _print_tables(recs: pd.DataFrame, table: pd.DataFrame, rows: list[dict], untrusted: pd.DataFrame,
                  missing: list[dict], per_run: bool, groups: set[str] = frozenset()) -> None:
    if per_run:
        print_frame(recs.drop(columns=["reason"]))
    else:
        print_frame(readable(table))
        typer.echo(f"a | b = pooled | held out (leave one source out); specific = fires on ≤ {SPECIFIC_MAX:.0%} of "
                   f"healthy runs (and, for a collapsed run's alarm, on ≤ {SPECIFIC_MAX:.0%} of its own source's: "
                   f"not alike); flagged = a specific alarm ≤ the collapse; first-10 = collapses at one of a run's "
                   f"first {FIRST_POINTS} points, caught within {WITHIN_POINTS} points; definitions: "
                   "collapsewatch/lab/bench.py")
        lines = interval_lines(table)
        if lines:
            typer.echo("\n95 % intervals over sources (resampling whole sources; a share of 0 or 1, or of one source: "
                       "Wilson's bound, runs as independent; collapsewatch/lab/bench_intervals.py):\n" + "\n".join(lines))
        lines = miss_lines(table, groups)
        if lines:
            typer.echo(f"\ncollapses not flagged ≤ collapse, held out, by why ({' > '.join(MISSES)}: the first that "
                       "applies; collapsewatch/lab/bench_misses.py):\n" + "\n".join(lines))
        alarms = pd.DataFrame([{**r, "healthy_fired_ci": trust.interval(r.get("healthy_fired_ci")),
                                "preceded_ci": trust.interval(r.get("preceded_ci"))}
                               for r in rows if r["severity"] != "info"])
        if len(alarms):
            typer.echo("\nper flag class (severity ≥): healthy runs fired on, collapses preceded, held out:")
            print_frame(alarms)
    if len(untrusted):
        typer.echo(f"\nuntrusted labels ({len(untrusted)}), not scored:")
        print_frame(untrusted)
    if missing:
        typer.echo(f"\nmissing ({len(missing)}), not scored:")
        print_frame(pd.DataFrame(missing))
