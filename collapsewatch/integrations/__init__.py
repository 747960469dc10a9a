"""Adapters that fill a :class:`~collapsewatch.TokenBatch` from other trainers' own tensors.

* :mod:`collapsewatch.integrations.trl` — TRL's ``GRPOTrainer``: ``watch(trainer, store, run)`` or the
  ``CollapsewatchCallback`` (docs/trl.md).

Submodules import their trainer framework lazily: importing this package never imports TRL.
"""
