"""collapsewatch/series.py: the severity number, the newest-value-once rule, the docs' table (the trackers' read-back
of a real TRL run: tests/ingest/test_tracker_series.py; verl: tests/integrations/test_verl_series.py)."""

from __future__ import annotations

import math
from pathlib import Path

from collapsewatch.series import (
    COLUMNS,
    SERIES,
    SEVERITY_LEVEL,
    Feed,
    StoreSnapshots,
    after_step,
    markdown_table,
    severity_level,
)

ROOT = Path(__file__).resolve().parents[1]


def test_severity_numbers():
    # none 0 < info 1 < warning 2 < critical 3: the detectors' order (SEVERITY_RANK 0..2) moved up by one
    assert SEVERITY_LEVEL == {"none": 0, "info": 1, "warning": 2, "critical": 3}
    assert severity_level([]) == 0 and severity_level(["info", "critical", "warning"]) == 3


def test_each_value_goes_out_once_and_null_or_nan_never():
    # three finished steps, by hand:
    #   step 1: p05 NULL (on-policy), L = -2.0, zero-std share NaN         severities: none
    #   step 2: p05 0.5, no L (not a sentinel step)                        severities: warning
    #   step 3: p05 NaN, L = -2.5                                          severities: info
    s1 = after_step(None, 1, {"ratio_p05_pos": None, "sentinel_logp_correct_mean": -2.0,
                              "zero_std_group_frac": math.nan}, [])
    s2 = after_step(s1, 2, {"ratio_p05_pos": 0.5}, ["warning"])
    s3 = after_step(s2, 3, {"ratio_p05_pos": math.nan, "sentinel_logp_correct_mean": -2.5}, ["info"])
    feed = Feed()
    # a log call seeing step 1: L, no p05 (NULL), no zero-std share (NaN), severity 0
    assert feed.take(s1) == {"collapsewatch/step": 1.0, "collapsewatch/sentinel_logp_correct_mean": -2.0,
                             "collapsewatch/severity": 0.0}
    assert feed.take(s1) == {}  # S did not move: nothing, not the same values again
    # a log call that missed step 2 and sees step 3: p05 of step 2 (step 3's is NaN), L of step 3, worst so far 2
    assert feed.take(s3) == {"collapsewatch/step": 3.0, "collapsewatch/ratio_p05_pos": 0.5,
                             "collapsewatch/sentinel_logp_correct_mean": -2.5, "collapsewatch/severity": 2.0}
    # detectors off: no severity at all (not 0)
    assert "collapsewatch/severity" not in Feed().take(after_step(None, 1, {"ratio_p05_pos": 0.75}, None))


def test_a_store_no_worker_has_written_yet_gives_nothing(tmp_path):
    # verl's driver reads the store its workers write: before the first flush there is no folder, then no run
    reader = StoreSnapshots(tmp_path / "not-yet", "r")
    assert reader.read() is None and Feed().take(reader.read()) == {}


def test_the_docs_print_the_table():
    # one table, generated from SERIES (python -m collapsewatch.series), in both integration pages
    assert {s.column for s in SERIES} - {None} == set(COLUMNS) and len(SERIES) == len(COLUMNS) + 2
    for page in ("docs/trl.md", "docs/verl.md"):
        assert markdown_table() in (ROOT / page).read_text(), page
