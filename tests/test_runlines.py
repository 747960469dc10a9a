"""``collapsewatch runs`` on a store whose runs are all settled and kept (``collapsewatch.runlines``): the table
comes from one kept line per run, the same text as computed, and without pandas or DuckDB; a run that changes is
computed again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from collapsewatch import runlines

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_runs" / "store"

PROBE = """
import contextlib, io, json, sys
from collapsewatch.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["runs", sys.argv[1]])
    except SystemExit:
        pass
print(json.dumps({"out": out.getvalue(), "heavy": sorted({m.split(".")[0] for m in sys.modules}
                                                          & {"pandas", "numpy", "duckdb", "pyarrow", "scipy"})}))
"""


def _runs(store: Path, cache: Path) -> dict:
    env = {**os.environ, "COLLAPSEWATCH_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(store)], capture_output=True, text=True, env=env,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_warm_runs_table_is_the_computed_one_without_pandas_and_a_changed_run_is_computed_again(tmp_path, monkeypatch):
    store, cache = tmp_path / "store", tmp_path / "cache"
    shutil.copytree(SAMPLE, store)
    old = time.time() - 60  # the copy's folders settled a minute ago (a folder changed in the last 2 s is not kept)
    for folder, _, _ in os.walk(store):
        os.utime(folder, (old, old))
    first = _runs(store, cache)  # nothing kept: computed (pandas, DuckDB) and kept
    assert {"pandas", "duckdb"} <= set(first["heavy"])
    second = _runs(store, cache)  # every run kept: the same text from the kept lines alone
    assert second["out"] == first["out"] and second["heavy"] == []
    assert "grpo-healthy" in second["out"] and "No warning in 200 steps" in second["out"]
    # a change in one run's folders (here: its events folder touched, as a new segment would) is not a kept line
    events = store / "grpo-healthy" / "events"
    os.utime(events, (old + 30, old + 30))
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(cache))
    kept, keys = runlines.kept_lines(store)
    assert "grpo-healthy" not in kept and len(kept) == len(keys) - 1
    third = _runs(store, cache)
    assert third["out"] == first["out"] and {"pandas", "duckdb"} <= set(third["heavy"])  # computed again
    assert _runs(store, cache)["heavy"] == []  # and kept again
    # a line kept by other verdict code (an upgrade that changed a sentence or a note) is not read back
    assert len(runlines.kept_lines(store)[0]) == len(keys)
    monkeypatch.setattr(runlines, "verdict_code", lambda: "other-verdict")
    assert runlines.kept_lines(store)[0] == {}


def test_a_count_column_with_a_missing_value_is_printed_as_a_float_column():
    # pandas makes [200, None] a float column, which the table prints as "200" and "NULL"; a kept line's cells are
    # typed the same way: 200 -> 200.0, None -> NaN; a column with no missing value keeps its ints
    def line(steps, order):
        return {"compact": {"run": f"r{order}", "steps": steps, "episodes": 3}, "order": [False, order]}

    rows = runlines.table_rows({"a": line(200, 1), "b": line(None, 2)})
    steps, episodes = runlines.COMPACT_COLUMNS.index("steps"), runlines.COMPACT_COLUMNS.index("episodes")
    assert rows[0][steps] == 200.0 and isinstance(rows[0][steps], float) and rows[1][steps] != rows[1][steps]
    assert [r[episodes] for r in rows] == [3, 3] and all(type(r[episodes]) is int for r in rows)
