"""Search-agent environment following the Search-R1 protocol (arXiv 2503.09516).

One episode per task. Each model turn ends at ``</search>`` or ``</answer>`` (or at the rollout engine's
per-turn token cap). ``SearchEnv.step(turn_text)`` then:

* ``<search>q</search>``  -> observation ``\\n<information>Doc 1: …\\nDoc 2: …</information>\\n`` (top-k),
* ``<answer>a</answer>``  -> episode ends, reward = exact match of normalised ``a`` against the gold answers,
* anything else           -> Search-R1's corrective observation; the action counts as invalid.

After ``max_turns`` actions without an answer the episode ends with reward 0.
Deviation from Search-R1: no ``<think>`` block is required (it is allowed and ignored), so traces of a tiny
model stay short; the first complete ``<search>``/``<answer>`` tag in the turn is the action, as in
Search-R1's ``postprocess_predictions``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from collapsewatch.env.kb import KnowledgeBase, Task
from collapsewatch.env.retriever import BM25Retriever, Retriever

# Verbatim from Search-R1 (search_r1/llm_agent/generation.py, execute_predictions).
INVALID_ACTION_MESSAGE = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)
# Short on purpose: every prompt token is paid for in every rollout and every forward of a CPU run.
INSTRUCTION = "Search with <search> query </search>. Answer with <answer> answer </answer>."
STOP_STRINGS: tuple[str, ...] = ("</search>", "</answer>")
TAGS: tuple[str, ...] = ("<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>")

_ACTION_RE = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles a/an/the, collapse whitespace."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(a) for a in answers) else 0.0


@dataclass(frozen=True)
class Action:
    """A parsed model turn. ``kind`` is "search", "answer" or "invalid"; ``content`` is stripped."""

    kind: str
    content: str = ""


def parse_action(text: str) -> Action:
    """First complete ``<search>…</search>`` or ``<answer>…</answer>`` in ``text``.

    An empty search query is invalid (nothing to retrieve); an empty answer is a (wrong) answer.
    """
    match = _ACTION_RE.search(text)
    if match is None:
        return Action("invalid")
    kind, content = match.group(1), match.group(2).strip()
    if kind == "search" and not content:
        return Action("invalid")
    return Action(kind, content)


def format_observation(passages: Sequence[str]) -> str:
    """The text appended after a search turn (tokenised by the rollout engine with loss mask 0)."""
    body = "\n".join(f"Doc {i + 1}: {p}" for i, p in enumerate(passages)) if passages else "No results."
    return f"\n<information>{body}</information>\n"


def task_messages(task: Task) -> list[dict[str, str]]:
    """Chat messages of the prompt for ``task`` (render with the tokenizer's chat template)."""
    return [{"role": "user", "content": f"{INSTRUCTION}\nQuestion: {task.question}"}]


@dataclass(frozen=True)
class EnvConfig:
    """Episode limits and retrieval width."""

    top_k: int = 3
    """Passages returned per search."""
    max_turns: int = 4
    """Model actions (search, answer or invalid) before the episode is cut off with reward 0."""

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.max_turns < 1:
            raise ValueError(f"EnvConfig needs top_k >= 1 and max_turns >= 1, got {self}")


@dataclass(frozen=True)
class StepResult:
    """What the environment answers to one model turn."""

    observation: str
    """Text to append after the model turn ("" when the episode is done)."""
    done: bool
    valid_action: bool
    is_search: bool
    reward: float = 0.0
    """Episode reward, non-zero only on the step that ends the episode."""


class Environment(Protocol):
    """A multi-turn text environment: one instance per episode."""

    task: Task

    def step(self, text: str) -> StepResult: ...

    @property
    def reward(self) -> float: ...


class SearchEnv:
    """One Search-R1 episode over ``task``; counts turns, searches and invalid actions."""

    def __init__(self, task: Task, retriever: Retriever, config: EnvConfig | None = None) -> None:
        self.task = task
        self.retriever = retriever
        self.config = config or EnvConfig()
        self.n_turns = 0
        self.n_searches = 0
        self.n_invalid = 0
        self.done = False
        self._reward = 0.0

    @property
    def reward(self) -> float:
        return self._reward

    def step(self, text: str) -> StepResult:
        """Consume one model turn; raise if the episode is already over."""
        if self.done:
            raise RuntimeError(f"SearchEnv.step called after the episode of task {self.task.id} ended")
        self.n_turns += 1
        action = parse_action(text)
        if action.kind == "answer":
            self.done = True
            self._reward = exact_match(action.content, self.task.answers)
            return StepResult("", done=True, valid_action=True, is_search=False, reward=self._reward)
        out_of_turns = self.n_turns >= self.config.max_turns
        if action.kind == "search":
            self.n_searches += 1
            if out_of_turns:  # no turn left to use the results
                self.done = True
                return StepResult("", done=True, valid_action=True, is_search=True)
            obs = format_observation(self.retriever.search(action.content, self.config.top_k))
            return StepResult(obs, done=False, valid_action=True, is_search=True)
        self.n_invalid += 1
        self.done = out_of_turns
        obs = "" if out_of_turns else INVALID_ACTION_MESSAGE
        return StepResult(obs, done=out_of_turns, valid_action=False, is_search=False)


def make_env_factory(kb: KnowledgeBase, config: EnvConfig | None = None) -> Callable[[Task], SearchEnv]:
    """A factory ``task -> SearchEnv`` sharing one BM25 index over ``kb``'s passages."""
    retriever = BM25Retriever([p.text for p in kb.passages])
    config = config or EnvConfig()
    return lambda task: SearchEnv(task, retriever, config)
