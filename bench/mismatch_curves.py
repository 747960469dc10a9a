"""Curves of the mismatch grid (lab/mismatch.toml) as one plain SVG: three panels on one step axis — reward,
is_log_ratio_abs_mean and 1 − is_ess (each smoothed over 9 steps) — one line per run, coloured by arm (the run's
setting: no correction, TIS, MIS), dashed by seed; each run's reward collapse (the lab's rule), if any, as a dot.

    python -m bench.mismatch_curves STORE [--out docs/img/mismatch/grid.svg]
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path

import numpy as np
import pandas as pd

from bench.natural_curves import GAP, LEFT, PANEL_H, TOP, W, _panel, _smooth
from collapsewatch.lab.corpus import load_corpus
from collapsewatch.lab.natural import setting_of

ARM_COLORS = {"none": "#d62728", "tis": "#1f77b4", "mis": "#2ca02c"}
SEED_DASH = ["", "5,3", "1,2"]
PANELS = [("reward (mean, smoothed 9)", "reward_mean", False),
          ("is_log_ratio_abs_mean: mean |logp_old − logp_rollout| per token, nats (smoothed 9)",
           "is_log_ratio_abs_mean", False),
          ("1 − is_ess (smoothed 9; 0 = sampler and trainer agree)", "is_ess", True)]


def _style(run: str) -> tuple[str, str]:
    arm = setting_of(run).rsplit("-", 1)[-1]
    seed = int(run.rsplit("-s", 1)[-1]) if run.rsplit("-s", 1)[-1].isdigit() else 0
    return ARM_COLORS.get(arm, "#7f7f7f"), SEED_DASH[seed % len(SEED_DASH)]


def grid_svg(frames: dict[str, pd.DataFrame], collapses: dict[str, int | None], title: str) -> str:
    """The SVG (see module docstring) of ``frames`` (run → step rows)."""
    runs = sorted(frames)
    x0 = min(float(frames[r]["step"].min()) for r in runs)
    x1 = max(float(frames[r]["step"].max()) for r in runs)
    parts = []
    for i, (label, column, one_minus) in enumerate(PANELS):
        lines = []
        for run in runs:
            df = frames[run].sort_values("step")
            y = _smooth(pd.to_numeric(df.get(column, pd.Series(np.nan, index=df.index)), errors="coerce"))
            color, dash = _style(run)
            lines.append((df["step"].to_numpy(dtype=float), (1 - y if one_minus else y).to_numpy(), color, dash))
        dots = []
        if i == 0:  # a reward collapse, where the lab's rule finds one
            for run in runs:
                c = collapses.get(run)
                if c is not None:
                    df = frames[run].sort_values("step")
                    y = _smooth(pd.to_numeric(df["reward_mean"], errors="coerce"))
                    dots.append((np.array([float(c)]), np.array([float(y[df["step"] == c].iat[0])]), "#000"))
        svg, _ = _panel(i, label, lines, x0, x1, None, dots)
        parts.append(svg)
    bottom = TOP + len(PANELS) * (PANEL_H + GAP) - GAP
    legend = [f'<text x="{LEFT + 110 * k}" y="{bottom + 18}" font-size="10" fill="{c}">— {html.escape(a)}</text>'
              for k, (a, c) in enumerate(ARM_COLORS.items())]
    legend.append(f'<text x="{LEFT + 330}" y="{bottom + 18}" font-size="10">seed 0 solid, 1 dashed, 2 dotted; '
                  "black dot = reward collapse</text>")
    head = f'<text x="{LEFT}" y="16" font-size="12" font-weight="bold">{html.escape(title)}</text>'
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{bottom + 30}" font-family="sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>{head}\n' + "\n".join(parts + legend) + "</svg>\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--out", default="docs/img/mismatch/grid.svg")
    a = ap.parse_args()
    corpus = load_corpus(a.store)
    runs = [r for r, lab in corpus.labels.items() if not lab.kind]
    if not runs:
        raise SystemExit(f"error: store {a.store!r} has no undrilled run with step rows")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    title = f"mismatch grid: vLLM bf16 sampler, fp32 trainer ({len(runs)} runs)"
    out.write_text(grid_svg({r: corpus.frames[r] for r in runs}, {r: corpus.labels[r].collapse for r in runs}, title))
    print(out)


if __name__ == "__main__":
    main()
