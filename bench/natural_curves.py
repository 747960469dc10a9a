"""Curves of the natural corpus as plain SVG (no plotting dependency): one figure per run, four panels on one step
axis — reward (with the lab's collapse step), L (batch per step, pooled band, sentinel points) and I, entropy of
correct / incorrect responses, the A>0 ratio p05 — with the detectors' flags (episode starts ≥ warning) as ticks.

    python -m bench.natural_curves STORE [--out docs/img/natural] [--runs R1,R2] [--labels CSV]
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path

import numpy as np
import pandas as pd

from collapsewatch.detectors.likelihood import pooled_columns
from collapsewatch.lab.corpus import flags, load_corpus

W, PANEL_H, LEFT, TOP, GAP = 760, 120, 60, 44, 26
COLORS = {"reward_mean": "#1f77b4", "L": "#2ca02c", "I": "#d62728", "sL": "#2ca02c", "sI": "#d62728",
          "band": "#2ca02c", "ec": "#2ca02c", "ei": "#d62728", "p05": "#9467bd"}
SEV = {"warning": "#ff7f0e", "critical": "#d62728"}


def _smooth(y: pd.Series, k: int = 9) -> pd.Series:
    return y.rolling(k, min_periods=1, center=True).mean()


def _poly(xs: np.ndarray, ys: np.ndarray, sx, sy, color: str, dash: str = "", width: float = 1.4) -> str:
    keep = np.isfinite(ys)
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs[keep], ys[keep], strict=True))
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{d} points="{pts}"/>' if pts else ""


def _panel(i: int, title: str, lines: list[tuple[np.ndarray, np.ndarray, str, str]], x0: float, x1: float,
           band: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, dots=()) -> tuple[str, callable]:
    top = TOP + i * (PANEL_H + GAP)
    ys = np.concatenate([y[np.isfinite(y)] for _, y, _, _ in lines] + [d[1][np.isfinite(d[1])] for d in dots]
                        + [np.zeros(0)])
    lo, hi = (float(ys.min()), float(ys.max())) if len(ys) else (0.0, 1.0)
    lo, hi = (lo - 0.5, hi + 0.5) if hi - lo < 1e-9 else (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    sx = lambda x: LEFT + (x - x0) / max(x1 - x0, 1) * (W - LEFT - 10)  # noqa: E731
    sy = lambda y: top + PANEL_H - (y - lo) / (hi - lo) * PANEL_H  # noqa: E731
    out = [f'<rect x="{LEFT}" y="{top}" width="{W - LEFT - 10}" height="{PANEL_H}" fill="none" stroke="#ccc"/>',
           f'<text x="{LEFT + 4}" y="{top - 6}" font-size="11">{html.escape(title)}</text>',
           f'<text x="{LEFT - 4}" y="{top + 10}" font-size="9" text-anchor="end">{hi:.3g}</text>',
           f'<text x="{LEFT - 4}" y="{top + PANEL_H}" font-size="9" text-anchor="end">{lo:.3g}</text>']
    if band is not None:
        x, blo, bhi = band
        keep = np.isfinite(blo) & np.isfinite(bhi)
        if keep.any():
            pts = [f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(x[keep], bhi[keep], strict=True)]
            pts += [f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(x[keep][::-1], blo[keep][::-1], strict=True)]
            out.append(f'<polygon fill="{COLORS["band"]}" fill-opacity="0.18" stroke="none" points="{" ".join(pts)}"/>')
    for x, y, color, dash in lines:
        out.append(_poly(x, y, sx, sy, color, dash))
    for x, y, color in dots:
        out += [f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="2.2" fill="{color}"/>'
                for a, b in zip(x, y, strict=True) if np.isfinite(b)]
    return "\n".join(out), sx


def run_svg(run: str, df: pd.DataFrame, fl: pd.DataFrame, collapse: int | None) -> str:
    """The SVG of one run (see module docstring)."""
    df = pooled_columns(df.sort_values("step").reset_index(drop=True))
    x = df["step"].to_numpy(dtype=float)
    x0, x1 = float(x.min()), float(x.max())
    col = lambda c: pd.to_numeric(df.get(c, pd.Series(np.nan, index=df.index)), errors="coerce")  # noqa: E731
    sent = df[col("sentinel_logp_correct_mean").notna()]
    parts = []
    specs = [
        ("reward (mean, smoothed 9)", [(x, _smooth(col("reward_mean")).to_numpy(), COLORS["reward_mean"], "")],
         None, None),
        ("L: batch token mean (thin), pooled ±1.96 SE (band), sentinel L (dots) / I (red dots)",
         [(x, col("logp_old_token_mean_correct").to_numpy(), COLORS["L"], "2,2"),
          (x, col("L_pooled").to_numpy(), COLORS["L"], "")],
         (x, col("L_pooled_lo").to_numpy(), col("L_pooled_hi").to_numpy()),
         [(sent["step"].to_numpy(dtype=float), pd.to_numeric(sent["sentinel_logp_correct_mean"]).to_numpy(), "#0a5"),
          (sent["step"].to_numpy(dtype=float), pd.to_numeric(sent["sentinel_logp_incorrect_mean"]).to_numpy(),
           "#d62728")]),
        ("entropy: correct (green) / incorrect (red) responses, smoothed 9",
         [(x, _smooth(col("entropy_mean_correct")).to_numpy(), COLORS["ec"], ""),
          (x, _smooth(col("entropy_mean_incorrect")).to_numpy(), COLORS["ei"], "")], None, ()),
        ("A>0 ratio p05 (off-policy steps)", [(x, col("ratio_p05_pos").to_numpy(), COLORS["p05"], "")], None, ()),
    ]
    specs[0] = (*specs[0][:3], ())
    for i, (title, lines, band, dots) in enumerate(specs):
        svg, sx = _panel(i, title, lines, x0, x1, band, dots)
        parts.append(svg)
    bottom = TOP + 4 * (PANEL_H + GAP) - GAP
    if collapse is not None:
        parts.append(f'<line x1="{sx(collapse):.1f}" x2="{sx(collapse):.1f}" y1="{TOP}" y2="{bottom}" '
                     'stroke="#000" stroke-dasharray="4,3"/>')
    for _, f in fl.iterrows():  # a tick per flag: orange warning, red critical
        xs = sx(float(f["step_start"]))
        parts.append(f'<line x1="{xs:.1f}" x2="{xs:.1f}" y1="{bottom + 4}" y2="{bottom + 14}" '
                     f'stroke="{SEV.get(f["severity"], "#999")}" stroke-width="2"/>')
    firsts = fl.sort_values("step_start").groupby(["detector", "phase"], sort=False).head(1)
    for k, (_, f) in enumerate(firsts.iterrows()):  # the first flag of each phase, as text
        n = int(((fl["detector"] == f["detector"]) & (fl["phase"] == f["phase"])).sum())
        parts.append(f'<text x="{LEFT + 240 * (k % 3)}" y="{bottom + 28 + 11 * (k // 3)}" font-size="9">'
                     f'{html.escape(f["detector"] + "/" + f["phase"])}: first @{int(f["step_start"])} '
                     f'({f["severity"]}), {n} episode(s)</text>')
    h = bottom + 40 + 11 * ((len(firsts) + 2) // 3)
    head = f'<text x="{LEFT}" y="16" font-size="12" font-weight="bold">{html.escape(run)}' + \
        (f" — reward collapse at {collapse} (dashed)" if collapse is not None else " — no reward collapse") + "</text>"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>{head}\n' + "\n".join(parts) + "</svg>\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--out", default="docs/img/natural")
    ap.add_argument("--runs", default="")
    ap.add_argument("--labels", default=None, help="labels CSV overriding the rule's collapse steps (lab's format)")
    a = ap.parse_args()
    corpus = load_corpus(a.store, a.labels)
    found = flags(corpus)
    found = found[found["severity"].isin(["warning", "critical"])]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for run, df in corpus.frames.items():
        if a.runs and run not in a.runs.split(","):
            continue
        (out / f"{run}.svg").write_text(run_svg(run, df, found[found["run"] == run], corpus.labels[run].collapse))
        print(out / f"{run}.svg")


if __name__ == "__main__":
    main()
