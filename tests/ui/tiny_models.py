"""A tiny CNN shared by the window tests, with switches for the bad-forward cases, and the
windows several test files open on it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

#: The TinyCNN's layers the window tests tick.
TINY_LAYERS = ["conv1", "conv2", "fc"]
#: The window's size in the window tests that open one on it.
SIZE = (1400, 900)


class TinyCNN(nn.Module):
    """conv1 (4 ch, 16x16) -> relu -> conv2 (6 ch, 8x8) -> pool -> flatten -> fc (5 classes)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(6, 5)
        self.fail = False
        self.poison = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            raise RuntimeError("kaputt: the forward pass raised on purpose")
        out = self.fc(self.flatten(self.pool(self.conv2(self.relu(self.conv1(x))))))
        if self.poison:
            out = out * float("nan")
        return out


def seeded_tiny_cnn(seed: int = 0) -> TinyCNN:
    """A :class:`TinyCNN` made after ``torch.manual_seed(seed)``, in eval mode."""
    torch.manual_seed(seed)
    return TinyCNN().eval()


def tiny_window(
    actviz_window: Any, layers: Sequence[str] = ("conv1", "conv2"), **kwargs: Any
) -> Any:
    """A window on :func:`seeded_tiny_cnn` (seed 0) and the next ``torch.randn(1, 3, 16, 16)``
    of the global generator, ``layers`` ticked, run once; ``kwargs`` go to ``actviz_window``."""
    model = seeded_tiny_cnn(0)
    win = actviz_window(model, torch.randn(1, 3, 16, 16), list(layers), **kwargs)
    win.run_and_wait()
    return win
