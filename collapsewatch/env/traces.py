"""Gold Search-R1 traces for the supervised warm start, produced by playing the gold queries in a real env.

A trace is a list of ``Segment``: model text (trained on) alternating with environment observations
(loss mask 0), exactly as the rollout engine assembles a response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collapsewatch.env.kb import Task
from collapsewatch.env.search import Environment


@dataclass(frozen=True)
class Segment:
    """A piece of a response: model-written (``is_model``) or an environment observation."""

    text: str
    is_model: bool


def search_text(query: str) -> str:
    """The model text of a search action (a space after the tag keeps names tokenised as in the question)."""
    return f"<search> {query}</search>"


def answer_text(answer: str) -> str:
    """The model text of an answer action."""
    return f"<answer> {answer}</answer>"


def gold_trace(task: Task, make_env: Callable[[Task], Environment]) -> list[Segment]:
    """Search each gold query in turn, then answer; observations come from a fresh env for ``task``."""
    return _trace(task, make_env, task.answers[0], want_reward=1.0)


def wrong_trace(task: Task, make_env: Callable[[Task], Environment], wrong: str) -> list[Segment]:
    """The gold searches, then the answer ``wrong``: a known-incorrect response (reward 0) that differs from the
    gold trace only where an agent goes wrong at the end (the sentinels' incorrect set)."""
    return _trace(task, make_env, wrong, want_reward=0.0)


def _trace(task: Task, make_env: Callable[[Task], Environment], answer: str, want_reward: float) -> list[Segment]:
    env = make_env(task)
    segments: list[Segment] = []
    for query in task.gold_queries:
        text = search_text(query)
        result = env.step(text)
        segments.append(Segment(text, is_model=True))
        if result.done:  # max_turns too small for this task's chain
            return segments
        segments.append(Segment(result.observation, is_model=False))
    text = answer_text(answer)
    result = env.step(text)
    if result.reward != want_reward:
        raise AssertionError(f"trace of task {task.id} answering {answer!r} earned {result.reward}, not "
                             f"{want_reward}: {segments}")
    segments.append(Segment(text, is_model=True))
    return segments
