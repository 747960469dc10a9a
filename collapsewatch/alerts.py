"""Alerts: one detector event → one sentence with its evidence, and the JSON POST of an event.

    event_message(event) -> str       # "median ratio of A>0 tokens fell from 0.98 to 0.71 over 40 steps …"
    event_payload(event) -> dict      # JSON-safe: the events row, evidence parsed, plus "text"
    post_event(url, event, timeout)   # POST event_payload as JSON; returns the HTTP status

``event`` is anything shaped like a row of the store's ``events`` view: a mapping (a DataFrame record, a
dict) whose ``evidence`` is a JSON string or a mapping, or a :class:`collapsewatch.detectors.Event`. The
sentence is built from the evidence keys the detectors in :mod:`collapsewatch.detectors` write; an event
whose evidence lacks them (an older store, a user's own events) falls back to the event's stored
``message``. This module is the one home of the wording: the dashboard's events table, ``collapsewatch
watch`` and the trainer's ``notify`` action all call it.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from .detectors.events import EPISODE_FIELDS

EVENT_FIELDS = ("run", "rank", "source", "rules", *(c for c in EPISODE_FIELDS if c != "evidence"))


class NotifyError(OSError):
    """A notify POST that did not reach its receiver or was refused (the URL is in the message)."""


def _row(event: Any) -> dict[str, Any]:
    """The event as a plain dict with ``evidence`` parsed into a dict."""
    if hasattr(event, "as_row") and not isinstance(event, Mapping):
        row = dict(event.as_row())
    elif isinstance(event, Mapping):
        row = dict(event)
    else:
        raise TypeError(f"event must be a mapping (an events row) or an Event, got {type(event).__name__}")
    ev = row.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev) if ev else {}
        except json.JSONDecodeError:
            ev = {}
    row["evidence"] = dict(ev) if isinstance(ev, Mapping) else {}
    return row


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(x: Any) -> int | None:
    v = _num(x)
    return int(v) if v is not None else None


def _f(x: Any, spec: str = ".2f") -> str:
    v = _num(x)
    return "NULL" if v is None else format(v, spec)


def _isdd(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, peak = _num(ev.get("ratio_p50_pos_level")), _num(ev.get("ratio_p50_pos_peak"))
    rules = ev.get("rules") or []
    parts = []
    if level is not None and ("ratio_p50_pos" in rules or (peak is not None and peak - level >= 0.05)):
        at = ev.get("ratio_p50_pos_peak_step")
        over = f" over {now - at} steps" if isinstance(now, int) and isinstance(at, int) else ""
        parts.append(f"median ratio of A>0 tokens fell from {_f(peak)} to {_f(level)}{over}" if peak is not None
                     else f"median ratio of A>0 tokens is {_f(level)}")
    if "ratio_p05_pos" in rules:
        parts.append(f"its p05 is {_f(ev.get('ratio_p05_pos_level'), '.3g')}")
    if "ratio_lt_0_1_frac_pos" in rules:
        parts.append(f"{_f(ev.get('ratio_lt_0_1_frac_pos_level'), '.1%')} of A>0 tokens have r < 0.1")
    if not parts:
        return None
    text = ", ".join(parts) + f" while clip_low stayed {_f(ev.get('clip_low_frac'))}"
    conf = [c.replace("_", " ") for c in ev.get("confirmations") or []]
    if len(conf) > 1:
        return text + f"; confirmed by {' and '.join(conf)}"
    return text + (f"; confirmation at this step: {conf[0]}" if conf else "")


def _lld(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    trend = ev.get("L_trend") or {}
    change, level = _num(ev.get("L_change_over_window")), _num(ev.get("L_level"))
    if phase == "early_stagnation":
        st, rt = ev.get("L_trend_stagnation") or {}, ev.get("reward_trend") or {}
        if not st or not rt:
            return None
        return (f"likelihood of correct responses stayed flat at {_f(level)} nats/token "
                f"({_f(st.get('slope'), '+.2g')}/step) while the reward rose {_f(rt.get('slope'), '+.2g')}/step")
    if change is None or not trend:
        return None
    text = (f"likelihood of correct responses fell by {_f(-change, '.3f')} nats/token over {trend.get('n')} "
            f"points (now {_f(level)})")
    if ev.get("I_falling"):
        text += ", incorrect responses falling too"
    if phase == "accelerated_collapse":
        what = [w for w, hit in (("accelerating", ev.get("acceleration")), ("a cliff", ev.get("cliff"))) if hit]
        what += [s.replace("_", " ") for s in ev.get("signals") or []]
        if what:
            text += f", with {', '.join(what)}"
    return text


def _entropy(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, peak, median = (_num(ev.get(k)) for k in ("entropy_level", "entropy_peak", "entropy_median"))
    if level is None:
        return None
    if phase == "collapse" and peak:
        return f"entropy fell to {level:.3g} nats, {level / peak:.0%} of its peak {peak:.3g}"
    if phase == "blowup" and median:
        return f"entropy rose to {level:.3g} nats, {level / median:.1f}× its median {median:.3g}"
    return None


def _grad(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    g, med, n = _num(ev.get("grad_norm")), _num(ev.get("reference_median")), ev.get("reference_points")
    if g is None or not med:
        return None
    run = ev.get("elevated_run")
    tail = f", still up {run} logged points after the spike" if run and run > 1 else ""
    return f"grad norm {g:.3g} is {g / med:.1f}× its median {med:.3g} over the previous {n} logged points{tail}"


def _nonfinite(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    if not ev.get("first_tensor"):
        return None
    counts = ev.get("counts") or {}
    now = [f"{t} ({_f(counts[t], '.0f')} values)" if _num(counts.get(t)) else str(t)
           for t in ev.get("tensors_now") or []]
    return (f"the first non-finite value appeared at step {ev.get('first_step')} in {ev['first_tensor']}"
            + (f"; this step: {', '.join(now)}" if now else ""))


def _starvation(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level = _num(ev.get("zero_std_group_frac_level"))
    if level is None:
        return None
    return (f"{level:.0%} of groups got equal rewards for every response (no GRPO signal; mostly "
            f"{ev.get('groups', 'unknown')}), reward level {_f(ev.get('reward_level'))}")


def _length(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    length = ev.get("response_length_level")
    tail = f" (mean length {_f(length, '.0f')} tokens)" if _num(length) is not None else ""
    if phase == "blowup" and _num(ev.get("truncated_frac_level")) is not None:
        return f"{_f(ev['truncated_frac_level'], '.0%')} of responses hit the length budget{tail}"
    if phase == "repetition" and _num(ev.get("repeat_frac_max_level")) is not None:
        return f"one token id makes up {_f(ev['repeat_frac_max_level'], '.0%')} of a response{tail}"
    return None


def _mismatch(phase: str, ev: Mapping[str, Any], now: int | None) -> str | None:
    level, ess = _num(ev.get("abs_level")), _num(ev.get("ess_level"))
    if level is None and ess is None:
        return None
    parts = []
    if level is not None:
        parts.append(f"|logp_old − logp_rollout| is {level:.3g} nats (bar {_f(ev.get('abs_bar'), '.3g')})")
    if ess is not None:
        parts.append(f"IS effective sample size {ess:.2f}")
    return "train–inference mismatch: " + ", ".join(parts)


SENTENCES: dict[str, Callable[[str, Mapping[str, Any], int | None], str | None]] = {
    "isdd": _isdd, "lld": _lld, "entropy": _entropy, "grad": _grad, "nonfinite": _nonfinite,
    "starvation": _starvation, "length": _length, "mismatch": _mismatch,
}
"""Detector → sentence builder (phase, evidence, the step the evidence was taken at)."""


def event_message(event: Any) -> str:
    """One sentence saying what the event saw, with its evidence values; the stored message as fallback."""
    row = _row(event)
    build = SENTENCES.get(str(row.get("detector")))
    text = None
    if build is not None:
        try:  # an event's latest version ends at the step its evidence was taken at
            text = build(str(row.get("phase")), row["evidence"], _int(row.get("step_end")))
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            text = None  # evidence of an unexpected shape: the detector's own message says it
    return text or str(row.get("message") or f"{row.get('detector')} · {row.get('phase')}")


def event_headline(event: Any) -> str:
    """``run · steps a–b · severity · detector/phase: sentence`` — one line for a terminal or a chat."""
    row = _row(event)
    run = f"{row['run']} " if row.get("run") else ""
    steps = (f"step {row.get('step_start')}" if row.get("step_start") == row.get("step_end")
             else f"steps {row.get('step_start')}–{row.get('step_end')}")
    return (f"{run}{steps} [{row.get('severity')}] {row.get('detector')}/{row.get('phase')}: "
            f"{event_message(row)}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, str)):
        return v
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        v = v.item()
    if isinstance(v, int):
        return v
    x = _num(v)
    return x if x is not None or not isinstance(v, float) else None


def event_payload(event: Any) -> dict[str, Any]:
    """The event as a JSON-safe dict: ``"type": "event"``, its events-row fields, ``evidence`` as an object, and
    ``text`` (``watch --json`` lines, ``detect --json`` items and notify POSTs alike)."""
    row = _row(event)
    out: dict[str, Any] = {"type": "event"}
    out.update({k: _jsonable(row.get(k)) for k in EVENT_FIELDS if k in row})
    out["evidence"] = _jsonable(row["evidence"])
    if row.get("written_at") is not None:
        out["written_at"] = _jsonable(row["written_at"])
    out["text"] = event_message(row)
    return out


def post_event(url: str, event: Any, timeout: float = 5.0) -> int:
    """POST ``event_payload(event)`` as JSON to an http(s) ``url``; the HTTP status, or NotifyError."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"notify URL must start with http:// or https://, got {url!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    body = json.dumps(event_payload(event), allow_nan=False).encode()
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "collapsewatch"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (scheme checked above)
            return int(resp.status)
    except urllib.error.HTTPError as e:
        raise NotifyError(f"notify {url}: the receiver answered HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise NotifyError(f"notify {url}: {reason}") from e
