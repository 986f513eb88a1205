"""OpenMP settings of actviz's own processes (the app, its stress cases): libgomp reads them once,
when torch loads, so they are set before ``import torch`` (this module imports neither)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: A team thread done with its share sleeps instead of spinning: beside the GUI thread and any
#: other load on few cores, spinning team threads took the cores their own team waited for.
APP_OPENMP = {"OMP_WAIT_POLICY": "PASSIVE"}


def use_app_openmp(env: MutableMapping[str, str] = os.environ) -> None:
    """Put :data:`APP_OPENMP` in ``env`` where it sets nothing (the user's own values stay)."""
    for key, value in APP_OPENMP.items():
        env.setdefault(key, value)
