"""`collapsewatch demo` / `make demo`: a short real training run with the monitor, then the dashboard.

The shipped sample runs (``sample_runs/``: healthy, collapsing, SAPO-search, LLDS) are copied into the demo
store next to the fresh run, so the dashboard has something to compare against at once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

SAMPLE_RUNS = Path(__file__).resolve().parents[1] / "sample_runs" / "store"


def copy_sample_runs(store: Path) -> list[str]:
    """Copy each sample run folder into ``store`` (skipping ones already there)."""
    copied = []
    if not SAMPLE_RUNS.is_dir():
        return copied
    for run_dir in sorted(SAMPLE_RUNS.iterdir()):
        if run_dir.name.startswith(("_", ".")) or not (run_dir / "runs").is_dir():
            continue
        target = store / run_dir.name
        if not target.exists():
            shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("checkpoint", "*.duckdb"))
            copied.append(run_dir.name)
    return copied


def run_demo(store: Path, steps: int = 30, serve: bool = True, port: int = 8050) -> None:
    from .store.writer import ensure_schema
    from .trainer.config import load_config
    from .trainer.loop import train

    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    ensure_schema(store)
    copied = copy_sample_runs(store)
    if copied:
        print(f"sample runs copied into {store}: {', '.join(copied)}")
    cfg = load_config(steps=steps, store=str(store), run="demo-grpo", objective="grpo")
    if (store / cfg.run_name).exists():
        shutil.rmtree(store / cfg.run_name)  # a fresh demo run each time
    print(f"training {cfg.run_name}: {steps} steps of GRPO on the built-in tiny model (CPU) …")
    result = train(cfg)
    print(f"done: {result.steps} steps. Query it:  collapsewatch sql {store} \"select step, reward_mean, "
          f"ratio_p05_pos from steps where run = '{result.run}' order by step\"")
    if serve:
        from collapsewatch.dashboard.app import serve as serve_dash

        print(f"dashboard: http://127.0.0.1:{port}  (Ctrl-C to stop)")
        serve_dash(str(store), host="127.0.0.1", port=port)
