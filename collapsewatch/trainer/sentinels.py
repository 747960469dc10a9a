"""The built-in trainer's sentinel set: held-out questions' gold traces and the same searches with a wrong answer."""

from __future__ import annotations

from collections.abc import Sequence

from ..env.traces import gold_trace, wrong_trace
from ..models.warmstart import encode_trace
from ..sentinels import Sentinel


def trace_sentinels(tokenizer, tasks: Sequence, make_env, n: int) -> list[Sentinel]:
    """The built-in trainer's set: for each of the first ``n`` of ``tasks`` (held-out questions: neither warm start
    nor RL trains on them), its gold trace (correct) and the same searches ending in another task's answer
    (incorrect, ``env.traces.wrong_trace``); 2·n sentinels named ``c:<task id>`` / ``i:<task id>``."""
    tasks = list(tasks)
    if n > len(tasks):
        raise ValueError(f"sentinels: {n} asked, only {len(tasks)} held-out questions")
    out: list[Sentinel] = []
    for j, task in enumerate(tasks[:n]):
        wrong = next(t.answers[0] for t in tasks[j + 1:] + tasks[:j]
                     if t.answers[0].lower() not in {a.lower() for a in task.answers})
        for correct, segments in ((True, gold_trace(task, make_env)), (False, wrong_trace(task, make_env, wrong))):
            ids, mask = encode_trace(tokenizer, task, segments)
            out.append(Sentinel(f"{'c' if correct else 'i'}:{task.id}", tuple(ids), tuple(mask), correct))
    return out
