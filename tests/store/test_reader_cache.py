"""What a reader learned about a store is kept between processes (``store.manifest``, ``collapsewatch.judged``):
each segment file is checked once, not once per process, and a run is judged once per set of files and rules —
and either is done again exactly when its file, the run's files or the rules change."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from collapsewatch import Monitor, judge, judged  # noqa: F401  (judge: the module)
from collapsewatch.detectors import DetectorConfig
from collapsewatch.store import Store, manifest, segments
from collapsewatch.store.migrations import TABLES
from tests.conftest import random_batch

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "store"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    segments._verdicts.clear()
    manifest.clear()
    judge.clear()
    yield tmp_path / "cache"
    segments._verdicts.clear()
    manifest.clear()
    judge.clear()


def _forget() -> None:
    """This process forgets what it checked and judged (as a new process would); the kept files stay."""
    segments._verdicts.clear()
    manifest.clear()
    judge.clear()


def _listing(root: Path) -> dict[str, tuple]:
    return {t: segments.table_files(root, t) for t in TABLES}


def _in_new_process(code: str, env_cache: Path) -> None:
    env = {"COLLAPSEWATCH_CACHE": str(env_cache), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_a_runs_table_reads_a_kept_judgement_without_building_its_frames(tmp_path, cache, monkeypatch):
    # `runs` needs of each run its verdict, episode count and computed flag; a run judged before (by any process)
    # gives them from its kept record alone: no judging and no frame built (frame_in was most of a warm `runs`)
    calls: list[str] = []
    real_judge, real_frame_in = judge._judge, judged.frame_in
    monkeypatch.setattr(judge, "_judge", lambda *a, **k: calls.append("judge") or real_judge(*a, **k))
    monkeypatch.setattr(judged, "frame_in", lambda *a, **k: calls.append("frame") or real_frame_in(*a, **k))
    first = judge.summary(Store(SAMPLE), "grpo-collapse")  # never judged in this cache: judged now (12 episodes)
    assert calls == ["judge"] and first.n_events == 12
    _forget()
    again = judge.summary(Store(SAMPLE), "grpo-collapse")  # a new process's view: the kept record, read
    assert calls == ["judge"] and again == first
    full = judge.judge(Store(SAMPLE), "grpo-collapse")  # the full judgement: its frames built from the record
    assert calls == ["judge", "frame", "frame"]
    assert (again.verdict, again.n_events, again.computed) == (full.verdict, len(full.events), full.computed)


def test_one_runs_summary_row_is_the_store_wide_rows_and_is_kept(tmp_path, cache, monkeypatch):
    from collapsewatch import report
    from collapsewatch.store import queries

    # parity: each sample run's row read from its folder alone equals its row of the store-wide query
    store = Store(SAMPLE)
    wide = queries.runs_summary(store).set_index("run")
    for run in wide.index:
        one = pd.Series(queries.run_summary(store, run)).drop("run")
        pd.testing.assert_series_equal(one, wide.loc[run], check_names=False, check_dtype=False)
    # kept: a run's step statistics are computed from its folder once per set of files, then read
    calls: list[str] = []
    real = queries.run_summary
    monkeypatch.setattr(report, "run_summary", lambda *a: calls.append(a[1]) or real(*a))
    _write(tmp_path / "s", range(6))  # steps 0-5 of run r
    compact, full = report.runs_table(Store(tmp_path / "s"))
    assert calls == ["r"] and full.loc[0, "n_steps"] == 6 and full.loc[0, "last_step"] == 5
    _forget()
    assert report.runs_table(Store(tmp_path / "s"))[1].equals(full) and calls == ["r"]  # a new process: read
    _write(tmp_path / "s", range(6, 9), resume=True)  # new segments: computed again
    _forget()
    full = report.runs_table(Store(tmp_path / "s"))[1]
    assert calls == ["r", "r"] and full.loc[0, "n_steps"] == 9 and full.loc[0, "last_step"] == 8


def test_a_file_is_checked_once_not_once_per_process(tmp_path, cache, monkeypatch):
    root = tmp_path / "s"
    shutil.copytree(SAMPLE, root)
    _in_new_process(f"from collapsewatch.store import segments, migrations\n"
                    f"[segments.table_files(__import__('pathlib').Path({str(root)!r}), t) for t in migrations.TABLES]",
                    cache)
    kept = json.loads((manifest.store_dir(root) / "checks.json").read_text())["data"]
    n_files = sum(1 for p in root.rglob("*.parquet") if "_schema" not in p.parts)
    assert len(kept) == n_files  # every segment of the 7 runs (none bad), keyed by its path in the store
    expected = _listing(root)
    _forget()

    def no_footer(*a, **k):
        raise AssertionError("a footer was read again")

    monkeypatch.setattr(segments.pq, "read_schema", no_footer)
    assert _listing(root) == expected  # the same good files, from the kept checks alone


def test_a_file_replaced_under_its_name_is_checked_again_and_a_gone_one_forgotten(tmp_path, cache):
    root = tmp_path / "s"
    shutil.copytree(SAMPLE, root)
    _listing(root)
    manifest.file_checks(root).save(now=True)
    victim = sorted((root / "grpo-healthy" / "sequences").glob("*.parquet"))[0]
    gone = sorted((root / "llds" / "scalars").glob("*.parquet"))[0]
    _forget()
    victim.write_bytes(b"not parquet at all")  # another size and mtime: the kept check no longer counts
    gone.unlink()
    good, bad, _ = segments.table_files(root, "sequences")
    assert [p for p, _ in bad] == [str(victim)] and str(victim) not in [p for p, _ in good]
    segments.table_files(root, "scalars")
    manifest.file_checks(root).save(now=True)
    kept = json.loads((manifest.store_dir(root) / "checks.json").read_text())["data"]
    assert str(gone.relative_to(root)) not in kept
    assert kept[str(victim.relative_to(root))][2].startswith("not a readable Parquet file")


def test_a_cache_folder_that_cannot_be_written_costs_no_answer(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(blocker))  # mkdir under a file fails
    _forget()
    root = tmp_path / "s"
    shutil.copytree(SAMPLE, root)
    good = segments.table_files(root, "step_metrics")[0]
    manifest.file_checks(root).save(now=True)
    assert len(good) == 7  # one compacted step segment per run
    _forget()


def _write(store: Path, steps: range, resume: bool = False) -> None:
    mon = Monitor(store, run="r", rank=0, world_size=1, resume=resume)
    for step in steps:
        mon.observe(random_batch(seed=step, drift=0.1 + step / 10), step=step)
    mon.close()


def test_a_run_is_judged_once_per_files_and_rules(tmp_path, cache, monkeypatch):
    store = tmp_path / "s"
    root = SAMPLE
    calls: list[str] = []
    real = judge._judge
    monkeypatch.setattr(judge, "_judge", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    first = judge.judge(Store(root), "grpo-collapse")  # 12 episodes (make sample-events lists them; stored, or computed if the rules changed since)
    assert len(first.events) == 12 and calls == ["grpo-collapse"]
    _forget()
    again = judge.judge(Store(root), "grpo-collapse")  # a new process's view: read, not judged
    assert calls == ["grpo-collapse"]
    pd.testing.assert_frame_equal(again.events, first.events)
    pd.testing.assert_frame_equal(again.recorded, first.recorded)
    assert again.verdict == first.verdict and again.note == first.note and again.computed == first.computed
    base = DetectorConfig()
    other = dataclasses.replace(base, entropy=dataclasses.replace(base.entropy, collapse_frac=0.05))  # other rules
    computed = judge.judge(Store(root), "grpo-collapse", other)
    assert calls == ["grpo-collapse"] * 2 and computed.computed
    _forget()
    assert judge.judge(Store(root), "grpo-collapse", other).events.equals(computed.events) and len(calls) == 2

    _write(store, range(6))
    judge.judge(Store(store), "r")
    assert calls[-1] == "r" and len(calls) == 3
    _forget()
    judge.judge(Store(store), "r")
    assert len(calls) == 3  # kept
    _write(store, range(6, 9), resume=True)  # new segments: a new last step
    _forget()
    j = judge.judge(Store(store), "r")
    assert len(calls) == 4 and j.verdict.last_step == 8
    assert judged.KIND == "judgement" and (manifest.store_dir(store) / "judgement" / "r.json").is_file()


def test_a_settled_runs_row_is_kept_and_a_resumed_one_read_again(tmp_path, cache, monkeypatch):
    from collapsewatch import report
    from collapsewatch.store import queries
    from collapsewatch.store.summaries import RUN_COLUMNS

    def wide(store: Store) -> pd.DataFrame:  # the rows as the store-wide view gives them (what `runs` read before)
        return store.query(f"SELECT {', '.join(RUN_COLUMNS)}, rank FROM runs ORDER BY started_at, run")

    read: list[list[str]] = []
    real = queries.run_rows
    monkeypatch.setattr(queries, "run_rows", lambda s, runs, *a: read.append(sorted(runs)) or real(s, runs, *a))
    root = tmp_path / "s"
    _write(root, range(3))  # run r: steps 0-2, finished
    live = Monitor(root, run="live", rank=0, world_size=1)  # a second run, still running (its heartbeat is fresh)
    live.observe(random_batch(seed=9), step=0)
    live.flush()
    first = report.kept_run_rows(Store(root))
    assert read == [["live", "r"]]  # nothing kept yet: both read from their folders
    pd.testing.assert_frame_equal(first, wide(Store(root)))
    assert dict(zip(first["run"], first["status"], strict=True)) == {"r": "finished", "live": "running"}
    _forget()
    again = report.kept_run_rows(Store(root))  # a new process: r's settled row is kept, the running one read
    assert read == [["live", "r"], ["live"]]
    pd.testing.assert_frame_equal(again, wide(Store(root)))
    # the running run alone (what `runs` reads when every other run's line is kept): its ended_at is NULL, the
    # only value of a zoned timestamp column, and reads as NaT of that zone (not a TypeError)
    only = report.kept_run_rows(Store(root), ["live"])
    pd.testing.assert_frame_equal(only, wide(Store(root)).query("run == 'live'").reset_index(drop=True))
    assert only["ended_at"].isna().all()
    live.close()
    _write(root, range(3, 5), resume=True)  # r resumed and finished again: its run-row file replaced
    _forget()
    third = report.kept_run_rows(Store(root))
    assert read[-1] == ["live", "r"]  # both changed since: read again (live finished, r rewritten)
    pd.testing.assert_frame_equal(third, wide(Store(root)))
    assert third.set_index("run").loc["r", "updated_at"] > first.set_index("run").loc["r", "updated_at"]


def test_a_page_reads_the_judgement_runs_kept(tmp_path, cache, monkeypatch):
    # a run whose stored episodes are another rules' (here: the default rules' episodes, read under `other` rules)
    # is judged on read; `judge` (runs, detect) keeps that judgement between processes, and a page's judgement
    # (keep=True, the dashboard's) reads its episodes instead of running the detectors again: with detect_frame
    # made to fail, it still answers, with the same episodes; without keep it would run them (and fail here)
    from collapsewatch.store import queries

    base = DetectorConfig()
    other = dataclasses.replace(base, entropy=dataclasses.replace(base.entropy, collapse_frac=0.05))
    kept = judge.judge(Store(SAMPLE), "grpo-collapse", other)
    assert kept.computed and len(kept.events)
    _forget()

    def no_detection(*a, **k):
        raise AssertionError("the detectors ran again")

    monkeypatch.setattr(judge, "detect_frame", no_detection)
    s = Store(SAMPLE)
    info = queries.run_info(s, "grpo-collapse")
    rows = queries.step_rows(s, "grpo-collapse", ["reward_mean"], rank=info["rank"])
    page = judge.judgement(s, "grpo-collapse", info, queries.run_events(s, "grpo-collapse"), rows, other, keep=True)
    assert page.computed
    pd.testing.assert_frame_equal(page.events, kept.events)
    assert page.verdict == kept.verdict
    judge.clear()  # (this process's own cache of the episodes, as a new process)
    with pytest.raises(AssertionError, match="detectors ran again"):
        judge.judgement(s, "grpo-collapse", info, queries.run_events(s, "grpo-collapse"), rows, other)


def test_a_judgement_kept_by_other_verdict_code_is_judged_again(tmp_path, cache, monkeypatch):
    # the verdict's code (verdict.py, reward.py, judge.py: its sentences and the columns its notes read) is part of
    # the key, as the rules digest is: a kept judgement from before a verdict change is not read back
    calls: list[str] = []
    real = judge._judge
    monkeypatch.setattr(judge, "_judge", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    judge.judge(Store(SAMPLE), "grpo-collapse")
    _forget()
    judge.judge(Store(SAMPLE), "grpo-collapse")
    assert calls == ["grpo-collapse"]  # kept
    from collapsewatch.verdict_code import verdict_code

    assert verdict_code() == verdict_code() and len(verdict_code()) == 12
    monkeypatch.setattr(judged, "verdict_code", lambda: "other-verdict")  # as after an upgrade that changed it
    _forget()
    judge.judge(Store(SAMPLE), "grpo-collapse")
    assert calls == ["grpo-collapse"] * 2  # judged again
