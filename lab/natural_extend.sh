#!/bin/sh
# The natural corpus's runs trained on past their grid's 400 steps (session 40): each named run continues from its
# checkpoint (saved at its last step) with its own saved settings to step STEPS, one at a time
# (`collapsewatch train --resume`; a run already at STEPS is left as it is). SNAPSHOT as in natural_long.sh.
#   usage: nice -n 10 lab/natural_extend.sh STORE SNAPSHOT STEPS RUN...
# Session 40: STEPS 600, the runs then never collapsed or "cannot tell" (docs/lab/natural-corpus.md, session 40):
#   healthy-grpo-nll04-lr3e-4-s0 healthy-sapo_search-nll04-lr3e-4-s0 healthy-grpo-nll04-lr3e-4-s2
#   healthy-grpo-nll04-lr3e-4-s3 healthy-grpo-nll04-lr3e-4-s4 healthy-grpo-nll04-lr3e-4-t13-s0
#   healthy-llds-nll04-lr3e-4-s2 healthy-sapo_search-nll04-lr3e-4-s2 healthy-sapo_search-nll04-s2
# Session 41: STEPS 600, the runs still at 400 that the noise-aware reward rule left "cannot tell" or never collapsed:
#   healthy-grpo-nll04-lr1e-4-s0 healthy-llds-nll04-lr3e-4-s0 healthy-sapo_search-nll04-lr1e-4-s0
#   healthy-llds-nll04-lr1e-4-s0 healthy-llds-nll04-lr3e-4-s1
# Session 43: STEPS 700, the seven runs still "cannot tell" at 600:
#   healthy-grpo-nll04-lr3e-4-s0 healthy-grpo-nll04-lr3e-4-t13-s0 healthy-llds-nll04-lr1e-4-s0
#   healthy-llds-nll04-lr3e-4-s0 healthy-llds-nll04-lr3e-4-s2 healthy-sapo_search-nll04-lr3e-4-s0
#   healthy-sapo_search-nll04-lr3e-4-s2
set -eu
STORE=$(realpath "${1:?usage: natural_extend.sh STORE SNAPSHOT STEPS RUN...}")
SNAP=$(realpath "${2:?usage: natural_extend.sh STORE SNAPSHOT STEPS RUN...}")
STEPS=${3:?usage: natural_extend.sh STORE SNAPSHOT STEPS RUN...}
shift 3
PY=${PYTHON:-$(cd "$(dirname "$0")/../.venv/bin" && pwd)/python}  # not realpath: a venv's python is a symlink
cd "$(dirname "$STORE")"  # never the checkout: its package would shadow the snapshot
for run in "$@"; do
  t0=$(date +%s)
  PYTHONPATH="$SNAP" "$PY" -m collapsewatch train --resume --store "$STORE" --run "$run" --steps "$STEPS"
  echo "$run: to step $STEPS in $(( $(date +%s) - t0 )) s"
done
echo "natural_extend: done"
