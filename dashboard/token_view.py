"""Token drill-down, pure parts: token texts, per-token colours and hover text, and the step × position
heatmap figure. No Dash imports; the tokens page turns ``token_cells`` into spans.

Colours: ratio and displacement (log_ratio) are diverging — orange-red where the token's likelihood went
down (r < 1), blue where it went up — symmetric in log r (r = 0.5 as strong as r = 2); entropy is sequential
(amber, brighter = more uncertain).
Tool-observation tokens (mask 0) get no metric colour: they are not trained on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import theme

METRICS = {"ratio": "ratio r", "log_ratio": "displacement (log_ratio)", "entropy": "entropy"}
RATIO_SPAN = math.log(4.0)  # |log r| that gets the strongest colour: r ≤ 1/4 or r ≥ 4
LOG_RATIO_SPAN = 1.0  # |log_ratio| (nats) that gets the strongest colour
ENTROPY_SPAN = 4.0    # entropy (nats) that gets the strongest colour
UP, DOWN, HOT = "#4fa3f7", "#ff7043", "#ffca28"
FIXED_SPAN = {"ratio": math.log(4.0), "log_ratio": math.log(4.0), "entropy": ENTROPY_SPAN}
"""Run-independent heatmap scale (|log r| or |log_ratio| up to ln 4, entropy up to ENTROPY_SPAN): two runs'
heatmaps read alike. The default scale adapts to the run (its 99th percentile)."""

RANKINGS: dict[str, tuple[str, bool, str]] = {
    "seq": ("seq_id", True, "sequence id"),
    "repetition": ("repeat_frac_max", False, "worst repetition"),
    "entropy": ("entropy_mean", False, "highest entropy"),
    "ratio": ("seq_ratio", True, "lowest ratio"),
    "displacement": ("displacement_mean", True, "most likelihood lost"),
}
"""Sequence orders of the Tokens page: key → (sequence column, ascending, label)."""
RANK_METRIC = {"entropy": "entropy", "displacement": "log_ratio", "ratio": "ratio"}
"""The token colouring that shows what a ranking ranks by (when the URL names no metric)."""
DETECTOR_RANKING = {"isdd": "ratio", "lld": "displacement", "entropy": "entropy", "length": "repetition",
                    "mismatch": "ratio", "grad": "displacement"}
"""Which sequence explains a detector's flag: the Tokens page opens the first one in this order."""


def rank_sequences(seqs: pd.DataFrame, by: str) -> pd.DataFrame:
    """``seqs`` (one row per stored sequence) sorted by ``by`` (a key of RANKINGS), missing values last."""
    column, ascending, _ = RANKINGS.get(by, RANKINGS["seq"])
    if column not in seqs.columns:
        return seqs
    return seqs.sort_values([column, "rank", "seq_id"], ascending=[ascending, True, True], na_position="last",
                            kind="stable")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (every byte-level BPE, ours included): byte → the printable character standing
    for it in the vocabulary (printable Latin-1 bytes stand for themselves, the others are shifted past 255)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars), strict=True))


BYTE_OF: dict[str, int] = {c: b for b, c in _bytes_to_unicode().items()}
"""Byte-level BPE character → the byte it stands for."""


def byte_level_texts(pieces: Sequence[str | None], special: Collection[str] = ()) -> list[str]:
    r"""Display text of byte-level BPE pieces (``Ġthe``, ``âĢ``, ``Ļ``), in sequence order.

    A character split over several tokens (UTF-8 is 1–4 bytes, BPE merges need not respect that) is shown on the
    token that completes it, the tokens before it show nothing; bytes that never form a character show as
    ``\xNN`` escapes — never U+FFFD boxes, which is what decoding each token alone gives. A ``special`` piece (an
    added token such as ``<|im_end|>``) or one outside the byte alphabet is shown as it is."""
    out: list[str] = []
    pending = b""
    for piece in pieces:
        if piece is None or piece in special or any(c not in BYTE_OF for c in piece):
            if pending:  # bytes cut off by a special token: never a character
                out[-1] += pending.decode("utf-8", errors="backslashreplace")
                pending = b""
            out.append("[?]" if piece is None else piece)
            continue
        pending += bytes(BYTE_OF[c] for c in piece)
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data" and len(pending) - e.start < 4:
                done = pending[:e.start].decode("utf-8", errors="backslashreplace")
                out.append(done)  # the tail waits for the next token
                pending = pending[e.start:]
            else:
                out.append(pending.decode("utf-8", errors="backslashreplace"))
                pending = b""
    if pending and out:
        out[-1] += pending.decode("utf-8", errors="backslashreplace")
    return out


