"""``runs_table`` judging many runs in worker processes (``runs --workers``): the same table as one process gives."""

from __future__ import annotations

import json
import shutil

import pytest

from collapsewatch import report
from collapsewatch.ingest import ingest_file
from collapsewatch.store import Store
from tests.store.test_reader_cache import _forget, cache  # noqa: F401  (cache: a fixture)

# a fresh COLLAPSEWATCH_CACHE, inherited by the worker processes; this process's reader state forgotten
pytestmark = pytest.mark.usefixtures("cache")


def test_runs_judged_by_workers_give_the_table_one_process_gives(tmp_path, monkeypatch):
    # 16 runs (report.PARALLEL_MIN) of 30 steps, ingested from JSONL: run k's reward holds at 0.5 and, for odd k,
    # falls to 0 from step 15 (a collapse by the reward rule), its entropy 0.3 and then 3.0 (diffuse output) —
    # healthy and collapsed verdicts alike. Two copies of the store: one table by 2 workers, one in this process.
    src = tmp_path / "logs"
    src.mkdir()
    a = tmp_path / "a"
    for k in range(report.PARALLEL_MIN):
        f = src / f"run{k:02d}.jsonl"
        fell = k % 2 == 1
        f.write_text("".join(json.dumps({"step": s, "reward": 0.0 if fell and s >= 15 else 0.5,
                                         "entropy": 3.0 if fell and s >= 15 else 0.3}) + "\n" for s in range(30)))
        ingest_file(a, f, f"run{k:02d}")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    _forget()
    calls: list[str] = []
    real = report._line
    monkeypatch.setattr(report, "_line", lambda store, r: calls.append(r["run"]) or real(store, r))
    _, by_workers = report.runs_table(Store(a), workers=2)
    assert calls == []  # every run judged in a worker (a spawned process does not see this patch)
    _, here = report.runs_table(Store(b), workers=1)
    assert sorted(calls) == [f"run{k:02d}" for k in range(16)]
    assert by_workers.drop(columns=["run"]).equals(here.drop(columns=["run"])) and list(by_workers["run"]) == list(
        here["run"])
    assert sorted(set(here["verdict"])) == ["collapsed", "healthy"]
    # what the workers judged was kept: this process reads it, judging nothing
    from collapsewatch import judge

    judged: list[str] = []
    real_judge = judge._judge
    monkeypatch.setattr(judge, "_judge", lambda store, run, *a: judged.append(run) or real_judge(store, run, *a))
    _forget()
    assert report.runs_table(Store(a), workers=1)[1].equals(by_workers) and judged == []
