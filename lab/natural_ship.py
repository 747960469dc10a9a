"""Copy natural-corpus runs from a training store into the committed corpus, stripped to what the lab reads.

`collapsewatch lab natural` reads a run's ``runs``, ``step_metrics``, ``scalars``, ``sentinels``, ``events`` and
``tokenizer`` only; a trained run also holds ``tokens/``, ``sequences/``, ``checkpoint/`` and a ``*.duckdb`` export,
tens of MB a run. The stripped copy scores the same (docs/lab/natural-corpus.md, session 47: byte-identical
``lab natural --runs --json``) at a few hundred KB a run, so the corpus can live in the repository and survive a
machine change. The ``store`` path in each run's recorded config (the training machine's folder) is blanked: it says
nothing about the run and is not the committed folder. A run already in DEST is left as it is (say ``--replace``).

    python lab/natural_ship.py STORE DEST [RUN ...] [--replace]      (no RUN: every finished run of STORE)
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import duckdb

KEEP = ("runs", "step_metrics", "scalars", "sentinels", "events", "tokenizer")
"""The folders of a run that ``lab natural`` reads (the module doc)."""


def finished_runs(store: Path) -> list[str]:
    """The runs of ``store`` whose ``runs`` table says finished, in name order."""
    out = []
    for d in sorted(p for p in store.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        files = sorted((d / "runs").glob("*.parquet"))
        if files and duckdb.sql(f"SELECT bool_and(status = 'finished') FROM read_parquet({[str(f) for f in files]})"
                                ).fetchall()[0][0]:
            out.append(d.name)
    return out


def _blank_store(runs_dir: Path) -> None:
    """Rewrite each ``runs`` parquet file with ``config.store`` blanked (every other column as it was)."""
    for f in sorted(runs_dir.glob("*.parquet")):
        tmp = f.with_suffix(".tmp")
        duckdb.execute("COPY (SELECT * REPLACE (CAST(json_merge_patch(config, '{\"store\": \"\"}') AS VARCHAR) AS "
                       "config) FROM read_parquet(?)) TO '" + str(tmp).replace("'", "''") + "' (FORMAT parquet)",
                       [str(f)])
        tmp.replace(f)


def ship(store: Path, dest: Path, runs: list[str], replace: bool = False) -> list[str]:
    """Copy ``runs`` of ``store`` into ``dest`` (stripped to :data:`KEEP`); return the runs copied."""
    if not (store / "_schema").is_dir():
        raise SystemExit(f"natural_ship: {store} is not a collapsewatch store (no _schema folder)")
    dest.mkdir(parents=True, exist_ok=True)
    if not (dest / "_schema").exists():
        shutil.copytree(store / "_schema", dest / "_schema")
    done = []
    for run in runs:
        src, out = store / run, dest / run
        if not (src / "runs").is_dir():
            raise SystemExit(f"natural_ship: no run {run!r} in {store}")
        if out.exists():
            if not replace:
                print(f"natural_ship: {run} already in {dest}: left as it is (--replace to copy it again)")
                continue
            shutil.rmtree(out)
        for part in KEEP:
            if (src / part).is_dir():
                shutil.copytree(src / part, out / part)
        _blank_store(out / "runs")
        done.append(run)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--replace", action="store_true", help="copy a run again where DEST holds it already")
    a = ap.parse_args(argv)
    runs = a.runs or finished_runs(a.store)
    done = ship(a.store, a.dest, runs, a.replace)
    print(f"natural_ship: {len(done)} run(s) copied to {a.dest}: {', '.join(done) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
