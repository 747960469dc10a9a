"""The built-in trainer: ``collapsewatch train`` (:mod:`.cli`) runs the recipe in :mod:`.loop`, configured by
:class:`.config.TrainConfig`; drills, on-phase actions, checkpoints and DDP live beside it."""
