"""collapsewatch.collapse_news: a reward collapse read once per collapse step, off the caller's thread; a reading that
fails is a log line, never an exception in the training process."""

from __future__ import annotations

import logging

from collapsewatch.collapse_news import CollapseNews

REWARD = [0.8] * 30 + [0.0] * 20
"""Steps 0–49: collapsed at step 34 by the verdict's rule once step 44 is in (tests/test_watch.py derives it)."""


def test_one_reading_per_collapse_step_and_each_said_once():
    reads = []
    verdict = {"run": "r", "status": "collapsed", "collapse_step": 34}
    news = CollapseNews(lambda: reads.append(1) or verdict)
    for step, r in enumerate(REWARD[:44]):  # through step 43: 9 levels after the fall, too few to tell
        news.add(step, r)
        news.check()
    news.wait()
    assert reads == [] and news.take() == []
    news.add(44, 0.0)
    news.add(45, None)  # not a point: no reward logged at that step
    news.add(46, float("nan"))
    news.check()
    news.wait()
    news.check()  # the same collapse step again: no second reading
    news.wait()
    assert reads == [1] and news.take() == [verdict] and news.take() == []
    assert news.say(verdict) and not news.say(dict(verdict))  # once per collapse step
    assert news.say(dict(verdict, collapse_step=90))  # another collapse of the run is news
    assert not news.say({"run": "r", "status": "warning", "collapse_step": None})


def test_a_verdict_that_says_no_collapse_is_not_queued():
    news = CollapseNews(lambda: {"run": "r", "status": "warning", "collapse_step": None})
    for step, r in enumerate(REWARD):
        news.add(step, r)
    news.check()
    news.wait()
    assert news.take() == []


def test_a_failed_reading_is_one_log_line(caplog):
    def read():
        raise OSError("store gone")

    news = CollapseNews(read)
    for step, r in enumerate(REWARD):
        news.add(step, r)
    with caplog.at_level(logging.WARNING, logger="collapsewatch"):
        news.check()
        news.wait()
    assert news.take() == []
    assert [r.getMessage() for r in caplog.records] == [
        "collapsewatch: the run's verdict could not be read for its reward collapse: store gone"]


def test_a_resumed_run_goes_on_from_its_stored_series_and_does_not_say_its_old_collapse_again():
    reads = []
    old = {"run": "r", "status": "collapsed", "collapse_step": 34}
    # stored: REWARD's steps 0–49, collapsed at 34 — the earlier process's news: no reading, and said already
    news = CollapseNews(lambda: reads.append(1) or old, (list(range(50)), REWARD))
    news.check()
    news.wait()
    assert reads == [] and not news.say(old)
    # replayed from step 20 (a checkpoint before the fall): 0.8 from 20 to 59, then 0 — the stored points from 20 on
    # are replaced, so the series is 0.8 at 0–59, 0 at 60–79: the level is (0.8 + 0) / 2 = 0.4 ≤ 0.4 at 64 and 0
    # after; with 10 levels after it (step 74) it is a new collapse at 64 — read, and news
    new = {"run": "r", "status": "collapsed", "collapse_step": 64}
    news = CollapseNews(lambda: reads.append(1) or new, (list(range(50)), REWARD))
    for step in range(20, 80):
        news.add(step, 0.8 if step < 60 else 0.0)
    news.check()
    news.wait()
    assert reads == [1] and news.take() == [new] and news.say(new)
    # a stored series without a collapse: nothing said already
    assert CollapseNews(lambda: old, ([0, 1, 2], [0.5, None, 0.5])).say(old)
