"""`lab loso`: choose among detector settings leave one source out, and score each source under the setting chosen
without it.

A fixed split (``lab/public/tuned_on.csv``) judges a rule on the sources it was not designed on, but tunes on a
fifth of the corpus. Leave-one-source-out uses the whole corpus and still never scores a source under a choice it
took part in: given the per-run records of ``lab bench --json --runs`` under each candidate setting (the first one
the default),

* **per fold** (every source S): the setting with the highest :func:`objective` on the runs of every other source
  is chosen; a setting that puts more criticals on those sources' healthy runs than the default does is not
  eligible; ties go to the earlier setting (the default first);
* S's records are taken from the bench of the setting chosen without it, and the bench's own figures
  (:func:`.bench.summarise`) are computed over those records: the **LOSO** row, beside each setting's own rows.

**Objective** J = the share of collapsed runs with any alarm (warning or critical) dated at or before the collapse −
the share of healthy runs with any alarm (Youden's J, runs weighted alike). It reads no specificity: the bench's
"flagged" counts a flag only where it is specific on *other* sources, which would let the left-out source's healthy
runs decide, through its neighbours' figures, which setting it is scored under.

The choice on every source (no source left out) is the setting to ship; the LOSO figures are how it did where it
was not chosen. Definitions of the bench's fields: :mod:`.bench`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .bench import group_sources, summarise


def objective(recs: pd.DataFrame) -> float:
    """Youden's J of "any alarm by the collapse" over the collapsed and healthy runs of ``recs`` (others ignored).

    Derived: 3 collapsed runs (2 alarmed at or before E), 4 healthy (1 alarmed) → 2/3 − 1/4 = 5/12."""
    col = recs[recs["status"] == "collapsed"]
    healthy = recs[recs["status"] == "healthy"]
    caught = sum(pd.notna(f) and f <= e for f, e in zip(col["first_alarm"], col["collapse"], strict=True))
    alarmed = int((healthy["alarms"] > 0).sum())
    return (caught / len(col) if len(col) else 0.0) - (alarmed / len(healthy) if len(healthy) else 0.0)


def _criticals(recs: pd.DataFrame) -> int:
    return int(recs.loc[recs["status"] == "healthy", "critical"].astype(bool).sum())


def choose(benches: dict[str, pd.DataFrame], leave_out: str | None = None) -> str:
    """The setting with the highest :func:`objective` on every source but ``leave_out`` (None: all sources);
    not more healthy criticals there than the first (the default) setting; ties → the earlier setting."""
    names = list(benches)
    train = {n: b[b["source"] != leave_out] for n, b in benches.items()}
    limit = _criticals(train[names[0]])
    best, best_j = names[0], objective(train[names[0]])
    for n in names[1:]:
        j = objective(train[n])
        if _criticals(train[n]) <= limit and j > best_j + 1e-12:
            best, best_j = n, j
    return best


def loso(benches: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict[str, str]]:
    """(each source's records under the setting chosen without it, {source: that setting})."""
    first = next(iter(benches.values()))
    _check(benches)
    chosen = {s: choose(benches, s) for s in sorted(set(first["source"]))}
    recs = pd.concat([benches[n][benches[n]["source"] == s] for s, n in chosen.items()], ignore_index=True)
    return recs, chosen


def _check(benches: dict[str, pd.DataFrame]) -> None:
    """Every bench must hold the same runs with the same labels: a setting scored on other runs is no candidate."""
    names = list(benches)
    if len(names) < 2:
        raise ValueError(f"lab loso needs at least 2 benches (a default and a candidate), got {len(names)}")
    ref = benches[names[0]].set_index("run")[["source", "status", "collapse"]].sort_index()
    for n in names[1:]:
        other = benches[n].set_index("run")[["source", "status", "collapse"]].sort_index()
        if not ref.index.equals(other.index) or not ref.fillna(-1).equals(other.fillna(-1)):
            diff = sorted(set(ref.index) ^ set(other.index))[:5]
            raise ValueError(f"bench {n!r} does not hold the same runs and labels as {names[0]!r}"
                             + (f" (e.g. {', '.join(diff)})" if diff else " (a label differs)"))


def loso_table(benches: dict[str, pd.DataFrame], tuned_on: list[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """Per group of :func:`.bench.group_sources`: each setting's own figures, then the LOSO row; and the choice —
    per source, counted per setting, and on all sources."""
    recs, chosen = loso(benches)
    rows = []
    for group, members in group_sources(recs, tuned_on).items():
        for name, b in [*benches.items(), ("LOSO", recs)]:
            rows.append({"group": group, **summarise(b[b["source"].isin(members)], name)})
    folds = {n: sum(c == n for c in chosen.values()) for n in benches}
    return pd.DataFrame(rows), {"all_sources": choose(benches), "folds": folds, "per_source": chosen}


def read_bench(path: Path) -> tuple[pd.DataFrame, dict]:
    """The per-run records and split of one ``lab bench --json --runs`` file; a file that is not one is refused."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise ValueError(f"{path}: not the output of `collapsewatch lab bench --json --runs` (no 'runs' list)")
    recs = pd.DataFrame(data["runs"])
    need = {"run", "source", "status", "collapse", "first_alarm", "alarms", "critical", "steps"}
    if need - set(recs.columns):
        raise ValueError(f"{path}: its runs lack {', '.join(sorted(need - set(recs.columns)))}")
    return recs, data.get("split") or {}