def token_texts(token_ids: Sequence[Any], decode: Callable[[list[int]], list[str]] | None) -> list[str]:
    """One display string per token: decoded text when a decoder is given, else ``[id]``."""
    ids = [None if pd.isna(t) else int(t) for t in token_ids]
    if decode is None:
        return ["[?]" if t is None else f"[{t}]" for t in ids]
    known = [t for t in ids if t is not None]
    decoded = iter(decode(known))
    return ["[?]" if t is None else next(decoded) for t in ids]


def _escape(c: str) -> str:
    r"""A code point as Python writes it escaped: ``\xNN``, ``\uNNNN`` or ``\UNNNNNNNN``."""
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str) -> str:
    r"""Whitespace that would vanish on screen made visible (newline ↵ kept as a line break, tab →), and every other
    character that does not print (``str.isprintable``: control bytes such as U+001D and U+007F, zero-width and
    direction marks, U+00A0 …) as its escape, ``\x1d``: a box or nothing on screen would hide what the token is."""
    if text == "":
        return "∅"
    text = text.replace("\t", "→").replace("\r", "").replace("\n", "↵\n")
    return "".join(c if c.isprintable() or c == "\n" else _escape(c) for c in text)


def scale(metric: str, value: float | None) -> float:
    """Signed strength in [−1, 1] of a value: < 0 likelihood down, > 0 up (entropy: [0, 1])."""
    if value is None or not math.isfinite(value):
        return 0.0
    if metric == "ratio":
        return float(np.clip(math.log(value) / RATIO_SPAN, -1, 1)) if value > 0 else -1.0
    if metric == "log_ratio":
        return float(np.clip(value / LOG_RATIO_SPAN, -1, 1))
    if metric == "entropy":
        return float(np.clip(value / ENTROPY_SPAN, 0, 1))
    raise ValueError(f"unknown token metric {metric!r}")


def colour(metric: str, value: float | None) -> str:
    s = scale(metric, value)
    if metric == "entropy":
        return theme.rgba(HOT, 0.08 + 0.72 * s)
    return theme.rgba(UP if s > 0 else DOWN, 0.06 + 0.79 * abs(s))


def token_cells(tokens: pd.DataFrame, metric: str, texts: list[str]) -> list[dict[str, Any]]:
    """Per token: ``text``, ``background``, ``observation`` (mask 0) and ``tip`` (hover lines)."""
    cols = {c: tokens[c].to_numpy(dtype=float, na_value=np.nan) if c in tokens else np.full(len(tokens), np.nan)
            for c in ("token_id", "turn_id", "ratio", "log_ratio", "entropy", "advantage", "logp", "logp_old")}
    values = cols[metric] if metric in cols else np.full(len(tokens), np.nan)
    cells = []
    for i, (pos, mask, text) in enumerate(zip(tokens["pos"].tolist(), tokens["mask"].tolist(), texts, strict=True)):
        head = f"pos {pos} · id {_fmt(cols['token_id'][i], '.0f')} · turn {_fmt(cols['turn_id'][i], '.0f')}"
        if not mask:
            cells.append({"text": visible(text), "observation": True, "background": None,
                          "tip": f"{head}\ntool observation (mask 0, not trained on)"})
            continue
        tip = (f"{head}\nratio {_fmt(cols['ratio'][i])}   log_ratio {_fmt(cols['log_ratio'][i], '+.4f')}"
               f"\nentropy {_fmt(cols['entropy'][i])}   A {_fmt(cols['advantage'][i], '+.3f')}"
               f"\nlogp {_fmt(cols['logp'][i])}   logp_old {_fmt(cols['logp_old'][i])}")
        cells.append({"text": visible(text), "observation": False, "tip": tip,
                      "background": colour(metric, float(values[i]))})
    return cells


