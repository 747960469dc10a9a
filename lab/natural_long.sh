#!/bin/sh
# The long-horizon natural corpus (issue 24 §3): the runs of lab/natural_long.toml, one at a time, in the file's
# order, resumable (a run already finished or crashed in the store is skipped). Each run imports the package from
# SNAPSHOT (`git archive` of a commit: a run never sees a half-edited working tree); the grid file is re-read
# before each run, so its order can change while the corpus trains. Touch STORE/STOP to stop after the current run.
#   usage: nice -n 10 lab/natural_long.sh STORE [SNAPSHOT] [GRID]
set -eu
STORE=${1:?usage: natural_long.sh STORE [SNAPSHOT] [GRID]}
SNAP=${2:-$STORE/code}
GRID=${3:-$(dirname "$0")/natural_long.toml}
PY=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
while [ ! -e "$STORE/STOP" ]; do
  rc=0
  PYTHONPATH="$SNAP" "$PY" - "$GRID" "$STORE" <<'PYEOF' || rc=$?
import sys
from collapsewatch.lab.grid import done_runs, load_grid, run_grid
specs = load_grid(sys.argv[1])
todo = [s for s in specs if s.name not in done_runs(sys.argv[2])]
if not todo:
    sys.exit(3)
run_grid(todo[:1], sys.argv[2])
PYEOF
  [ "$rc" -eq 3 ] && break
  [ "$rc" -ne 0 ] && { echo "natural_long: the run driver failed (exit $rc)" >&2; exit "$rc"; }
done
echo "natural_long: done"
