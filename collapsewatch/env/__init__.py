"""Search-agent environment (Search-R1 protocol) over a synthetic, seeded knowledge base.

``build_kb`` makes the world, ``BM25Retriever`` indexes its passages, ``SearchEnv`` plays one episode,
``gold_trace`` produces the supervised warm-start traces.
"""

from collapsewatch.env.kb import KBConfig, KnowledgeBase, Passage, Task, build_kb
from collapsewatch.env.retriever import BM25Retriever, Retriever
from collapsewatch.env.search import (
    INSTRUCTION,
    INVALID_ACTION_MESSAGE,
    STOP_STRINGS,
    TAGS,
    Action,
    EnvConfig,
    Environment,
    SearchEnv,
    StepResult,
    exact_match,
    format_observation,
    make_env_factory,
    normalize_answer,
    parse_action,
    task_messages,
)
from collapsewatch.env.traces import Segment, answer_text, gold_trace, search_text

__all__ = [
    "INSTRUCTION",
    "INVALID_ACTION_MESSAGE",
    "STOP_STRINGS",
    "TAGS",
    "Action",
    "BM25Retriever",
    "EnvConfig",
    "Environment",
    "KBConfig",
    "KnowledgeBase",
    "Passage",
    "Retriever",
    "SearchEnv",
    "Segment",
    "StepResult",
    "Task",
    "answer_text",
    "build_kb",
    "exact_match",
    "format_observation",
    "gold_trace",
    "make_env_factory",
    "normalize_answer",
    "parse_action",
    "search_text",
    "task_messages",
]
