"""`collapsewatch lab run | score | calibrate | hold | natural | mismatch | bench | loso`: thin Typer commands over
the lab modules."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..cli_common import APP, HelpGroup, JsonOpt, StoreArg, friendly, print_frame

app = typer.Typer(**APP, no_args_is_help=True, cls=HelpGroup,
                  help="Collapse drills: train a grid, score the detectors on it, calibrate their thresholds.")

DetectorsOpt = Annotated[Path | None, typer.Option("--detectors", help="Detector settings TOML (e.g. from "
                                                                         "`lab calibrate`); default: built-in.")]
LabelsOpt = Annotated[Path | None, typer.Option("--labels", help="CSV run,kind,onset,collapse overriding the "
                                                                  "labels derived from drills and rewards.")]


@app.command("run")
@friendly
def run_cmd(grid: Annotated[Path, typer.Argument(help="Grid TOML ([base] + [[grid]] axes).")],
            store: Annotated[Path, typer.Option("--store", help="Store the runs are written to.")],
            jobs: Annotated[int, typer.Option("--jobs", help="Runs trained at once.")] = 1) -> None:
    """Train every run of the grid not yet finished in the store (resumable); one line per finished run."""
    from .grid import load_grid, run_grid

    run_grid(load_grid(grid), store, jobs=jobs, echo=lambda s: typer.echo(s))


def _detector_config(path: Path | None):
    from ..detectors import DetectorConfig

    return DetectorConfig.from_file(path) if path is not None else None


@app.command("score")
@friendly
def score_cmd(store: StoreArg, labels: LabelsOpt = None, detectors: DetectorsOpt = None,
              all_kinds: Annotated[bool, typer.Option("--all-kinds", help="Score every detector against "
                                                      "every drill kind, not only its own.")] = False,
              show_all: Annotated[bool, typer.Option("--all", help="Also the rows with no drilled run and no "
                                                     "flag (hidden by default).")] = False,
              as_json: JsonOpt = False) -> None:
    """Per detector, phase and severity: share of drilled runs flagged, delay, lead, false flags."""
    from .corpus import flags, load_corpus, online_matches_offline
    from .score import score

    corpus = load_corpus(store, labels)
    found = flags(corpus, _detector_config(detectors))
    table = score(found, corpus.labels.values(), corpus.near_best, all_kinds=all_kinds)
    shown = table if show_all else nonempty_rows(table)
    if as_json:
        print_frame(shown, as_json=True)
        return
    print_frame(shown)
    if len(shown) < len(table):
        typer.echo(f"{len(table) - len(shown)} row(s) with no drilled run and no flag hidden (--all shows them)")
    kinds: dict[str, int] = {}
    for lab in corpus.labels.values():
        kinds[lab.kind or "undrilled"] = kinds.get(lab.kind or "undrilled", 0) + 1
    collapsed = sum(lab.collapse is not None for lab in corpus.labels.values())
    typer.echo(f"runs: {len(corpus.labels)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
               f"with a reward collapse: {collapsed}")
    if detectors is None and labels is None:
        same = online_matches_offline(corpus, found)
        typer.echo(f"stored == offline episodes: {sum(same.values())}/{len(same)} runs"
                   + ("" if all(same.values()) else f" (differ: {', '.join(r for r, ok in same.items() if not ok)})"))


def nonempty_rows(table):
    """Rows that say something: a drilled run to score, or a flag counted (false flags, critical near the best)."""
    counts = table[["false_pre_onset_per_1k", "false_healthy_per_1k", "critical_near_best"]].fillna(0)
    return table[(table["drilled_runs"].fillna(0) > 0) | (counts != 0).any(axis=1)].reset_index(drop=True)


@app.command("calibrate")
@friendly
def calibrate_cmd(store: StoreArg,
                  out: Annotated[Path, typer.Option("--out", help="Detector settings TOML to write.")],
                  labels: LabelsOpt = None, as_json: JsonOpt = False) -> None:
    """Choose thresholds on a training split of the store's runs; print the held-out score; write --out."""
    from .calibrate import calibrate, split, to_toml
    from .corpus import flags, load_corpus
    from .score import score

    corpus = load_corpus(store, labels)
    train, held = split(corpus)
    typer.echo(f"split: {len(train)} training run(s), {len(held)} held-out run(s)", err=True)
    config, chosen = calibrate(corpus, echo=lambda s: typer.echo(s, err=True))
    header = (f"collapsewatch lab calibrate {store} --out {out}\n"
              f"chosen on {len(train)} training runs: {', '.join(train)}")
    out.write_text(to_toml(chosen, header))
    part = corpus.subset(held)
    table = score(flags(part, config), part.labels.values(), part.near_best)
    if as_json:
        sys.stdout.write(json.dumps({"chosen": chosen, "held_out": table.to_dict("records")}) + "\n")
        return
    typer.echo(f"held-out score ({len(held)} runs) with {out}:")
    print_frame(table)


