"""How the verdict's reward rule (``collapsewatch.reward.reward_collapse``) reads runs whose class is known: per class
of ``lab bench`` (healthy, collapsed), counting only runs the public labels file names (their class is the authors'
words, not the rule's own reading), and per side of its split (sources a rule was tuned on / held out), how many
runs the rule reads "collapsed", with its noise-aware best (today's ``NOISE_Z``) and with the plain best (``NOISE_Z``
0, the rule before 2026-12-01). A healthy run read collapsed is a verdict a user
would see wrongly; a collapsed run read collapsed is one the verdict names itself.

    collapsewatch lab bench --public STORE --json --runs > bench.json
    python -m bench.reward_rule_labels STORE bench.json [--z 0 1 1.5 2] [--labels lab/public/labels.csv]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np

from collapsewatch import reward
from collapsewatch.lab.labels import read_label_file
from collapsewatch.reward import reward_collapse
from collapsewatch.store import Store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("bench_json", help="`collapsewatch lab bench --json --runs` output: classes, sources, split")
    p.add_argument("--z", type=float, nargs="*", default=None, help="NOISE_Z values (default: 0 and today's)")
    p.add_argument("--labels", type=Path, default=Path(__file__).resolve().parents[1] / "lab" / "public" / "labels.csv",
                   help="the labels file whose runs are counted (default: the public corpus's)")
    a = p.parse_args()
    named = set(read_label_file(a.labels))
    with open(a.bench_json, encoding="utf-8") as f:
        bench = json.load(f)
    if "runs" not in bench:
        raise SystemExit(f"{a.bench_json}: no per-run rows; make it with `lab bench --json --runs`")
    tuned = set(bench["split"]["tuned_on"])
    runs = {r["run"]: r for r in bench["runs"] if r["status"] in ("healthy", "collapsed") and r["run"] in named}
    rows = Store(a.store).query("SELECT run, step, reward_mean FROM steps WHERE rank = 0 AND reward_mean IS NOT NULL "
                                "ORDER BY run, step")
    zs = a.z if a.z is not None else sorted({0.0, reward.NOISE_Z})
    today, total, read = reward.NOISE_Z, Counter(), Counter()
    try:
        for run, df in rows.groupby("run", sort=True):
            r = runs.get(run)
            if r is None:
                continue
            key = ("tuned on" if r["source"] in tuned else "held out", r["status"])
            total[key] += 1
            s, y = df["step"].to_numpy(), df["reward_mean"].to_numpy(float)
            for z in zs:
                reward.NOISE_Z = z
                read[key + (z,)] += reward_collapse(s, y) is not None
    finally:
        reward.NOISE_Z = today
    print("| split | class | runs with a reward | " + " | ".join(f"read collapsed, NOISE_Z {z:g}" for z in zs) + " |")
    print("|---|---|---:|" + "---:|" * len(zs))
    for key in sorted(total):
        print(f"| {key[0]} | {key[1]} | {total[key]} | " + " | ".join(str(read[key + (z,)]) for z in zs) + " |")
    print(f"\n(today's NOISE_Z: {today:g}; {int(np.sum(list(total.values())))} runs of {a.bench_json})")


if __name__ == "__main__":
    main()
