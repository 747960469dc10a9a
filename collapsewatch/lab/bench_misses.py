"""Why a collapse was not flagged at or before it: one reason per collapsed run the bench did not flag, counted per
row — what a rule could still reach, told apart from what no rule on that log could.

For a collapsed run with no counting flag at or before its collapse E (:mod:`.bench`: specific, not alike), the
first that applies:

* ``alike`` — an alarm rang ≤ E whose class counts on the other sources' healthy runs but fires on more than
  ``SPECIFIC_MAX`` of its own source's (:func:`.bench.counts`): that setup's quirk, not evidence of the collapse;
* ``not specific`` — an alarm rang ≤ E, but no class it stood at by E counts on the healthy runs the row judges
  by (pooled: every source's; held out: the other sources');
* ``blind`` — nothing rang ≤ E and the log holds none of :func:`collapsewatch.verdict.signal_columns`: no column
  that shows a collapse coming before the reward falls;
* ``late`` — nothing rang ≤ E; an alarm rang after it;
* ``silent`` — no alarm at all, though the log has a signal column.

A run that is flagged, or not collapsed (healthy, other, untrusted), has none. What a rule saw comes first: a
reward-only log whose evaluation fall warned by E, on a class too common on healthy runs, is "not specific", not
"blind". ``alike``, ``not specific`` and ``late`` are misses of today's rules on what the log shows; ``blind`` is a
miss of the log; ``silent`` needs a rule that reads the columns the log has.
"""

from __future__ import annotations

import pandas as pd

from ..trust import MISS_REASONS as MISSES  # the reasons, in the order they are tried (the product shows them)
from ..trust import miss_field as column
from ..trust import why_missed


def miss(collapse: int | None, first_counting: int | None, first_elsewhere: int | None, first_alarm: int | None,
         blind: bool) -> str | None:
    """The reason (module doc) a run collapsing at ``collapse`` was not flagged: ``first_counting`` — the step the
    first counting flag rang; ``first_elsewhere`` — the same without the own-source (alike) test; ``first_alarm`` —
    the step any alarm first stood at warning; ``blind`` — the log holds no signal column. None: flagged, or no
    collapse."""
    if collapse is None or (first_counting is not None and first_counting <= collapse):
        return None
    if first_alarm is not None and first_alarm <= collapse:
        return "alike" if first_elsewhere is not None and first_elsewhere <= collapse else "not specific"
    if blind:
        return "blind"
    return "late" if first_alarm is not None else "silent"


def miss_counts(collapsed: pd.DataFrame) -> dict[str, int]:
    """Per reason and judgement, how many of ``collapsed`` (run records) were missed for it."""
    return {column(m, how): int((collapsed[f"miss_{how}"] == m).sum()) if f"miss_{how}" in collapsed else 0
            for how in ("pooled", "held") for m in MISSES}


def miss_lines(table: pd.DataFrame, groups: set[str]) -> list[str]:
    """One line per group row of the bench table: its held-out misses by reason (reasons with none left out)."""
    out = []
    for r in table[table["source"].isin(groups)].to_dict("records"):
        out.append(f"  {r['source']}: {r['collapsed'] - r['flagged_held']} of {r['collapsed']} — {why_missed(r)}")
    return out
