"""Adapters that fill a :class:`~collapsewatch.TokenBatch` from other trainers' own tensors.

* :mod:`collapsewatch.integrations.trl` — TRL's ``GRPOTrainer``: ``watch(trainer, store, run)`` or the
  ``CollapsewatchCallback`` (docs/trl.md).
* :mod:`collapsewatch.integrations.verl` — verl 0.9: the registered policy loss ``loss_mode=collapsewatch[.<mode>]``
  (worker side), :mod:`.verl_driver` (per-sequence fields from the driver), :mod:`.verl_plugin` (the
  ``verl.plugins`` entry point that loads both); docs/verl.md.

Importing this package never imports TRL or verl (the verl modules import verl at the top: they are only loaded
through verl's plugin hook or by hand).
"""
