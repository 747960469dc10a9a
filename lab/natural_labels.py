"""Write docs/lab/natural-labels.csv: the natural corpus's label overrides (docs/lab/natural-corpus.md, "Labels").

The lab's own rule (``collapsewatch.lab.labels.reward_collapse``) with one setting changed, MIN_BEST 0.2 → 0.1: this
warm start succeeds at ≈ 0.2, so several runs peak at a 10-point level of ≈ 0.15 and then fall to 0 for good, which the
default calls no collapse. Runs whose label this changes are written, plus END_OF_RUN_DIPS: runs the rule calls
collapsed only because a dip in their last steps has no later steps to recover in (read off their curves).

    python lab/natural_labels.py /work/corpus-store/natural > docs/lab/natural-labels.csv
"""

from __future__ import annotations

import sys

from collapsewatch.lab import labels
from collapsewatch.lab.corpus import load_corpus

END_OF_RUN_DIPS = ("healthy-grpo-nll04-lr3e-4-s0",)


def main(store: str) -> None:
    corpus = load_corpus(store)
    labels.MIN_BEST = 0.1  # the one change (module docstring); the rule's code is the lab's own
    print("run,kind,onset,collapse")
    for run, df in sorted(corpus.frames.items()):
        if run in END_OF_RUN_DIPS:
            print(f"{run},,,")
            continue
        relaxed = labels.reward_collapse(df["step"].to_numpy(), df["reward_mean"].to_numpy(dtype="float64"))
        if relaxed != corpus.labels[run].collapse:
            print(f"{run},,,{'' if relaxed is None else relaxed}")


if __name__ == "__main__":
    main(sys.argv[1])
