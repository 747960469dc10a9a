"""Regenerate ``sample_runs/store/``: small REAL runs of the built-in trainer (tiny model, CPU), fixed seeds.

    COLLAPSEWATCH_CACHE=/tmp/cwcache .venv/bin/python sample_runs/make_sample_runs.py      # or: make sample-runs

Deletes and rewrites ``sample_runs/store``, trains each run below one after the other (one process at a time),
then strips what a shipped store does not need (each run's ``checkpoint/`` and ``*.duckdb`` export; the
Monitor already compacted the Parquet segments when it closed the run) and prints a summary per run: its verdict
and episodes as every reader shows them (``collapsewatch.judge``). ``--only NAME`` regenerates one run (the others
are kept); ``--summary`` only prints the summary of the existing store; ``--events`` keeps the steps and
re-records only the episodes with today's detector rules (``make sample-events``: after a rule changed).

The settings and what was measured with them are in ``docs/sample_runs.md``. The first call builds the tiny
model into the cache (about 2 minutes, once); each run then takes a few minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORE = HERE / "store"

# Shared by every run: the task, the batch shape and the seed.
COMMON = {
    "seed": 0,
    "prompts_per_rollout": 8,
    "group_size": 8,
    "max_response_tokens": 150,
    "progress": "false",
}

# Collapse-prone settings: 8 optimizer steps per rollout (4 mini-batches × 2 epochs, so the late ones are far
# off-policy) at a high learning rate (10× the healthy run's), gradient norm clipped at 1.0 as usual. Shared by
# grpo-collapse, sapo_search and llds. (Scan of other settings: docs/sample_runs.md.)
COLLAPSE_PRONE = {
    "mini_batches": 4,
    "ppo_epochs": 2,
    "lr": 1e-3,
    "max_grad_norm": 1.0,
}

# One drill set of the lab's corpus (lab/grid.toml, issue 11 §4): its base settings, seed 0, and the lld drill
# (A<0 advantages × 10 from step 24) — the seeds' claim, GRPO vs SAPO-search vs LLDS, on one known onset.
LAB_DRILL = {
    "prompts_per_rollout": 4, "group_size": 4, "max_response_tokens": 120, "mini_batches": 2, "ppo_epochs": 1,
    "lr": 3e-4, "drill.kind": "lld", "drill.at_step": 24, "drill.strength": 10.0,
}

RUNS: list[tuple[str, str, int, dict]] = [
    # name, objective, steps, overrides
    ("grpo-healthy", "grpo", 200, {"mini_batches": 2, "ppo_epochs": 1, "lr": 1e-4, "max_grad_norm": 1.0}),
    ("grpo-collapse", "grpo", 200, COLLAPSE_PRONE),
    ("sapo_search", "sapo_search", 200, COLLAPSE_PRONE),
    ("llds", "llds", 200, COLLAPSE_PRONE),
    ("drill-lld-grpo", "grpo", 72, LAB_DRILL),
    ("drill-lld-sapo_search", "sapo_search", 72, LAB_DRILL),
    ("drill-lld-llds", "llds", 72, LAB_DRILL),
]

def train_one(name: str, objective: str, steps: int, overrides: dict) -> float:
    settings = {**COMMON, **overrides}
    cmd = [sys.executable, "-m", "collapsewatch", "train", "--steps", str(steps), "--store", str(STORE),
           "--run", name, "--objective", objective]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    print(f"== {name}: {' '.join(cmd[3:])}", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=HERE.parent)
    return time.perf_counter() - t0


def strip(run_dir: Path) -> None:
    shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    for f in run_dir.glob("*.duckdb*"):
        f.unlink()


def rerecord_events(name: str) -> int:
    """Replace a run's stored episodes with those of today's detector rules over its stored steps — what its
    Monitor would have recorded with today's code (online == offline: tests/test_offline.py) — and record the
    rules' digest in its run row, as the Monitor does. Seconds, where re-training takes minutes."""
    import json

    import pyarrow.parquet as pq

    from collapsewatch.detectors import detect_frame
    from collapsewatch.detectors.events import events_frame
    from collapsewatch.detectors.rules import rules_digest
    from collapsewatch.offline import run_steps
    from collapsewatch.store import Store
    from collapsewatch.store.writer import atomic_write_table, replace_segment

    store = Store(STORE)
    try:
        events = detect_frame(run_steps(store, name, 0))
    finally:
        store.close()
    for f in (STORE / name / "events").glob("*.parquet"):
        f.unlink()
    replace_segment(STORE, name, "events", "offline-r0", events_frame(name, 0, events, "offline", rules_digest()))
    for f in (STORE / name / "runs").glob("*.parquet"):
        table = pq.read_table(f)
        versions = [dict(json.loads(v or "{}"), detector_rules=rules_digest()) for v in table["versions"].to_pylist()]
        i = table.schema.get_field_index("versions")
        atomic_write_table(table.set_column(i, "versions", [[json.dumps(v, sort_keys=True) for v in versions]]), f)
    return len(events)


def summary(names: list[str]) -> None:
    """Per run: its verdict and its episodes as every reader shows them (collapsewatch.judge: one rule)."""
    from collapsewatch.judge import judge
    from collapsewatch.report import episode_table
    from collapsewatch.store import Store

    store = Store(STORE)
    try:
        for name in names:
            j = judge(store, name)
            print(f"\n{name}: {j.verdict.sentence}" + (f"\n  note: {j.note}" if j.note else ""))
            for row in episode_table(j.events).itertuples(index=False):
                print(f"  {row[0]:>8} {row[1]:<8} {row[2]}: {row[3]}")
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="regenerate only this run (repeatable)")
    ap.add_argument("--summary", action="store_true", help="print the summary of the existing store only")
    ap.add_argument("--events", action="store_true", help="keep the steps; re-record only the stored episodes "
                    "with today's detector rules (after a rule or setting changed; seconds)")
    args = ap.parse_args(argv)
    names = [r[0] for r in RUNS]
    if args.events:
        for name in names:
            print(f"   {name}: {rerecord_events(name)} episode(s) re-recorded", flush=True)
        from collapsewatch.store.writer import ensure_schema

        for f in ensure_schema(STORE):  # a table added since the store was written (`collapsewatch check` wants it)
            print(f"   {f.relative_to(HERE)}: written", flush=True)
    elif not args.summary:
        todo = [r for r in RUNS if not args.only or r[0] in args.only]
        if args.only:
            unknown = set(args.only) - set(names)
            if unknown:
                ap.error(f"unknown run(s) {sorted(unknown)}; known: {names}")
            for name, *_ in todo:
                shutil.rmtree(STORE / name, ignore_errors=True)
        elif STORE.exists():
            shutil.rmtree(STORE)
        for name, objective, steps, overrides in todo:
            secs = train_one(name, objective, steps, overrides)
            strip(STORE / name)
            print(f"   {name}: {secs:.0f} s", flush=True)
        size = sum(f.stat().st_size for f in STORE.rglob("*") if f.is_file())
        print(f"\nstore {STORE}: {size / 1e6:.1f} MB")
    summary(names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
