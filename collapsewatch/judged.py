"""A run's judgement kept between processes (``store.manifest``), so that ``runs``, the runs page and ``detect`` of a
finished run read it instead of judging the run again in every process (issue 32).

Keyed by the rules' digest, the verdict code's (:mod:`.verdict_code`), the rank asked for and the run's segment
files (name and size of each run-row, step, scalar and event segment, relative to the store): segments are immutable
with unique names, so the key changes exactly when a flush adds rows (a new last step), compaction rewrites them or
another rank appears, and a changed rule set or verdict is another digest. Values are the ``Judgement``'s fields as JSON, frames with their column types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .store.manifest import load_record, save_record
from .verdict import Verdict
from .verdict_code import verdict_code


@dataclass(frozen=True)
class Judgement:
    """A run's episodes under the reader's rules and its verdict (built by :mod:`collapsewatch.judge`, kept between
    processes here)."""

    run: str
    events: pd.DataFrame
    """The episodes of the reader's rules (``detectors.events.EVENT_COLUMNS``), in order of start."""
    recorded: pd.DataFrame
    """The episodes as stored."""
    computed: bool
    """True when ``events`` were computed on read (the stored ones came from other rules)."""
    note: str
    """'' or one sentence saying why the stored episodes are not shown."""
    rules: str
    verdict: Verdict


@dataclass(frozen=True)
class Summary:
    """What a table of runs shows of a run's judgement: its verdict, how many episodes, whether they were computed
    on read."""

    verdict: Verdict
    n_events: int
    computed: bool

    @classmethod
    def of(cls, j: Judgement) -> Summary:
        return cls(j.verdict, len(j.events), j.computed)


KIND = "judgement"
LAYOUT = 3  # of the values (2: NaN of a text column is NULL; 3: the verdict's ``blind``): a judgement kept in another layout is judged again


def key(root: Path, rank: int | None, rules: str | None, files: tuple) -> list:
    """The JSON key of a judgement (of anything derived from a run's ``files`` alone: ``rules`` None): ``files`` as
    ``judge.key_files`` lists them (per table, (path, size)), with the verdict code (``verdict_code``)."""
    prefix = str(root).rstrip("/") + "/"
    return [LAYOUT, verdict_code(), rank, rules,
            [[[p[len(prefix):] if p.startswith(prefix) else p, n] for p, n in t] for t in files]]


def plain(v: Any, nan: Any = "NaN") -> Any:
    """``v`` as a JSON value: numpy scalars as Python's, NULLs as None, NaN as ``nan`` (JSON has none; "NaN" in a
    frame's float column is turned back by the column's type)."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return nan
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    return v


def typed(v: Any) -> Any:
    """``v`` as a JSON value that :func:`untyped` turns back into an equal value of the same type: numpy scalars as
    Python's, a Timestamp with its zone and unit, NaT and NaN as markers (None stays None)."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is pd.NaT:
        return {"nat": 1}
    if isinstance(v, pd.Timestamp):
        return {"ts": v.isoformat(), "tz": None if v.tz is None else str(v.tz), "unit": v.unit}
    if isinstance(v, float) and math.isnan(v):
        return {"nan": 1}
    return v


def untyped(v: Any) -> Any:
    if isinstance(v, dict):
        if "ts" in v:
            ts = pd.Timestamp(v["ts"])
            return (ts.tz_convert(v["tz"]) if v["tz"] is not None else ts).as_unit(v["unit"])
        if "nat" in v:
            return pd.NaT
        if "nan" in v:
            return float("nan")
    return v


def frame_out(df: pd.DataFrame) -> dict[str, Any]:
    # NaN is "NaN" in a numeric column (turned back by its type), a NULL (None) in any other
    nan = ["NaN" if pd.api.types.is_numeric_dtype(t) else None for t in df.dtypes]
    return {"columns": [str(c) for c in df.columns], "dtypes": [str(t) for t in df.dtypes],
            "rows": [[plain(v, n) for v, n in zip(row, nan, strict=True)] for row in df.itertuples(index=False)]}


def frame_in(d: dict[str, Any]) -> pd.DataFrame:
    """The frame ``frame_out`` wrote, column by column with its type (one array each: a run's judgement is read on
    every ``runs``, so this stays a fraction of a millisecond, not a pandas cast per cell)."""
    columns = d["columns"]
    cells = list(zip(*d["rows"], strict=True)) if d["rows"] else [()] * len(columns)
    data = {}
    for col, dtype, values in zip(columns, d["dtypes"], cells, strict=True):
        if dtype.startswith(("float", "int", "bool")):
            data[col] = np.array([float("nan") if v == "NaN" else v for v in values], dtype=dtype)
        elif dtype.startswith("datetime"):  # (every value NULL reads as naive: a zoned type is applied as a zone)
            tz = getattr(pd.api.types.pandas_dtype(dtype), "tz", None)
            parsed = pd.to_datetime(pd.Series(values, dtype=object), utc=tz is not None)
            data[col] = (parsed.dt.tz_convert(tz) if tz is not None else parsed).astype(dtype)
        else:
            data[col] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data, columns=columns)


def load(root: Path, run: str, k: list) -> Judgement | None:
    """The judgement saved for ``run`` under key ``k``; None when there is none, or it was of other files or rules."""
    v = load_record(root, KIND, run, k)
    if not isinstance(v, dict):
        return None
    try:
        return Judgement(run, frame_in(v["events"]), frame_in(v["recorded"]), bool(v["computed"]), v["note"],
                         v["rules"], Verdict(**v["verdict"]))
    except (KeyError, TypeError, ValueError):  # an older layout: judged again
        return None


def load_summary(root: Path, run: str, k: list) -> Summary | None:
    """``load``'s summary, without building the judgement's frames (what ``runs`` reads of every run: building two
    frames per run was most of a warm ``runs`` on a 1,000-run store)."""
    v = load_record(root, KIND, run, k)
    if not isinstance(v, dict):
        return None
    try:
        return Summary(Verdict(**v["verdict"]), len(v["events"]["rows"]), bool(v["computed"]))
    except (KeyError, TypeError, ValueError):  # an older layout: judged again
        return None


STATS = "run-stats"
STATS_LAYOUT = 2  # of what the statistics count (2: a step a run only logged scalars at, store.summaries)


def load_stats(root: Path, run: str, k: list) -> dict[str, Any] | None:
    """A run's step statistics (``store.summaries.STEP_STATS``) kept under key ``k`` (``key`` with ``rules`` None)."""
    v = load_record(root, STATS, run, [STATS_LAYOUT, k])
    return v if isinstance(v, dict) else None


def save_stats(root: Path, run: str, k: list, stats: dict[str, Any]) -> None:
    save_record(root, STATS, run, [STATS_LAYOUT, k], {c: plain(v, None) for c, v in stats.items()})


def save(root: Path, run: str, k: list, j: Judgement) -> None:
    save_record(root, KIND, run, k, {"events": frame_out(j.events), "recorded": frame_out(j.recorded),
                                     "computed": j.computed, "note": j.note, "rules": j.rules,
                                     "verdict": {f: plain(x) for f, x in j.verdict.as_dict().items()}})
