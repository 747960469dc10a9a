"""The collapse lab: drill grids, detector scoring against known onsets, threshold calibration.

    collapsewatch lab run lab/grid.toml --store S      # grid.py: train drills × objectives × seeds (resumable)
    collapsewatch lab score S [--labels L.csv]         # labels.py + score.py: detection, delay, lead, false flags
    collapsewatch lab calibrate S --out detectors.toml # calibrate.py: thresholds on a train split, held-out score

Drills themselves live with the trainer (``collapsewatch.trainer.drills``); docs/lab/detectors-evaluation.md has the tables.
"""

from .labels import RunLabel, reward_collapse
from .score import OWN_DETECTORS, score

__all__ = ["OWN_DETECTORS", "RunLabel", "reward_collapse", "score"]
