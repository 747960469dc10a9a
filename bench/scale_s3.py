"""The S3 rows of ``bench.bench_scale`` (``--s3``): bytes fetched and time of a reader with an empty mirror.

Each store of the bench is uploaded to an S3 server on 127.0.0.1 (moto, the tests' ``tests/store/s3server.py``, in
a process of its own) under the publish rule (every object, a marker for each flush's segments); then, each in a new
process with an empty ``$COLLAPSEWATCH_CACHE``, side by side with the same reads of the local folder:

* **open the runs page**: ``Store`` + the run rows (``queries.run_rows``), then the runs page's data
  (``history.run_table`` + ``tables.runs_rows``: every run's verdict, so every run's step-level tables);
* **open one run**: the run page's data (``dashboard.live.load``), then **that run's tokens** (the token page's
  ``queries.token_steps`` and ``queries.token_heatmap``).

Bytes fetched are the mirror's total (``lazy.fetched``: every process that used it, the SQL worker included); the
bucket's bytes and one run's step-level and token bytes (from the listing) are printed with them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collapsewatch.store.location import FLUSH_SEGMENT, MIRROR_SKIPS, marker_rel

BUCKET = "scale"
RUNS_ROWS = "open the runs page: run rows"
ONE_RUN = "open one run (run page data)"
STEP_LEVEL = ("runs", "step_metrics", "scalars", "events", "sentinels")


def server(env: dict[str, str]) -> tuple[subprocess.Popen, dict[str, str]]:
    """An S3 server in a process of its own (it ends with this one) and the environment that reaches it."""
    from tests.store.s3server import CREDENTIALS, S3Server

    proc = subprocess.Popen([sys.executable, "-m", "tests.store.s3server"], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    endpoint = proc.stdout.readline().strip()
    S3Server(None, endpoint).create_bucket(BUCKET)
    return proc, {**env, "AWS_ENDPOINT_URL": endpoint, **CREDENTIALS}


def upload(store: Path, url: str, env: dict[str, str]) -> None:
    """Every file of the folder store under ``url`` (not exports, locks or hidden files), each flush published."""
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    from collapsewatch.store.location import parse_url

    remote = parse_url(url)
    flushes: dict[str, list[str]] = {}
    for path in sorted(store.rglob("*")):
        rel = path.relative_to(store).as_posix()
        if not path.is_file() or any(p.startswith(".") for p in rel.split("/")) or rel.endswith(MIRROR_SKIPS):
            continue
        remote.put(path, rel)
        parts = rel.split("/")
        if len(parts) == 3 and FLUSH_SEGMENT.match(parts[2]):
            flushes.setdefault(marker_rel(parts[0], parts[2]), []).append(f"{parts[1]}/{parts[2]}")
    for marker, lines in flushes.items():
        remote.put_bytes(marker, "\n".join(lines).encode())


def probe(target: str, run: str, action: str) -> dict:
    """In this process (its cache empty): the timings and, on a URL, the bytes fetched of one action."""
    from collapsewatch.store import Store, lazy, queries
    from dashboard import history, live, state, tables
    from dashboard.figures import COLUMNS

    out: dict = {}
    t0 = time.perf_counter()
    s = Store(target)
    steps = [(RUNS_ROWS, lambda: queries.run_rows(s)),
             ("… then the runs page data (every run's verdict)",
              lambda: tables.runs_rows(history.run_table(s, COLUMNS)))] if action == "runs" else [
             (ONE_RUN, lambda: (state.configure(target), live.load(run))),
             ("… then that run's tokens (token page)",
              lambda: (queries.token_steps(s, run), queries.token_heatmap(s, run, "ratio")))]
    for name, fn in steps:
        fn()
        out[name] = (time.perf_counter() - t0, lazy.fetched(s.root)[0])
        t0 = time.perf_counter()
    return out


def run_probe(target: str, run: str, action: str, env: dict[str, str]) -> dict:
    cache = tempfile.mkdtemp(prefix="cw-s3-cache-")
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
            f"from bench.scale_s3 import probe; print(json.dumps(probe({target!r}, {run!r}, {action!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**env, "COLLAPSEWATCH_CACHE": cache}, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise SystemExit(f"S3 probe of {target} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def listing_bytes(url: str, run: str) -> dict[str, int]:
    from collapsewatch.store.location import parse_url, published

    listing = published(parse_url(url).list())
    out = {"bucket": sum(s for s, _ in listing.values()), "run step-level": 0, "run tokens": 0}
    for rel, (size, _) in listing.items():
        parts = rel.split("/")
        if parts[0] == run and parts[1] in STEP_LEVEL:
            out["run step-level"] += size
        if parts[0] == run and parts[1] == "tokens":
            out["run tokens"] += size
    return out


def mb(n: int) -> str:
    return f"{n / 2**20:.2f} MB" if n >= 2**20 else f"{n / 2**10:.0f} kB"


def rows(paths: dict[int, Path], run: str, env: dict[str, str]) -> list[str]:
    """The S3 table's lines: per store size, each action's time on S3 (bytes fetched) and on the folder."""
    proc, s3env = server(env)
    try:
        cells: dict[str, list[str]] = {}
        for n, path in paths.items():
            url = f"s3://{BUCKET}/n{n}"
            upload(path, url, s3env)
            sizes = listing_bytes(url, run)
            got = {**run_probe(url, run, "runs", s3env), **run_probe(url, run, "run", s3env)}
            local = {**run_probe(str(path), run, "runs", env), **run_probe(str(path), run, "run", env)}
            prev = 0
            for name, (took, fetched) in got.items():
                if name in (RUNS_ROWS, ONE_RUN):
                    prev = 0
                cells.setdefault(name, []).append(
                    f"{took:.2f} s, {mb(fetched - prev)} (local {local[name][0]:.2f} s)")
                prev = fetched
            for k, v in sizes.items():
                cells.setdefault(f"bytes: {k}", []).append(mb(v))
        head = "| S3, empty mirror: time, bytes fetched (local folder) | " + " | ".join(
            f"{n:,} run{'s' if n > 1 else ''}" for n in paths) + " |"
        return [head, "|---|" + "---:|" * len(paths)] + [f"| {k} | " + " | ".join(v) + " |" for k, v in cells.items()]
    finally:
        proc.terminate()
        proc.wait()
