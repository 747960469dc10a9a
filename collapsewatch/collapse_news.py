"""A reward collapse said while a Monitor's run trains, not only at its end (``Monitor(sinks=…)``).

The recorder thread adds each finished step's reward (:meth:`CollapseNews.add`) and, after each flush, asks whether
that series holds a collapse by the verdict's own rule (:func:`collapsewatch.reward.reward_collapse`: the level fell
to half its best, net of noise, and stayed down 10 points) at a step not looked at yet (:meth:`CollapseNews.check`).
Only then is the run's verdict read from the store — what every reader shows; the flush has written the rows — on a
short-lived thread of its own, so neither the training thread nor the recorder waits for it; a verdict that says
``collapsed`` is queued. The training thread takes the queue when it hands episodes to the sinks
(:meth:`CollapseNews.take`) and sends each collapse step once (:meth:`CollapseNews.say`); ``close`` waits for a
reading in flight, and the final verdict's collapse goes through the same once. A reading that fails is a log line: the run trains on.

A resumed run (``Monitor(resume=True)``) goes on from the reward series already stored: the series starts from it,
the collapse it holds was the earlier process's news (said then, at the latest with its final verdict) and is not
said again, and a replayed step (a restart from a checkpoint before the last stored step) replaces the stored
points from it on, as the store's rows are.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .reward import reward_collapse

log = logging.getLogger("collapsewatch")


class CollapseNews:
    """One run's reward series as the recorder finished it, and the collapses read and said so far."""

    def __init__(self, read_verdict: Callable[[], dict[str, Any]],
                 stored: tuple[Sequence[int], Sequence[Any]] = ((), ())) -> None:
        """``read_verdict``: the run's verdict object as the store has it now (``sinks.run_verdict``); ``stored``:
        the (steps, ``reward_mean``) a resumed run already has in the store, in step order (module docstring)."""
        self._read_verdict = read_verdict
        self._steps: list[int] = []
        self._rewards: list[float] = []
        self._looked: set[int] = set()  # collapse steps the in-memory rule found and a reading was started for
        self._said: set[Any] = set()
        try:
            for step, reward in zip(*stored, strict=True):
                self.add(step, reward)
            before = self._collapse()
        except Exception:  # the stored series is a courtesy: without it, a collapse may be said twice
            log.exception("collapsewatch: a resumed run's stored rewards could not be read; training continues")
            self._steps, self._rewards, before = [], [], None
        if before is not None:  # the earlier process's news
            self._looked.add(before)
            self._said.add(before)
        self._lock = threading.Lock()
        self._out: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def add(self, step: int, reward: Any) -> None:
        """A finished step's ``reward_mean`` (None or not finite: not a point of the series). Recorder thread."""
        while self._steps and self._steps[-1] >= step:  # a replayed step replaces the points from it on
            self._steps.pop()
            self._rewards.pop()
        if isinstance(reward, (int, float)) and math.isfinite(reward):
            self._steps.append(int(step))
            self._rewards.append(float(reward))

    def check(self) -> None:
        """After a flush: start reading the verdict when the series holds a collapse not looked at yet (one reading
        at a time). Recorder thread; never raises."""
        try:
            if self._thread is not None and self._thread.is_alive():
                return
            step = self._collapse()
            if step is None or step in self._looked:
                return
            self._looked.add(step)
            self._thread = threading.Thread(target=self._read, name="collapsewatch-verdict", daemon=True)
            self._thread.start()
        except Exception:
            log.exception("collapsewatch: the reward collapse check failed; training continues")

    def _collapse(self) -> int | None:
        return reward_collapse(np.asarray(self._steps), np.asarray(self._rewards, dtype="float64"))

    def _read(self) -> None:
        try:
            verdict = self._read_verdict()
        except Exception as exc:  # the verdict at close is still tried
            log.warning("collapsewatch: the run's verdict could not be read for its reward collapse: %s", exc)
            return
        if verdict.get("status") == "collapsed":
            self._out.put(verdict)

    def take(self) -> list[dict[str, Any]]:
        """The collapsed verdicts read since the last call. Training thread."""
        out = []
        while True:
            try:
                out.append(self._out.get_nowait())
            except queue.Empty:
                return out

    def say(self, verdict: dict[str, Any]) -> bool:
        """Whether ``verdict`` is a collapse not said yet (and now counted said): once per collapse step."""
        key = verdict.get("collapse_step")
        with self._lock:
            if verdict.get("status") != "collapsed" or key in self._said:
                return False
            self._said.add(key)
            return True

    def wait(self, timeout: float = 60.0) -> None:
        """Let a reading in flight finish (``close``: its verdict is then taken and said before the final one)."""
        if self._thread is not None:
            self._thread.join(timeout)
