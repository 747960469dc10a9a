"""How often the verdict's reward rule (``collapsewatch.reward.reward_collapse``: the 10-point level fell to half its
best and stayed down 10 points) calls a series with no trend at all collapsed: each run's own step rewards, shuffled
(the same values, any order: no trend by construction), and resampled with replacement to a longer run. A share far
above 0 means the rule reads that run's noise as collapses.

    python -m bench.reward_rule_noise STORE [--runs RUN ...] [--shuffles 500] [--steps 600] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from collapsewatch.reward import reward_collapse
from collapsewatch.store import Store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("--runs", nargs="*", help="runs to read (default: every run with ≥ 100 reward points)")
    p.add_argument("--shuffles", type=int, default=500, help="random orders (and resamples) per run")
    p.add_argument("--steps", type=int, default=600, help="length of the resampled longer run")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    store = Store(a.store)
    rows = store.query("SELECT run, step, reward_mean FROM steps WHERE rank = 0 AND reward_mean IS NOT NULL "
                       "ORDER BY run, step")
    rng = np.random.default_rng(a.seed)
    print(f"| run | reward points | mean | step sd | collapsed, shuffled | collapsed, {a.steps} resampled |")
    print("|---|---:|---:|---:|---:|---:|")
    for run, df in rows.groupby("run", sort=True):
        r = df["reward_mean"].to_numpy(float)
        if (a.runs and run not in a.runs) or (not a.runs and len(r) < 100):
            continue
        shuffled = sum(reward_collapse(np.arange(len(r)), rng.permutation(r)) is not None for _ in range(a.shuffles))
        longer = sum(reward_collapse(np.arange(a.steps), rng.choice(r, a.steps)) is not None
                     for _ in range(a.shuffles))
        print(f"| {run} | {len(r)} | {r.mean():.3f} | {r.std():.3f} | {shuffled / a.shuffles:.1%} | "
              f"{longer / a.shuffles:.1%} |")
    print(f"\n({a.shuffles} shuffles and {a.shuffles} resamples a run, seed {a.seed})")


if __name__ == "__main__":
    main()
