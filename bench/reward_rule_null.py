"""The reward rule's null test by split: each healthy run's own rewards in random orders (no trend by construction),
read by the verdict's rule (``collapsewatch.reward.reward_collapse``); per side of ``lab bench``'s split (the sources a
rule was tuned on / held out), how many runs read "collapsed" in more than ``--over`` of their orders, and the mean
share. The orders are seeded per run (``crc32(run) + k``), so two versions of the rule meet the same orders.

    collapsewatch lab bench --public STORE --json --runs > bench.json
    python -m bench.reward_rule_null STORE bench.json [--shuffles 60] [--min-points 100] [--over 0.05] [--runs]
"""

from __future__ import annotations

import argparse
import json
import zlib

import numpy as np

from collapsewatch.reward import reward_collapse
from collapsewatch.store import Store


def shares(reward: np.ndarray, run: str, shuffles: int) -> float:
    """The share of ``shuffles`` seeded orders of ``reward`` the rule reads collapsed."""
    steps = np.arange(len(reward))
    hits = sum(reward_collapse(steps, np.random.default_rng(zlib.crc32(run.encode()) + k).permutation(reward))
               is not None for k in range(shuffles))
    return hits / shuffles


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("bench_json", help="`collapsewatch lab bench --json --runs` output: classes, sources, split")
    p.add_argument("--shuffles", type=int, default=60)
    p.add_argument("--min-points", type=int, default=100, help="healthy runs with at least this many reward points")
    p.add_argument("--over", type=float, default=0.05, help="a run fails the null above this share")
    p.add_argument("--runs", action="store_true", help="also print each run's share")
    a = p.parse_args()
    with open(a.bench_json, encoding="utf-8") as f:
        bench = json.load(f)
    if "runs" not in bench:
        raise SystemExit(f"{a.bench_json}: no per-run rows; make it with `lab bench --json --runs`")
    tuned = set(bench["split"]["tuned_on"])
    side = {r["run"]: "tuned on" if r["source"] in tuned else "held out" for r in bench["runs"] if r["status"] == "healthy"}
    rows = Store(a.store).query("SELECT run, step, reward_mean FROM steps WHERE rank = 0 AND reward_mean IS NOT NULL "
                                "ORDER BY run, step")
    by: dict[str, list[float]] = {"tuned on": [], "held out": []}
    for run, df in rows.groupby("run", sort=True):
        r = df["reward_mean"].to_numpy(float)
        if run not in side or len(r) < a.min_points:
            continue
        share = shares(r, str(run), a.shuffles)
        by[side[run]].append(share)
        if a.runs:
            print(f"| {side[run]} | {run} | {len(r)} | {share:.1%} |")
    print(f"| split | healthy runs (≥ {a.min_points} reward points) | read collapsed in > {a.over:.0%} of orders | "
          "mean share |")
    print("|---|---:|---:|---:|")
    for name, xs in by.items():
        print(f"| {name} | {len(xs)} | {sum(x > a.over for x in xs)} | {np.mean(xs) if xs else 0:.1%} |")
    print(f"\n({a.shuffles} orders a run, seeded crc32(run) + k; {a.bench_json})")


if __name__ == "__main__":
    main()
