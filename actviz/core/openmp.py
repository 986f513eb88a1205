"""OpenMP settings of actviz's own processes (the app, its stress cases): libgomp reads them once,
when torch loads, so they are set before ``import torch`` (this module imports neither)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: A team thread done with its share spins this long, then sleeps (libgomp's default, 300,000,
#: let spinning threads take the cores their team waited for: docs/performance.md).
APP_OPENMP = {"GOMP_SPINCOUNT": "1000"}


def use_app_openmp(env: MutableMapping[str, str] = os.environ) -> None:
    """Put :data:`APP_OPENMP` in ``env`` unless the user chose a wait policy or spin count."""
    if not {"OMP_WAIT_POLICY", *APP_OPENMP} & set(env):
        env.update(APP_OPENMP)
