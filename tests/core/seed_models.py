"""Tiny models from the seed articles, with their exact numbers."""

from __future__ import annotations

import torch
from torch import nn


class SeedMLP(nn.Module):
    """The 2-2-2 sigmoid MLP of the hook article (fc1, s1, fc2, s2)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(2, 2)
        self.s1 = nn.Sigmoid()
        self.fc2 = nn.Linear(2, 2)
        self.s2 = nn.Sigmoid()
        self.fc1.weight = nn.Parameter(torch.tensor([[0.15, 0.2], [0.25, 0.3]]))
        self.fc1.bias = nn.Parameter(torch.tensor([0.35]))
        self.fc2.weight = nn.Parameter(torch.tensor([[0.4, 0.45], [0.5, 0.55]]))
        self.fc2.bias = nn.Parameter(torch.tensor([0.6]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.s2(self.fc2(self.s1(self.fc1(x))))


class PowModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.powParam = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.powParam * x**q


class LogModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.logParam = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logParam * torch.log(x)


class PowLogModel(nn.Module):
    """z = logParam * log(powParam * x**q), submodules registered as attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.powModel = PowModel()
        self.logModel = LogModel()

    def forward(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.logModel(self.powModel(x, q))


class PowLogListModel(nn.Module):
    """The same computation with the submodules in a plain Python list (invisible to torch)."""

    def __init__(self) -> None:
        super().__init__()
        self.modelList = [PowModel(), LogModel()]

    def forward(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.modelList[1](self.modelList[0](x, q))


class BufferModel(nn.Module):
    """Updates a buffer during forward, like the article's powBuff example."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("calls", torch.zeros(()))
        self.register_buffer("running", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.running.mul_(0.5).add_(x.detach().mean(0))
        return self.lin(x)
