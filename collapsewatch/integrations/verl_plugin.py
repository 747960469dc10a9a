"""The ``verl.plugins`` entry point of collapsewatch: ``import verl`` imports this module in the driver and in every
Ray worker. It registers the ``collapsewatch`` policy loss (:mod:`.verl`) and, when ``COLLAPSEWATCH_STORE`` is set,
the driver hook that annotates verl's batch (:mod:`.verl_driver`). Set ``VERL_USE_EXTERNAL_PLUGINS=none`` to stop it.
"""

from __future__ import annotations

import os

from . import verl as _loss  # noqa: F401  (registers the loss modes)
from .verl import ENV_STORE
from .verl_driver import install_on_import

if os.environ.get(ENV_STORE):
    install_on_import()
