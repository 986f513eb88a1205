"""A tiny net with a concept layer, a dictionary for it and the hand-written removal of one
concept, for the concept effect tests."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import actviz

LAYER = "act"


class Net(nn.Module):
    """conv -> relu ("act", 8 channels) -> conv -> relu -> pool -> linear: a nonlinear head."""

    def __init__(self, linear_head: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.mid = nn.Identity() if linear_head else nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mid(self.act(self.conv(x))))


def dictionary(n: int = 24, k: int = 4, seed: int = 0) -> actviz.concepts.Concepts:
    """A random TopK dictionary of ``n`` unit-norm concepts over LAYER's 8 channels."""
    g = torch.Generator().manual_seed(seed)
    w_dec = F.normalize(torch.randn(n, 8, generator=g), dim=1)
    return actviz.concepts.Concepts(
        w_dec.T.clone(), w_dec, 0.05 * torch.randn(n, generator=g), torch.zeros(8),
        architecture="topk", k=k, hook_name=LAYER,
    )  # fmt: skip


def hand_removed(net, x, c, i, scale, read):
    """The target with concept ``i`` removed by a forward hook written here."""

    def hook(_m, _a, out):
        v = out.movedim(1, -1)
        z = c.encode(v)
        return (v - (1 - scale) * z[..., i : i + 1] * c.W_dec[i]).movedim(-1, 1)

    handle = net.act.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return read(net(x))
    finally:
        handle.remove()