@app.command("hold")
@friendly
def hold_cmd(store: StoreArg, labels: LabelsOpt = None,
             runs: Annotated[bool, typer.Option("--runs", help="One row per drilled run instead of per "
                                                "objective and drill.")] = False,
             as_json: JsonOpt = False) -> None:
    """Per objective and drill: did the reward, L and the A>0 ratios hold after the onset? (the seeds' claim)"""
    from .corpus import load_corpus
    from .hold import L_DROP, RATIO_FRAC, WINDOW, hold_table

    corpus = load_corpus(store, labels)
    per_run, table = hold_table(corpus.labels.values(), corpus.frames, corpus.objectives)
    print_frame(per_run if runs else table, as_json=as_json)
    if not as_json:
        typer.echo(f"before = the {WINDOW} steps before the onset, after = the last {WINDOW} steps; reward held = no "
                   f"reward collapse after the onset; L held = L after ≥ L before − {L_DROP}; ratios held = A>0 "
                   f"p05 after ≥ {RATIO_FRAC} × before (docs/lab/detectors-evaluation.md)")


@app.command("natural")
@friendly
def natural_cmd(store: StoreArg, labels: LabelsOpt = None, detectors: DetectorsOpt = None,
                runs: Annotated[bool, typer.Option("--runs", help="One row per run: what fired where.")] = False,
                claim: Annotated[bool, typer.Option("--claim", help="Per setting and objective: reward, sentinel "
                                                    "L / I and A>0 ratios at the start and the end.")] = False,
                min_steps: Annotated[int, typer.Option("--min-steps", help="Leave out runs with fewer steps (e.g. "
                                                       "one still training).")] = 0,
                l_source: Annotated[str, typer.Option("--l-source", help="Ablation: read L from this source or a "
                                                      "lower one only (sentinel | pooled | batch).")] = "sentinel",
                as_json: JsonOpt = False) -> None:
    """Undrilled runs: per detector, natural reward collapses flagged ≥ 20 steps before, lead, false flags."""
    from .corpus import flags, load_corpus
    from .natural import EARLY, claim_table, restrict_source, run_table, score_natural

    corpus = load_corpus(store, labels)
    corpus = corpus.subset([r for r, lab in corpus.labels.items() if lab.n_steps >= min_steps])
    corpus.frames = restrict_source(corpus.frames, l_source)
    labs = list(corpus.labels.values())
    if claim:
        print_frame(claim_table(corpus.frames, labs, corpus.objectives), as_json=as_json)
        return
    found = flags(corpus, _detector_config(detectors))
    print_frame(run_table(found, labs) if runs else score_natural(found, labs), as_json=as_json)
    if not as_json:
        typer.echo(f"flags = episodes at warning or above, dated when they first stood at warning; early = ≥ {EARLY} "
                   "steps before the reward collapse (the lab's rule, collapsewatch/lab/labels.py); "
                   "docs/lab/natural-corpus.md")


@app.command("mismatch")
@friendly
def mismatch_cmd(store: StoreArg, labels: LabelsOpt = None,
                 runs: Annotated[bool, typer.Option("--runs", help="One row per run and window instead of per "
                                                    "arm (setting) and window.")] = False,
                 window: Annotated[int | None, typer.Option("--window", help="Steps per window (default 40).")] = None,
                 as_json: JsonOpt = False) -> None:
    """Undrilled runs: reward, |logp_old − logp_rollout|, IS ESS and the corrections' shares over time, per arm."""
    from .corpus import load_corpus
    from .mismatch import WINDOW, arm_windows, run_windows

    corpus = load_corpus(store, labels)
    per_run = run_windows(corpus.frames, list(corpus.labels.values()), WINDOW if window is None else window)
    print_frame(per_run if runs else arm_windows(per_run), as_json=as_json)
    if not as_json:
        typer.echo("arm = the run name's setting; abs_log_ratio = mean is_log_ratio_abs_mean (nats/token); ess / "
                   "ess_min = mean / min is_ess; truncated / masked = TIS / MIS shares (docs/lab/mismatch.md)")


