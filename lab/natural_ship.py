"""Copy natural-corpus runs from a training store into the committed corpus, stripped to what the lab reads.

`collapsewatch lab natural` reads a run's ``runs``, ``step_metrics``, ``scalars``, ``sentinels``, ``events`` and
``tokenizer`` only; a trained run also holds ``tokens/``, ``sequences/``, ``checkpoint/`` and a ``*.duckdb`` export,
tens of MB a run. The stripped copy scores the same (docs/lab/natural-corpus.md, session 47: byte-identical
``lab natural --runs --json``) at a few hundred KB a run, so the corpus can live in the repository and survive a
machine change. The ``store`` path in each run's recorded config (the training machine's folder) is blanked: it says
nothing about the run and is not the committed folder. A run already in DEST is left as it is (say ``--replace``).
With ``--manifest CSV --commit SHA``, a row per copied run (its steps, objective, learning rate and seed from its
config, the commit that trained it, ``--note``) replaces that run's row in CSV or is appended.

    python lab/natural_ship.py STORE DEST [RUN ...] [--replace] [--manifest CSV --commit SHA [--note TEXT]]
    (no RUN: every finished run of STORE)
"""

from __future__ import annotations

import argparse
import csv
import json
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
        if files and duckdb.execute("SELECT bool_and(status = 'finished') FROM read_parquet(?)",
                                    [[str(f) for f in files]]).fetchall()[0][0]:
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


MANIFEST_COLUMNS = ("run", "steps", "objective", "lr", "seed", "commit", "note")


def manifest_row(dest: Path, run: str, commit: str, note: str) -> dict[str, str]:
    """The manifest's row of ``run`` in ``dest``, from its recorded config."""
    ((config,),) = duckdb.sql("SELECT config FROM read_parquet(?)", params=[str(dest / run / "runs" / "*.parquet")]
                              ).fetchall()
    c = json.loads(config)
    return {"run": run, "steps": str(c["steps"]), "objective": c["objective"], "lr": f"{c['lr']:g}",
            "seed": str(c["seed"]), "commit": commit, "note": note}


def update_manifest(path: Path, rows: list[dict[str, str]]) -> None:
    """Replace each row's run in the CSV at ``path`` (created if absent) or append it; rows kept in run order."""
    old = list(csv.DictReader(open(path, newline=""))) if path.exists() else []
    by_run = {r["run"]: r for r in old} | {r["run"]: r for r in rows}
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, MANIFEST_COLUMNS)
        w.writeheader()
        w.writerows(by_run[r] for r in sorted(by_run))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--replace", action="store_true", help="copy a run again where DEST holds it already")
    ap.add_argument("--manifest", type=Path, help="a CSV to record each copied run in (with --commit)")
    ap.add_argument("--commit", default="", help="the commit whose code trained the runs")
    ap.add_argument("--note", default="", help="the manifest's note for these runs")
    a = ap.parse_args(argv)
    if a.manifest and not a.commit:
        ap.error("--manifest needs --commit (the commit whose code trained the runs)")
    runs = a.runs or finished_runs(a.store)
    done = ship(a.store, a.dest, runs, a.replace)
    if a.manifest:
        update_manifest(a.manifest, [manifest_row(a.dest, run, a.commit, a.note) for run in done])
    print(f"natural_ship: {len(done)} run(s) copied to {a.dest}: {', '.join(done) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
