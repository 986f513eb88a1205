"""Test your models and extensions in the actviz window: a driver and a pytest plugin.

With pytest-qt installed, any test can ask for the ``actviz_window`` fixture::

    def test_conv1_is_shown(actviz_window):
        win = actviz_window(MyNet().eval(), torch.randn(1, 3, 32, 32), ["conv1"])
        win.run_and_wait()
        pixels = win.shown_pixels("conv1")  # (H, W, 4) uint8, as painted

Only the driver needs Qt: ``from actviz.testing import assert_no_hooks`` does not import it."""

from __future__ import annotations

import importlib
from typing import Any

from actviz.testing.checks import (
    ProcessState,
    assert_no_hooks,
    hooks_left,
    leaked_widgets,
    top_level_widgets,
)

_DRIVER = ("RUN_TIMEOUT_MS", "Prediction", "WindowDriver", "painted_pixels")


def __getattr__(name: str) -> Any:
    if name in _DRIVER:
        return getattr(importlib.import_module("actviz.testing.driver"), name)
    raise AttributeError(f"module 'actviz.testing' has no attribute {name!r}")


__all__ = [
    "RUN_TIMEOUT_MS", "Prediction", "ProcessState", "WindowDriver", "assert_no_hooks", "hooks_left",
    "leaked_widgets", "painted_pixels", "top_level_widgets",
]  # fmt: skip
