"""What sentinel scoring costs the built-in trainer: one scoring against one optimizer step, and amortised over k.

Per scored step the trainer logs ``sentinel_time`` (wall time of the no-grad forward of the whole set, outside
``step_time``), ``step_time`` (the optimizer step's forward, backward, probe and update) and ``rollout_time`` (the
rollout that fed the step; one rollout feeds ``mini_batches`` steps). A step's wall time is therefore
``step_time + rollout_time / mini_batches``, and scoring every k steps costs
``median(sentinel_time) / (k · median(step wall time))`` of the run. Both come from the same run, so load on a
shared machine hits them alike; the numbers are ratios, never absolute claims.

    python -m bench.bench_sentinels                       # trains a short run (sentinels every step) and reports
    python -m bench.bench_sentinels --store S [--run R]   # reads the scored steps of existing runs (e.g. a corpus)
"""

from __future__ import annotations

import argparse
import tempfile

import pandas as pd

from collapsewatch import connect

EVERY = (1, 5, 10, 20)


def costs(df: pd.DataFrame, mini_batches: int) -> dict[str, float]:
    """Medians and the amortised share per k from steps rows (columns sentinel_time, step_time, rollout_time)."""
    scored = df.dropna(subset=["sentinel_time"])
    wall = (df["step_time"] + df["rollout_time"] / mini_batches).dropna()
    s, w = float(scored["sentinel_time"].median()), float(wall.median())
    out = {"scorings": len(scored), "steps": len(wall), "sentinel_time_median_s": s, "step_wall_median_s": w}
    out.update({f"share_every_{k}": s / (k * w) for k in EVERY})
    return out


def _train(steps: int, model: str, n: int) -> str:
    from collapsewatch.trainer.config import load_config
    from collapsewatch.trainer.loop import train

    store = tempfile.mkdtemp(prefix="bench-sentinels-")
    cfg = load_config(steps=steps, store=store, run="bench", progress=False, model=model, prompts_per_rollout=4,
                      group_size=8, max_response_tokens=120, lr=1e-3, sentinels=n, sentinel_every=1)
    train(cfg)
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="read existing runs instead of training one")
    ap.add_argument("--run", help="only this run of --store")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--sentinels", type=int, default=16, help="held-out questions (2 sentinels each)")
    ap.add_argument("--model", default="builtin:tiny?target_nll=0.4")
    ap.add_argument("--mini-batches", type=int, default=2)
    a = ap.parse_args()
    store = a.store or _train(a.steps, a.model, a.sentinels)
    where = "WHERE run = ?" if a.run else ""
    df = connect(store).execute(f"SELECT run, step, sentinel_time, step_time, rollout_time FROM steps {where}",
                                [a.run] if a.run else []).df()
    rows = [{"run": run, **costs(g, a.mini_batches)} for run, g in df.groupby("run")]
    rows.append({"run": "all", **costs(df, a.mini_batches)})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
