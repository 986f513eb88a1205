"""The window the live-mode tests drive: the tiny CNN on one seeded frame, running by itself."""

from __future__ import annotations

from typing import Any

from tests.helpers import random_frames
from tests.ui.tiny_models import seeded_tiny_cnn

#: The layers the live tests tick.
LIVE_LAYERS = ["conv1", "conv2", "fc"]


def live_window(actviz_window: Any) -> Any:
    """A window on the tiny CNN that runs by itself, after its first run (on its own input,
    ``random_frames(1, 9)``); returns its driver (``win.live`` drives live mode)."""
    win = actviz_window(
        seeded_tiny_cnn(),
        random_frames(1, 9),
        LIVE_LAYERS,
        size=(1200, 800),
        auto_run=True,
        features=["live"],  # live mode alone: what these tests drive
    )
    win.run_and_wait(flush=False)
    return win
