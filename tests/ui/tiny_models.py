"""A tiny CNN shared by the window tests, with switches for the bad-forward cases."""

from __future__ import annotations

import torch
from torch import nn


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
