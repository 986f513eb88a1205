"""Tiny models the plugin tests run (random init, seeded)."""

from __future__ import annotations

import torch
from torch import nn


class TinyConvNet(nn.Module):
    """An image ``(N, 3, H, W)`` -> 4 logits; ``conv1`` has 6 channels, ``conv2`` 8."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


class TinyAudioNet(nn.Module):
    """A waveform ``(N, samples)`` -> 3 logits through two strided Conv1d layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 4, 9, stride=4)
        self.conv2 = nn.Conv1d(4, 8, 9, stride=4)
        self.fc = nn.Linear(8, 3)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(wave.unsqueeze(1)))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=2))