def zero_advantage_note(tokens: pd.DataFrame) -> str | None:
    """A note when every model token of the sequence has A = 0: it carries no gradient (its group's rewards were
    all equal), whatever its ratio."""
    if "advantage" not in tokens.columns or tokens.empty:
        return None
    a = pd.to_numeric(tokens.loc[tokens["mask"].astype(bool), "advantage"], errors="coerce").dropna()
    return "A = 0: no gradient from this sequence (its group's rewards were all equal)" \
        if len(a) and bool((a == 0).all()) else None


def _fmt(v: float, spec: str = ".4g") -> str:
    return "—" if not math.isfinite(v) else format(v, spec)


def bins(steps: Sequence[int], max_pos: int, max_rows: int = 160, max_cols: int = 256) -> tuple[int, int]:
    """(step_bin, pos_bin) widths so the heatmap has at most ``max_rows`` × ``max_cols`` cells."""
    span = (max(steps) - min(steps) + 1) if len(steps) else 1
    return max(1, -(-span // max_rows)), max(1, -(-(max_pos + 1) // max_cols))


def heatmap_figure(grid: pd.DataFrame, metric: str, step: int | None = None, step_bin: int = 1,
                   fixed: bool = False) -> go.Figure:
    """Step × position heatmap of ``grid`` rows (step, pos, value): steps down, positions across. The colour
    scale adapts to the run (99th percentile) unless ``fixed`` (``FIXED_SPAN``, the same for every run); the
    ratio is coloured by log r, so r = 0.5 and r = 2 are equally strong."""
    if grid.empty:
        return go.Figure(layout=theme.message_figure_layout("no token rows stored for this run", 320))
    z = grid.pivot(index="step", columns="pos", values="value").sort_index()
    values = z.to_numpy(dtype=float)
    custom = values
    if metric == "entropy":
        top = ENTROPY_SPAN if fixed else float(np.nanpercentile(values, 99))
        cs, zmin, zmax, zmid = "Inferno", 0.0, top, None
    else:
        if metric == "ratio":  # colour by log r (symmetric), hover says r
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.log(np.where(values > 0, values, np.nan))
        dev = FIXED_SPAN[metric] if fixed else (float(np.nanpercentile(np.abs(values), 99)) or 0.1)
        cs = [[0, DOWN], [0.5, "#1b2130"], [1, UP]]
        zmin, zmax, zmid = -dev, dev, 0.0
    label = {"ratio": "geo-mean r", "log_ratio": "mean log_ratio", "entropy": "mean entropy"}[metric]
    bar = dict(title=dict(text=label, side="right"), thickness=10, len=0.9)
    if metric == "ratio":  # ticks in r on the log-r scale
        ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 10, 20) if abs(math.log(t)) <= zmax + 1e-9]
        bar.update(tickvals=[math.log(t) for t in ticks], ticktext=[f"{t:g}" for t in ticks])
    fig = go.Figure(go.Heatmap(
        x=z.columns.to_numpy(), y=z.index.to_numpy(), z=values, customdata=custom, colorscale=cs, zmin=zmin,
        zmax=zmax, zmid=zmid, colorbar=bar, hoverongaps=False,
        hovertemplate=f"step %{{y}} · pos %{{x}}<br>{label} %{{customdata:.4g}}<extra></extra>"))
    height = int(np.clip(24 + 3 * len(z), 300, 560))
    fig.update_layout(theme.base_layout(height, margin=dict(l=56, r=16, t=30, b=36)),
                      xaxis=theme.axis(title=dict(text="position", font=dict(size=10))),
                      yaxis=theme.axis(title=dict(text="step", font=dict(size=10)), autorange="reversed"),
                      title=dict(text=f"<b>{METRICS[metric]}</b> by step × position (model tokens, "
                                      f"{step_bin}-step bins)", x=0.01, y=0.98, font=dict(size=12)))
    if step is not None:
        fig.update_layout(shapes=[step_marker(step, step_bin)])
    return fig


def step_marker(step: int, step_bin: int = 1) -> dict[str, Any]:
    """Outline of the heatmap row (step bin) holding ``step``."""
    lo = (step // step_bin) * step_bin
    return dict(type="rect", xref="x domain", yref="y", x0=0, x1=1, y0=lo - 0.5 * step_bin, y1=lo + 0.5 * step_bin,
                line=dict(color="#ffffff", width=1.5), fillcolor="rgba(0,0,0,0)")
