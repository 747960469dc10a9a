"""Tool-use collapse, phase ``collapse``: an agent that had learned to call its tool stops calling it.

A search agent trained with GRPO can learn to answer without searching — from its own guesses, or because a cost
per call makes not searching pay — and its reward need not fall at first: the failure shows in ``tool_calls_mean``
(valid tool calls per response; the built-in trainer counts searches, Search-R1 logs
``env/number_of_valid_search``, TRL ``tools/call_frequency``). The rule, on ``tool_calls_mean``:

* level = the median of the last ``smooth_points`` points; peak = the highest level over the history;
* tool use is *established* once the peak is ≥ ``established`` calls per response (a run that never learned the tool
  is not abandoning it), and needs ``min_points`` points;
* flagged when level ≤ ``collapse_frac`` × peak. Proposed critical: the severity gate (:mod:`.severity`) keeps it
  critical only while the reward shows a sustained fall from its best, and lowers it to a warning otherwise — an
  agent that stops searching while its reward holds is a mechanism under way, not yet harm.

The defaults were chosen on the runs that logged a tool-call column when the rule was written (a Search-R1
reproduction's healthy runs dip to 0.4 of their peak and recover; its no-search collapse falls to 0.0 of 1.1);
``collapse_frac`` went from 0.2 to 0.1 in session 54, chosen leave one source out on the public runs (two healthy
agents of two sources held between 0.1 and 0.2 of their peak for a while): docs/detectors.md, "Tool-use collapse".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DetectorConfig, ToolsConfig
from .events import Finding, Verdict
from .history import History
from .registry import fmt as _f
from .registry import num as _num
from .registry import register_detector


def _sentence(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, peak = _num(ev.get("tool_calls_level")), _num(ev.get("tool_calls_peak"))
    if level is None or peak is None:
        return None
    return (f"the agent stopped calling its tool: {level:.2f} calls per response, down from {peak:.2f} "
            f"(bar {_f(ev.get('bar'), '.2f')})")


@register_detector(primary=("tool_calls_mean",), config=ToolsConfig, sentence=_sentence, colour="#26a69a",
                   phase_names={"collapse": "tool-use collapse"},
                   not_applicable="no tool calls logged (tool_calls_mean NULL on every step: not an agent run, or "
                                  "its log has no tool-call column)")
class Tools:
    name = "tools"
    phases = ("collapse",)
    inputs = ("tool_calls_mean",)

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg

    def evaluate(self, h: History, open_phases: frozenset[str]) -> Verdict:
        c = self.cfg.tools
        if h.row.num("tool_calls_mean") is None:
            return {}
        calls = h.series("tool_calls_mean", self.cfg.history_steps)
        if len(calls) < c.min_points:
            return {"collapse": None}
        levels = calls.levels(c.smooth_points)
        level, peak = float(levels[-1]), float(levels.max())
        if peak < c.established:
            return {"collapse": None}
        bar = c.collapse_frac * peak
        if level > bar:
            return {"collapse": None}
        at = int(levels.argmax()) + c.smooth_points - 1  # the point the peak level ends at
        ev = {"tool_calls_level": level, "tool_calls_peak": peak, "peak_step": int(calls.steps[at]), "bar": bar,
              "smooth_points": c.smooth_points}
        return {"collapse": Finding(
            "critical", "tool_calls_mean", level, bar, c.smooth_points,
            f"tool-use collapse: {level:.3g} tool calls per response, ≤ {c.collapse_frac:g} × its peak {peak:.3g}",
            ev)}
