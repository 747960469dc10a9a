"""collapsewatch: watch GRPO-style RL runs of language models for the ways they collapse.

Glossary (the full one: docs/architecture.md, *Glossary*):

* ``B`` sequences in a micro-batch, ``G`` group size (responses per prompt), ``T`` tokens per row.
* ``logp`` = log π_θ(y_t) of the sampled token under the policy being optimised;
  ``logp_old`` = under π_old, the policy at rollout time, recomputed by the training engine;
  ``logp_rollout`` = as reported by the inference engine (may differ from ``logp_old``);
  ``logp_ref`` = under the frozen reference model.
* ``mask`` = loss mask: 1 on model-generated tokens that are trained on; 0 on prompt, padding and
  tool-observation tokens. ``A`` = advantage (per sequence, broadcast to tokens).
* ``r = exp(logp − logp_old)`` = token importance ratio; r ≡ 1 when the policy has not moved since the
  rollout (one mini-batch, one epoch): ratio metrics are then NULL ("not applicable").
* ``turn`` = a maximal run of model tokens between two tool observations.
* ISDD = importance-sampling distribution drift (arXiv 2603.10069); LLD = lazy likelihood displacement
  (arXiv 2512.04220).

Names are imported lazily so that the command line (``collapsewatch sql``) starts without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "TokenBatch": ".batch", "Monitor": ".monitor", "ClipSpec": ".probe", "Sampling": ".recorder",
    "Store": ".store", "connect": ".store",
}
__all__ = ["ClipSpec", "Monitor", "Sampling", "Store", "TokenBatch", "__version__", "connect"]

if TYPE_CHECKING:
    from .batch import TokenBatch
    from .monitor import Monitor
    from .probe import ClipSpec
    from .recorder import Sampling
    from .store import Store, connect


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'collapsewatch' has no attribute {name!r}")
