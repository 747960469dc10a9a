"""The overview's events table rows and the runs table's event summary (dashboard.events_view)."""

from __future__ import annotations

import pandas as pd

from collapsewatch.alerts import event_message
from collapsewatch.dashboard import events_view
from collapsewatch.trust import trust_line

EVENTS = pd.DataFrame([
    dict(detector="isdd", phase="drift", step_start=80, step_end=119, severity="critical", metric="ratio_p50_pos",
         value=0.7, threshold=0.9, window_steps=20, message="A>0 median below 0.9", evidence="{}", source="online"),
    dict(detector="length", phase="blowup", step_start=14, step_end=14, severity="warning", metric="truncated_frac",
         value=0.38, threshold=0.3, window_steps=5, message="length blow-up", evidence="{}", source="online"),
    dict(detector="lld", phase="early_stagnation", step_start=50, step_end=60, severity="info", metric="x",
         value=None, threshold=None, window_steps=30, message="L flat", evidence="{}", source="online"),
])


def test_rows_cause_first_with_links_and_the_shared_sentence():
    rows = events_view.event_rows(EVENTS, "exp1")
    # the reader's order (collapsewatch.verdict.reader_order): critical, then warning, then info — not by start
    assert [r["what"] for r in rows] == ["isdd · drift", "length · blowup", "lld · early_stagnation"]
    assert [r["steps"] for r in rows] == ["80–119", "14", "50–60"]
    isdd = rows[0]
    # charts: the episode ± 10 steps, its band (episode 0 in reader order); tokens: its last step, lowest ratio
    assert isdd["chart"] == "/run/exp1?from=70&to=129&episode=0"
    assert isdd["tokens"] == "/tokens/exp1?step=119&rank=ratio"
    assert rows[1]["tokens"].endswith("rank=repetition") and rows[1]["chart"].startswith("/run/exp1?from=4&")
    assert isdd["sentence"] == event_message(EVENTS.iloc[0].to_dict())  # one home of the wording
    # the benchmark's trust line next to each episode, from the product's data file (collapsewatch.trust)
    assert [r["trust"] for r in rows] == [trust_line("isdd", "drift", "critical"),
                                          trust_line("length", "blowup", "warning"),
                                          trust_line("lld", "early_stagnation", "info")]


def test_severity_summary_and_first_critical_step():
    assert events_view.severity_counts(EVENTS) == {"critical": 1, "warning": 1, "info": 1}
    assert events_view.run_event_summary(EVENTS) == {"worst_severity": "critical", "first_critical_step": 80,
                                                     "n_critical": 1, "n_warning": 1, "n_info": 1}
    calm = EVENTS[EVENTS["severity"] != "critical"]
    assert events_view.worst_severity(calm) == "warning" and events_view.first_critical_step(calm) is None
    assert events_view.first_event_step(EVENTS) == 14
    assert events_view.run_event_summary(EVENTS.iloc[0:0])["worst_severity"] is None


def test_the_run_page_shows_the_trust_line_under_each_episode_sentence(synth_store):
    from collapsewatch.dashboard import create_app

    create_app(synth_store)  # the pages register with an app
    from collapsewatch.dashboard.pages.overview import events_table

    rows = events_view.event_rows(EVENTS, "exp1")
    page = str(events_table(rows))
    # one line per episode, in the sentence's cell (no new page, no new column)
    assert all(page.count(r["trust"]) >= 1 for r in rows) and page.count("ev-trust") == len(rows)
