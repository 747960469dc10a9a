"""`lab run`: a grid of built-in-trainer runs (drills × objectives × seeds × settings), resumable.

A grid file is TOML. ``[base]`` holds TrainConfig fields every run shares; each ``[[grid]]`` table is a
sub-grid whose list values are axes (their Cartesian product is run; a ``drill`` list holds drill tables)::

    [base]
    steps = 120
    [[grid]]
    drill = [{kind = "lld", at_step = 48}, {kind = "isdd", at_step = 48}]
    objective = ["grpo", "llds"]
    seed = [0, 1, 2]

Each run is named from its drill and axis values (``lld-grpo-s0``; ``healthy-…`` without a drill; a table's
``tag = "x16"`` adds a part: ``lld-grpo-x16-s0``). A run whose
name already has a finished or crashed record in the store is skipped, so an interrupted ``lab run`` resumes.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LIST_FIELDS = {"stop_on"}  # TrainConfig fields whose value is itself a list (never an axis)


@dataclass(frozen=True)
class RunSpec:
    """One run of a grid: its name and the TrainConfig fields it sets (store and run added at launch)."""

    name: str
    fields: dict[str, Any]


def _name(values: dict[str, Any], axes: list[str], tag: str) -> str:
    drill = values.get("drill") or {}
    parts = [drill.get("kind") or "healthy", str(values.get("objective", "grpo")), *([tag] if tag else [])]
    for key in axes:
        if key in ("drill", "objective", "seed"):
            continue
        parts.append(f"{key.replace('_', '')}{values[key]}")
    parts.append(f"s{values.get('seed', 0)}")
    return "-".join(parts).replace("/", "_")


def expand(grid: dict[str, Any]) -> list[RunSpec]:
    """Every run of a parsed grid file, in file order; duplicate names fail."""
    base = dict(grid.get("base", {}))
    tables = grid.get("grid", [{}])
    if not isinstance(tables, list):
        raise ValueError("grid file: [[grid]] must be an array of tables")
    unknown = set(grid) - {"base", "grid"}
    if unknown:
        raise ValueError(f"grid file: unknown top-level key(s) {sorted(unknown)}; known: base, grid")
    out: list[RunSpec] = []
    for table in tables:
        merged = {**base, **table}
        tag = str(merged.pop("tag", ""))  # a name part telling sub-grids of equal axes apart (not a config field)
        axes = [k for k, v in merged.items() if isinstance(v, list) and k not in LIST_FIELDS]
        for combo in itertools.product(*(merged[k] for k in axes)):
            values = {**merged, **dict(zip(axes, combo, strict=True))}
            out.append(RunSpec(_name(values, axes, tag), values))
    names = [r.name for r in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"grid file: run names repeat ({', '.join(dupes[:5])}): two runs with the same settings")
    return out


def load_grid(path: str | os.PathLike) -> list[RunSpec]:
    """RunSpecs of a grid TOML file, each validated as a TrainConfig before anything trains."""
    from ..trainer.config import load_config

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"grid file {str(p)!r} does not exist")
    try:
        runs = expand(tomllib.loads(p.read_text()))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"grid file {str(p)!r} is not valid TOML: {e}") from e
    for spec in runs:
        try:
            load_config(**spec.fields)
        except (TypeError, ValueError) as e:
            raise ValueError(f"grid file {str(p)!r}, run {spec.name}: {e}") from e
    return runs


def done_runs(store: str | os.PathLike) -> set[str]:
    """Runs of the store that ended (finished or crashed): a resumed ``lab run`` skips them."""
    from ..store.queries import Store, runs_summary

    if not Path(store).is_dir():
        return set()
    st = Store(store)
    try:
        df = runs_summary(st)
    finally:
        st.close()
    return set(df.loc[df["status"].isin(["finished", "crashed"]), "run"])


def _train_one(fields: dict[str, Any], threads: int) -> tuple[str, str, int, float | None]:
    """Train one run in this (worker) process; a run that raises is reported as crashed, not re-raised."""
    import torch

    from ..trainer.config import load_config
    from ..trainer.loop import train

    torch.set_num_threads(threads)
    cfg = load_config(**fields)
    try:
        res = train(cfg)
    except Exception as e:  # the store marks it crashed; the grid goes on
        return cfg.run_name, f"crashed ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})", -1, None
    last = res.reward_history[-1] if res.reward_history else None
    return res.run, "finished", res.steps, last


def run_grid(specs: list[RunSpec], store: str | os.PathLike, jobs: int = 1,
             echo: Callable[[str], None] = print) -> list[str]:
    """Train every spec not yet done in ``store`` with ``jobs`` worker processes; one line per finished run."""
    if jobs < 1:
        raise ValueError(f"--jobs must be ≥ 1, got {jobs}")
    done = done_runs(store)
    todo = [s for s in specs if s.name not in done]
    echo(f"lab run: {len(specs)} run(s) in the grid, {len(specs) - len(todo)} already done, {len(todo)} to train")
    threads = max(1, (os.cpu_count() or 1) // jobs)
    fields = [{**s.fields, "store": str(store), "run": s.name, "progress": False} for s in todo]
    finished: list[str] = []
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: no torch state shared
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_train_one, f, threads): f["run"] for f in fields}
        for fut in cf.as_completed(futures):
            run, status, steps, last = fut.result()
            reward = "" if last is None else f", last rollout reward {last:.3f}"
            echo(f"{run}: {status}" + (f", {steps} steps{reward}" if steps >= 0 else ""))
            finished.append(run)
    return finished

