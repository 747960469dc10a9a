"""The collapse lab: drill grids, detector scoring against known onsets, threshold calibration.

    collapsewatch lab run lab/grid.toml --store S      # grid.py: train drills × objectives × seeds (resumable)
    collapsewatch lab score S [--labels L.csv]         # labels.py + score.py: detection, delay, lead, false flags
    collapsewatch lab calibrate S --out detectors.toml # calibrate.py: thresholds on a train split, held-out score
    collapsewatch lab bench --public S                 # bench.py: every corpus per source, held out by source

Drills themselves live with the trainer (``collapsewatch.trainer.drills``); docs/lab/detectors-evaluation.md has the tables.

Names are imported on first use (``__getattr__``), so that ``collapsewatch --help``, which imports the ``lab``
command group (``lab/cli.py``), does not import the detectors and scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"RunLabel": ".labels", "reward_collapse": ".labels", "OWN_DETECTORS": ".score", "score": ".score"}
__all__ = ["OWN_DETECTORS", "RunLabel", "reward_collapse", "score"]

if TYPE_CHECKING:
    from .labels import RunLabel, reward_collapse
    from .score import OWN_DETECTORS, score


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
