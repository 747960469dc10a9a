#!/bin/sh
# The long-horizon natural corpus (issue 24 §3): the runs of lab/natural_long.toml, one at a time, in the file's
# order, resumable (a run already finished or crashed in the store is skipped). Each run imports the package from
# SNAPSHOT (`git archive` of a commit: a run never sees a half-edited working tree); the grid file is re-read
# before each run, so its order can change while the corpus trains. Touch STORE/STOP to stop after the current run.
#   usage: nice -n 10 lab/natural_long.sh STORE [SNAPSHOT] [GRID]
set -eu
STORE=$(realpath "${1:?usage: natural_long.sh STORE [SNAPSHOT] [GRID]}")
SNAP=$(realpath "${2:-$STORE/code}")
GRID=$(realpath "${3:-$(dirname "$0")/natural_long.toml}")
PY=${PYTHON:-$(cd "$(dirname "$0")/../.venv/bin" && pwd)/python}  # not realpath: a venv's python is a symlink
cd "$(dirname "$STORE")"  # never the checkout: its package would shadow the snapshot
while [ ! -e "$STORE/STOP" ]; do
  rc=0
  PYTHONPATH="$SNAP" "$PY" -c '
import sys, time
from collapsewatch.lab.grid import _train_one, done_runs, load_grid
grid, store = sys.argv[1], sys.argv[2]
done = done_runs(store)
todo = [s for s in load_grid(grid) if s.name not in done]
if not todo:
    sys.exit(3)
t0 = time.time()
run, status, steps, last = _train_one({**todo[0].fields, "store": store, "run": todo[0].name, "progress": False}, 2)
print(f"{run}: {status}, {steps} steps, {time.time() - t0:.0f} s, last reward {last}", flush=True)
' "$GRID" "$STORE" || rc=$?
  [ "$rc" -eq 3 ] && break
  [ "$rc" -ne 0 ] && { echo "natural_long: the run driver failed (exit $rc)" >&2; exit "$rc"; }
done
echo "natural_long: done"
