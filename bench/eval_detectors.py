"""Evaluate the collapse detectors on labelled synthetic runs (and on stored runs in sample_runs/, if any).

    .venv/bin/python bench/eval_detectors.py [--seeds 5] [--first-seed 0] [--noise 1 2] [--steps 300] [--no-gaps]

Every scenario of ``tests/fixtures/synthetic_steps.py`` is built for each seed and noise level (with ~2 %
missing steps and ~1 % NULL cells unless --no-gaps) and run through ``detect_frame``. A *flag* is an
episode of severity warning or critical. Per detector, over the runs built with its failure (positives)
and the healthy and on-policy runs (negatives):

* TP: a positive run whose first flag starts at or after onset − TOLERANCE;
* FP: a negative run with any flag, or a positive run whose first flag is earlier than that;
* precision = TP / (TP + FP), recall = TP / positives;
* delay = first flag − onset; lead = reward-collapse step − first flag (positive: flagged before the
  reward collapsed), medians over TP runs;
* cross = share of runs of *other* failures where the detector also flags (collapses co-occur; not an FP).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from collapsewatch.detectors import DETECTORS, DetectorConfig, DetectorSuite, Event, detect_each

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fixtures package (tests/fixtures)

from fixtures.synthetic_steps import SCENARIOS, Label, make_run  # noqa: E402

TOLERANCE = 10
FLAG = ("warning", "critical")


@dataclass
class Tally:
    tp: int = 0
    fp: int = 0
    positives: int = 0
    cross: int = 0
    others: int = 0
    delays: list[int] = field(default_factory=list)
    leads: list[int] = field(default_factory=list)


def first_flag(events: list[Event], detector: str) -> int | None:
    starts = [e.step_start for e in events if e.detector == detector and e.severity in FLAG]
    return min(starts) if starts else None


def score(runs: list[tuple[Label, list[Event]]]) -> dict[str, Tally]:
    tallies = {d: Tally() for d in DETECTORS}
    for label, events in runs:
        for d, t in tallies.items():
            flag = first_flag(events, d)
            if label.detector is None:
                t.fp += flag is not None
            elif label.detector == d:
                t.positives += 1
                if flag is None:
                    continue
                if flag < label.onset - TOLERANCE:
                    t.fp += 1
                    continue
                t.tp += 1
                t.delays.append(flag - label.onset)
                if label.collapse is not None:
                    t.leads.append(label.collapse - flag)
            else:
                t.others += 1
                t.cross += flag is not None
    return tallies


def _med(xs: list[int]) -> str:
    if not xs:
        return "—"
    return f"{statistics.median(xs):g} ({min(xs)}…{max(xs)})"


def table(tallies: dict[str, Tally]) -> str:
    rows = ["| detector | positives | TP | FP | precision | recall | delay after onset | lead before collapse "
            "| cross-flags |", "|---|---|---|---|---|---|---|---|---|"]
    for d, t in tallies.items():
        prec = f"{t.tp / (t.tp + t.fp):.2f}" if t.tp + t.fp else "—"
        rec = f"{t.tp / t.positives:.2f}" if t.positives else "—"
        rows.append(f"| {d} | {t.positives} | {t.tp} | {t.fp} | {prec} | {rec} | {_med(t.delays)} | "
                    f"{_med(t.leads)} | {t.cross}/{t.others} |")
    return "\n".join(rows)


def lld_phases(runs: list[tuple[Label, list[Event]]]) -> str:
    """Per LLD phase: share of LLD runs where it was flagged (any severity) and first-flag delay vs as built."""
    lld_runs = [(lab, ev) for lab, ev in runs if lab.scenario == "lld"]
    rows = ["| LLD phase | runs flagged (any severity) | first flag − built start of the phase |", "|---|---|---|"]
    for phase in ("early_stagnation", "steady_decay", "accelerated_collapse"):
        delays = []
        for lab, ev in lld_runs:
            starts = [e.step_start for e in ev if e.detector == "lld" and e.phase == phase]
            if starts:
                delays.append(min(starts) - lab.phases[phase][0])
        rows.append(f"| {phase} | {len(delays)}/{len(lld_runs)} | {_med(delays)} |")
    return "\n".join(rows)


def by_noise(runs: list[tuple[Label, list[Event]]], noise_of: list[float], noises: list[float]) -> str:
    """Per noise level: healthy runs with any flag, failure runs caught by their own detector."""
    rows = ["| noise × | healthy runs with a flag (any detector) | failure runs flagged by their detector "
            "| median lead before collapse |", "|---|---|---|---|"]
    for noise in noises:
        chunk = [r for r, n in zip(runs, noise_of, strict=True) if n == noise]
        neg = [ev for lab, ev in chunk if lab.detector is None]
        pos = [(lab, ev) for lab, ev in chunk if lab.detector is not None]
        flagged_neg = sum(any(e.severity in FLAG for e in ev) for ev in neg)
        caught, leads = 0, []
        for lab, ev in pos:
            flag = first_flag(ev, lab.detector)
            if flag is not None and flag >= lab.onset - TOLERANCE:
                caught += 1
                if lab.collapse is not None:
                    leads.append(lab.collapse - flag)
        lead = f"{statistics.median(leads):g}" if leads else "—"
        rows.append(f"| {noise:g} | {flagged_neg}/{len(neg)} | {caught}/{len(pos)} | {lead} |")
    return "\n".join(rows)


def healthy_summary(runs: list[tuple[Label, list[Event]]], on_policy_isdd: list[str]) -> str:
    healthy = [ev for lab, ev in runs if lab.detector is None]
    crit = sum(any(e.severity == "critical" for e in ev) for ev in healthy)
    info = sum(e.severity == "info" for ev in healthy for e in ev)
    na = sum(s == "not_applicable" for s in on_policy_isdd)
    return (f"healthy + on-policy runs: {len(healthy)}; with a critical flag: {crit}; info episodes: {info}; "
            f"on-policy runs where ISDD reports not_applicable: {na}/{len(on_policy_isdd)}")


def synthetic(seeds: int, noises: list[float], steps: int, gaps: bool, config: DetectorConfig | None = None,
              first_seed: int = 0) -> None:
    runs: list[tuple[Label, list[Event]]] = []
    on_policy_isdd: list[str] = []
    noise_of: list[float] = []
    n_rows, cpu = 0, 0.0
    for scenario in SCENARIOS:
        for noise in noises:
            for seed in range(first_seed, first_seed + seeds):
                run = make_run(scenario, seed=seed, noise=noise, n_steps=steps, gaps=gaps)
                suite = DetectorSuite(config)
                t0 = time.process_time()
                for record in run.frame.to_dict("records"):
                    suite.update(record)
                cpu += time.process_time() - t0
                n_rows += len(run.frame)
                runs.append((run.label, suite.episodes()))
                noise_of.append(noise)
                if scenario == "on_policy":
                    on_policy_isdd.append(suite.applicability()["isdd"].status)
    print(f"## Synthetic runs: {len(SCENARIOS)} scenarios × {seeds} seeds (from {first_seed}) × noise {noises} × {steps} steps, "
          f"gaps={'on' if gaps else 'off'}; tolerance {TOLERANCE} steps\n")
    print(table(score(runs)))
    print()
    print(lld_phases(runs))
    print()
    print(by_noise(runs, noise_of, noises))
    print()
    print(healthy_summary(runs, on_policy_isdd))
    print(f"detector CPU time: {1000 * cpu / n_rows:.2f} ms per step over {n_rows} steps")


def sample_runs(folder: Path) -> None:
    print(f"\n## Stored runs in {folder}/\n")
    stores = sorted(p for p in folder.iterdir() if (p / "_schema").is_dir()) if folder.is_dir() else []
    if not stores:
        print(f"no stores under {folder}/ (a store is a folder with a _schema/ subfolder): skipped")
        return
    try:
        from collapsewatch import connect
    except ImportError as e:
        print(f"collapsewatch.connect unavailable ({e}): skipped")
        return
    for store in stores:
        df = connect(store).execute("SELECT * FROM steps ORDER BY run, rank, step").df()
        for key, events in detect_each(df).items():
            flags = [e for e in events if e.severity in FLAG]
            run, rank = key
            n = int(((df["run"] == run) & (df["rank"] == rank)).sum())
            print(f"- {store.name} {run} (rank {rank}): {n} step rows, {len(events)} episodes, {len(flags)} flags")
            for e in events:
                print(f"    {e.detector}/{e.phase} steps {e.step_start}–{e.step_end} {e.severity}: {e.message}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed … first-seed + seeds − 1 (another range = runs held out from tuning)")
    ap.add_argument("--noise", type=float, nargs="+", default=[1.0, 2.0, 3.0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--no-gaps", action="store_true")
    ap.add_argument("--sample-runs", type=Path, default=Path(__file__).resolve().parents[1] / "sample_runs")
    ap.add_argument("--detectors", type=Path, default=None,
                    help="detector settings TOML (e.g. from `collapsewatch lab calibrate`); default: built-in")
    ap.add_argument("--no-sample-runs", action="store_true", help="synthetic runs only")
    args = ap.parse_args(argv)
    config = DetectorConfig.from_file(args.detectors) if args.detectors else None
    synthetic(args.seeds, args.noise, args.steps, not args.no_gaps, config, args.first_seed)
    if args.no_sample_runs:
        return 0
    sample_runs(args.sample_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
