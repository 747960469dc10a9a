"""Scale bench: what each command and page costs on stores of 1, 10, 100 (and, with ``--big``, 1,000) runs.

    python -m bench.bench_scale [--dir DIR] [--sizes 1,10,100] [--big] [--repeats 3] [--no-live] [--baseline SRC]
                                [--s3 | --s3-only] [--only NAME] [--pause S]

``--baseline SRC`` (a checkout of other code, e.g. ``git archive main | tar -x -C SRC``) times every command and probe
under both that code and this, interleaved in one run, each with its own reader caches (emptied at the start).

Writes the runs through the public ``Monitor`` API (``bench.scale_store``: 50 steps of 16 × 48 tokens each, grown
once into ``DIR/n<largest>``, kept between invocations; the smaller stores copy its first runs), then times, side by
side in one run and interleaved (store after store, repeat after repeat; medians, and the first try as "cold"):

* commands, each a new process: ``collapsewatch --help``, ``sql STORE "select 1"`` (from the second try on, run by
  the process its first try left kept, ``collapsewatch/kept.py``; and with nothing kept), a one-run query
  (``sql`` over the ``steps`` view of one run), ``runs``, ``detect --run`` of one run;
* in one process (``--probe``): opening a ``Store``, one run's step rows (``queries.step_rows``), a run page's data
  (``dashboard.live.load``, cold), the runs page's data (``history.run_table`` + ``tables.runs_rows``) cold and each
  3-second refresh after it (warm), while one live run writes a step every 0.5 s into that store (``--no-live``: none);
* the floor: the same questions in bare DuckDB over the same Parquet files (a new process importing duckdb for the
  commands; in-process for the rest).

``--s3`` adds each store on an S3 server (``bench.scale_s3``): the bytes a reader with an empty mirror fetches and
the time it takes to open the runs page, one run and that run's tokens, beside the same reads of the folder.

Every store's answers are checked against fresh single-run stores of the same runs (a copy of the run's folder
alone): the ``runs`` row, ``detect``'s verdict and episodes, and a sample of queries must be the same rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE_RUN_SQL = "SELECT step, reward_mean, entropy_mean FROM steps WHERE run = '{run}' ORDER BY step"
SAMPLE = (0, 3, 9)  # runs whose answers are checked against single-run stores (where a store holds them)
PROBE_REFRESHES = 5


def cli(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("collapsewatch")), *args]


def floor_cmd(sql: str) -> list[str]:
    code = f"import duckdb; duckdb.sql({sql!r}).fetchall()"
    return [sys.executable, "-c", code]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=tempfile.gettempdir())
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return took


def commands(store: Path, run: str) -> dict[str, list[str]]:
    s = str(store)
    steps = f"read_parquet('{s}/{run}/step_metrics/*.parquet')"
    return {
        "collapsewatch --help": cli("--help"),
        "sql STORE 'select 1'": cli("sql", s, "select 1"),
        "sql STORE 'select 1', nothing kept": ["env", "COLLAPSEWATCH_KEEP_S=0", *cli("sql", s, "select 1")],
        "sql: one run's steps": cli("sql", s, ONE_RUN_SQL.format(run=run)),
        "runs STORE": cli("runs", s),
        "detect STORE --run RUN": cli("detect", s, "--run", run),
        "floor: python + duckdb 'select 1'": floor_cmd("select 1"),
        "floor: one run's steps": floor_cmd(f"SELECT step, reward_mean, entropy_mean FROM {steps} ORDER BY step"),
        "floor: runs summary": floor_cmd(
            f"SELECT run, count(DISTINCT step), max(step), arg_max(reward_mean, step) "
            f"FROM read_parquet('{s}/*/step_metrics/*.parquet') GROUP BY run"),
    }


# ---------------------------------------------------------------- the in-process probe (its own process per store)

def _digest(df) -> str:
    return hashlib.sha1(df.to_csv(index=False).encode()).hexdigest()[:12]


def answers(store, run: str) -> dict[str, str]:
    """Digests of what a reader answers about ``run``: its ``runs`` row, ``detect``'s verdict and episodes, and
    a sample of queries (steps, episodes, token steps, sequences through user SQL)."""
    import pandas as pd

    from collapsewatch.judge import judge
    from collapsewatch.report import runs_table, verdict_object
    from collapsewatch.store import queries
    from dashboard.figures import COLUMNS

    full = runs_table(store)[1]
    row = full[full["run"] == run].drop(columns=["updated_at"], errors="ignore").to_dict("records")
    # the row's own values: a column's dtype depends on the other runs' rows (the live run's NULL step count makes
    # every run's count a float: 50 printed "50.0"), which is not an answer about this run
    row = pd.DataFrame([{k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in r.items()}
                        for r in row])
    j = judge(store, run)
    seqs = store.sql(f"SELECT step, count(*) AS n, sum(reward) AS r FROM sequences WHERE run = '{run}' "
                     "GROUP BY step ORDER BY step")[0]
    return {"runs row": _digest(row), "detect verdict": _digest(pd.DataFrame([verdict_object(j)]).astype(str)),
            "detect episodes": _digest(j.events), "step_rows": _digest(queries.step_rows(store, run, COLUMNS)),
            "run_events": _digest(queries.run_events(store, run)),
            "token_steps": _digest(queries.token_steps(store, run)), "sql sequences": _digest(seqs)}


def probe(store_path: Path, run: str, check: list[str]) -> dict:
    """Timings of the in-process reads on one store (module docstring), and the answers about ``check``."""
    from collapsewatch.store import Store, queries
    from dashboard import history, live, state, tables  # the checkout's own (PYTHONPATH), not the installed one
    from dashboard.figures import COLUMNS

    out: dict = {}
    t0 = time.perf_counter()
    s = Store(store_path)
    out["open Store"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    queries.step_rows(s, run, COLUMNS)
    out["one run's step rows (cold)"] = time.perf_counter() - t0
    times = []
    for _ in range(PROBE_REFRESHES):
        t0 = time.perf_counter()
        queries.step_rows(s, run, COLUMNS)
        times.append(time.perf_counter() - t0)
    out["one run's step rows (warm)"] = statistics.median(times)
    state.configure(store_path)
    t0 = time.perf_counter()
    live.load(run)
    out["run page data (cold)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tables.runs_rows(history.run_table(s, COLUMNS))
    out["runs page data (cold)"] = time.perf_counter() - t0
    times = []
    for _ in range(PROBE_REFRESHES):
        t0 = time.perf_counter()
        tables.runs_rows(history.run_table(s, COLUMNS))
        times.append(time.perf_counter() - t0)
    out["runs page refresh (warm)"] = statistics.median(times)
    out.update(floor(store_path, run))
    out["answers"] = {r: answers(s, r) for r in check}
    return out


def floor(store_path: Path, run: str) -> dict[str, float]:
    import duckdb

    con = duckdb.connect()
    sql = f"SELECT step, reward_mean, entropy_mean FROM read_parquet('{store_path}/{run}/step_metrics/*.parquet') " \
          "ORDER BY step"
    out = {}
    for name, q in (("floor: one run's step rows", sql), ("floor: runs page (runs × last step, reward)",
                    f"SELECT run, max(step), arg_max(reward_mean, step) FROM "
                    f"read_parquet('{store_path}/*/step_metrics/*.parquet') GROUP BY run")):
        con.execute(q).fetchall()
        t0 = time.perf_counter()
        con.execute(q).fetchall()
        out[name] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------- stores

def stores(base: Path, sizes: list[int], steps: int) -> dict[int, Path]:
    """``base/n<size>`` for each size: the largest grown through ``Monitor``, the others copies of its first runs."""
    from bench.scale_store import grow, run_name

    big = max(sizes)
    top = base / f"n{big}"
    t0 = time.perf_counter()
    written = grow(top, big, steps, 16, 48)
    if written:
        print(f"wrote {written} run(s) into {top} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    out = {big: top}
    for n in sizes:
        if n != big:
            out[n] = copy_runs(top, base / f"n{n}", [run_name(i) for i in range(n)])
    return out


def copy_runs(src: Path, dst: Path, runs: list[str]) -> Path:
    """A store holding only ``runs`` of ``src`` (their folders copied, the ``_schema``), made once."""
    if not (dst / "_schema").is_dir():
        tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f".{dst.name}."))
        shutil.copytree(src / "_schema", tmp / "_schema")
        for r in runs:
            shutil.copytree(src / r, tmp / r, ignore=shutil.ignore_patterns(".writer-*"))
        shutil.rmtree(dst, ignore_errors=True)
        os.replace(tmp, dst)
    return dst


# ---------------------------------------------------------------- the table

def fmt(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


REPO = Path(__file__).resolve().parents[1]


def version_env(src: Path, cache: Path) -> dict[str, str]:
    """The environment that runs the code at ``src`` (a checkout) with its reader caches in ``cache``."""
    return {**os.environ, "PYTHONPATH": str(src), "COLLAPSEWATCH_CACHE": str(cache),  # (a keeper of its own:
            "COLLAPSEWATCH_KEEP_S": "60"}  # collapsewatch/kept.py; it ends a minute after the bench)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "collapsewatch-scale")
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--big", action="store_true", help="add a 1,000-run store (long to write)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-live", action="store_true")
    ap.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (e.g. `git archive main`): "
                    "every timing runs under both, interleaved")
    ap.add_argument("--s3", action="store_true", help="and each store on an S3 server (moto): bytes fetched")
    ap.add_argument("--s3-only", action="store_true", help="only the S3 rows (no command or probe table)")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds before each command (a person's pace: the "
                    "process a kept `sql` started for the next command has finished starting)")
    ap.add_argument("--only", help="only the commands whose name starts with this (no probe, no answers check)")
    ap.add_argument("--probe", nargs=3, metavar=("STORE", "RUN", "CHECK"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe:
        print(json.dumps(probe(Path(a.probe[0]), a.probe[1], a.probe[2].split(","))))
        return
    from bench.scale_store import run_name

    sizes = sorted({int(x) for x in a.sizes.split(",")} | ({1000} if a.big else set()))
    a.dir.mkdir(parents=True, exist_ok=True)
    paths = stores(a.dir, sizes, a.steps)
    run = run_name(0)
    check = [run_name(i) for i in SAMPLE if i < max(sizes)]
    if a.s3 or a.s3_only:
        from bench.scale_s3 import rows

        s3_rows = rows(paths, run, {**os.environ, "PYTHONPATH": str(REPO)})
        if a.s3_only:
            print("\n".join(s3_rows))
            return
    singles = {r: copy_runs(paths[max(sizes)], a.dir / f"single-{r}", [r]) for r in check}
    versions = {"this": REPO, **({"baseline": a.baseline.resolve()} if a.baseline else {})}
    envs = {}
    for v, src in versions.items():  # reader caches start empty: the first try of each command is cold
        shutil.rmtree(a.dir / f"cache-{v}", ignore_errors=True)
        envs[v] = version_env(src, a.dir / f"cache-{v}")
    cmd_times: dict[tuple[str, int, str], list[float]] = {}
    for _ in range(a.repeats):
        for n, p in paths.items():
            for name, cmd in commands(p, run).items():
                if a.only and not name.startswith(a.only):
                    continue
                for v in versions if not name.startswith("floor") else ["this"]:
                    time.sleep(a.pause)
                    cmd_times.setdefault((name, n, v), []).append(timed(cmd, envs[v]))
    if a.only:
        print_table(sizes, list(versions), cmd_times, {}, {}, [])
        return
    probes = {(n, v): run_probe(p, run, [r for r in check if int(r.split("-")[1]) < n], not a.no_live, envs[v])
              for n, p in paths.items() for v in versions}
    single_answers = {r: run_probe(p, r, [r], False, envs["this"])["answers"][r] for r, p in singles.items()}
    print_table(sizes, list(versions), cmd_times, probes, single_answers, check)
    if a.s3:
        print("\n" + "\n".join(s3_rows))


def run_probe(store: Path, run: str, check: list[str], with_live: bool, env: dict[str, str]) -> dict:
    """``probe`` in a new process running the code of ``env`` (this file run by path from a neutral folder, so that
    neither checkout's folder shadows the other), with a live run writing into the store meanwhile."""
    writer = None
    if with_live:
        writer = subprocess.Popen([sys.executable, "-m", "bench.scale_store", str(store), "--live", "live-run",
                                   "--seconds", "600"], stdout=subprocess.DEVNULL, cwd=REPO)
        deadline = time.monotonic() + 60
        while not (store / "live-run" / "step_metrics").is_dir() and time.monotonic() < deadline:
            time.sleep(0.2)
    code = (f"import runpy, sys; sys.argv = ['bench_scale', '--probe', {str(store)!r}, {run!r}, {','.join(check)!r}]; "
            f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env,
                              cwd=tempfile.gettempdir())
        if done.returncode != 0:
            raise SystemExit(f"probe of {store} failed: {done.stderr.strip()[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        if writer is not None:
            writer.terminate()
            writer.wait()
            shutil.rmtree(store / "live-run", ignore_errors=True)


def _cell(times: list[float]) -> str:
    return f"{fmt(statistics.median(times))} (first {fmt(times[0])})"


def print_table(sizes: list[int], versions: list[str], cmd_times: dict, probes: dict, singles: dict,
                check: list[str]) -> None:
    cols = [(n, v) for n in sizes for v in versions]
    print("| what | " + " | ".join(f"{n:,} run{'s' if n > 1 else ''}, {v}" for n, v in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name in dict.fromkeys(k for k, _, _ in cmd_times):
        print(f"| {name} | " + " | ".join(_cell(cmd_times[(name, n, v)]) if (name, n, v) in cmd_times else "—"
                                          for n, v in cols) + " |")
    if not probes:
        return print_load()
    for key in [k for k in probes[cols[0]] if k != "answers"]:
        print(f"| {key} | " + " | ".join(fmt(probes[c][key]) if key in probes[c] else "—" for c in cols) + " |")
    same = []
    for c in cols:
        mismatch = [f"{r}: {k}" for r in check for k, v in singles[r].items()
                    if r in probes[c]["answers"] and probes[c]["answers"][r][k] != v]
        same.append("same" if not mismatch else "DIFFERENT: " + "; ".join(mismatch))
    print("| answers vs single-run stores (" + ", ".join(check) + ") | " + " | ".join(same) + " |")
    print_load()


def print_load() -> None:
    print(f"\nload: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} CPUs); medians of the repeats (first: the first try, reader caches empty), commands "
          "as new processes; single-run answers from this code")


if __name__ == "__main__":
    main()
