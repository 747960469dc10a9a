"""Regenerate ``sample_runs/store/``: small REAL runs of the built-in trainer (tiny model, CPU), fixed seeds.

    COLLAPSEWATCH_CACHE=/tmp/cwcache .venv/bin/python sample_runs/make_sample_runs.py      # or: make sample-runs

Deletes and rewrites ``sample_runs/store``, trains each run below one after the other (one process at a time),
then strips what a shipped store does not need (each run's ``checkpoint/`` and ``*.duckdb`` export; the
Monitor already compacted the Parquet segments when it closed the run) and prints a summary per run: reward
trajectory, first flag of each detector / phase, reward-collapse step. ``--only NAME`` regenerates one run
(the others are kept); ``--summary`` only prints the summary of the existing store.

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

SMOOTH = 16
"""Steps of the trailing mean the summary uses for the reward (one step = one mini-batch, a few sequences)."""
COLLAPSE_FRAC = 0.5
"""Reward collapse = the first step where the smoothed reward is ≤ this × its running maximum."""


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


def summary(names: list[str]) -> None:

    from collapsewatch import connect

    con = connect(STORE)
    for name in names:
        df = con.execute("SELECT step, reward_mean FROM steps WHERE run = ? ORDER BY step", [name]).df()
        if df.empty:
            print(f"\n{name}: no steps")
            continue
        r = df.set_index("step")["reward_mean"].rolling(SMOOTH, min_periods=SMOOTH).mean().dropna()
        peak = r.cummax()
        collapsed = r[(r <= COLLAPSE_FRAC * peak) & (peak > 0)]
        c_step = int(collapsed.index[0]) if len(collapsed) else None
        ev = con.execute(
            "SELECT detector, phase, min(step_start) AS first, max(step_end) AS last, count(*) AS episodes, "
            "max(CASE severity WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END) AS sev "
            "FROM events WHERE run = ? GROUP BY 1, 2 ORDER BY 3", [name]).df()
        sev = {0: "info", 1: "warning", 2: "critical"}
        print(f"\n{name}: {len(df)} steps; reward ({SMOOTH}-step trailing mean) first {r.iloc[0]:.3f} "
              f"(step {int(r.index[0])}), max {r.max():.3f} (step {int(r.idxmax())}), final {r.iloc[-1]:.3f}; "
              f"reward collapse (≤ {COLLAPSE_FRAC:g} × running max): "
              f"{'step ' + str(c_step) if c_step is not None else 'none'}")
        marks = r.iloc[:: max(1, len(r) // 12)]
        print("  reward: " + ", ".join(f"{int(s)}:{v:.2f}" for s, v in marks.items()))
        for row in ev.itertuples():
            lead = f", {c_step - row.first:+d} steps before the collapse" if c_step is not None else ""
            print(f"  {row.detector}/{row.phase}: first step {row.first}, last {row.last}, {row.episodes} "
                  f"episode(s), worst {sev[int(row.sev)]}{lead}")
        if ev.empty:
            print("  no detector episodes")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="regenerate only this run (repeatable)")
    ap.add_argument("--summary", action="store_true", help="print the summary of the existing store only")
    args = ap.parse_args(argv)
    names = [r[0] for r in RUNS]
    if not args.summary:
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