@app.command("bench")
@friendly
def bench_cmd(public: Annotated[Path | None, typer.Option("--public", help="Store of the public runs "
                                                          "(lab/public/score.sh STORE ingests them).")] = None,
              public_dir: Annotated[Path, typer.Option("--public-dir", help="sources.csv, labels.csv and raw/ "
                                                       "of the public runs.")] = Path("lab/public"),
              sample: Annotated[Path, typer.Option("--sample", help="The sample runs' store.")] = Path(
                  "sample_runs/store"),
              no_sample: Annotated[bool, typer.Option("--no-sample", help="Leave the sample runs out.")] = False,
              store: Annotated[list[str] | None, typer.Option("--store", help="NAME=PATH: another store, "
                                                              "source NAME (repeat).")] = None,
              labels: Annotated[list[str] | None, typer.Option("--labels", help="NAME=CSV: labels of the --store "
                                                               "NAME (default: derived).")] = None,
              detectors: DetectorsOpt = None,
              runs: Annotated[bool, typer.Option("--runs", help="One row per run instead.")] = False,
              tuned_on: Annotated[list[str] | None, typer.Option("--tuned-on", help="A source a rule change was "
                                                                 "designed on (repeat): adds rows over those and over "
                                                                 "the others. Default: the sources listed in "
                                                                 "PUBLIC_DIR/tuned_on.csv (the project's split).")] = None,
              markdown: Annotated[bool, typer.Option("--markdown", help="Print the trust table (docs/detectors.md) "
                                                     "of this bench.")] = False,
              trust_out: Annotated[Path | None, typer.Option("--trust-out", help="Write the trust figures "
                                                             "(collapsewatch/data/trust.json); refused while "
                                                             "runs of the corpus are missing.")] = None,
              partial: Annotated[bool, typer.Option("--partial", help="Write --trust-out although runs are "
                                                    "missing (the file records how many).")] = False,
              tuned_only: Annotated[bool, typer.Option("--tuned-only", help="Show the tuned-on sources only "
                                                       "(their rows, runs and group row), to screen a rule "
                                                       "candidate where it is chosen; held-out figures "
                                                       "withheld.")] = False,
              as_json: JsonOpt = False) -> None:
    """Every labelled corpus per source: collapses flagged by specific flags, alarms on healthy runs — pooled and
    held out by source (definitions: collapsewatch/lab/bench.py)."""
    from .bench_cli import run_bench

    run_bench(public=public, public_dir=public_dir, sample=None if no_sample else sample, stores=store or [],
              labels=labels or [], config=_detector_config(detectors), per_run=runs, markdown=markdown,
              trust_out=trust_out, as_json=as_json, detectors=detectors,
              tuned_on=tuned_on or [], partial=partial, tuned_only=tuned_only)


@app.command("loso")
@friendly
def loso_cmd(benches: Annotated[list[str], typer.Argument(help="NAME=FILE or FILE (name: its stem), each the output "
                                                           "of `lab bench --json --runs [--detectors TOML]`; the "
                                                           "first is the default.")],
             as_json: JsonOpt = False) -> None:
    """Choose among detector settings leave one source out; score each source under the choice made without it."""
    from .bench_cli import readable
    from .bench_loso import loso_table, read_bench

    named: dict[str, object] = {}
    tuned_on: list[str] | None = None
    for arg in benches:
        name, _, path = arg.rpartition("=") if "=" in arg else (Path(arg).stem, "", arg)
        if name in named:
            raise ValueError(f"two benches named {name!r}: name them NAME=FILE")
        named[name], split = read_bench(Path(path))
        tuned_on = tuned_on or split.get("tuned_on")
    table, choice = loso_table(named, tuned_on)  # type: ignore[arg-type]
    if as_json:
        sys.stdout.write(json.dumps({"choice": choice, "table": json.loads(table.to_json(orient="records"))}) + "\n")
        return
    out = readable(table)
    out.insert(0, "group", table["group"].to_numpy())
    out = out.rename(columns={"source": "setting"})
    print_frame(out)
    typer.echo(f"\nchosen on all sources: {choice['all_sources']}; folds (one per source left out) choosing each: "
               + ", ".join(f"{n} {k}" for n, k in choice["folds"].items())
               + "".join(f"\n  left out, {s} chose {c}" for s, c in choice["per_source"].items()
                         if c != choice["all_sources"])
               + "\nLOSO = each source scored under the setting chosen without it (objective: Youden's J of any "
                 "alarm by the collapse; definitions: collapsewatch/lab/bench_loso.py)")
