#!/usr/bin/env bash
# The public-runs corpus (docs/lab/public_runs.md): ingest every run of sources.csv whose raw file is under raw/, then
# score the detectors on them. Raw files not committed (no licence to redistribute) are fetched by hand from the
# repository, path and commit in sources.csv into raw/<file>; their sha256 is checked. `lab score --all-kinds` scores
# every detector against each labelled kind (labels.csv: the collapse each public run's logs show, from its onset).
#   lab/public/score.sh STORE        (STORE: a new store folder)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
store="${1:?usage: lab/public/score.sh STORE}"
cw="${COLLAPSEWATCH:-collapsewatch}"
tail -n +2 "$here/sources.csv" | while IFS=, read -r run file _fw _alg _model _task repo path commit _lic _raw sha _state; do
  raw="$here/raw/$file"
  if [ ! -f "$raw" ]; then
    echo "missing $run: fetch https://github.com/$repo/blob/$commit/$path to lab/public/raw/$file" >&2; continue
  fi
  got="$( (case "$file" in *.gz) gzip -dc "$raw" ;; *) cat "$raw" ;; esac) | sha256sum | cut -d' ' -f1)"
  [ "$got" = "$sha" ] || { echo "$run: sha256 $got is not the recorded $sha" >&2; exit 1; }
  "$cw" ingest "$store" "$raw" --run "$run"
done
"$cw" lab score "$store" --labels "$here/labels.csv" --all-kinds
"$cw" detect "$store" --csv
