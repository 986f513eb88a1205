"""The tiny models of the scale benchmark, shared with its tests (one definition each).

``tests/io/test_big.py`` checks captures, edits, effects and scans of :func:`offloaded_tiny`
against :func:`tiny_net`; ``offload_capture_ratio`` times the same model (see
:mod:`actviz.bench.scale_bench`), and ``scan_scale`` scans synthetic images through
:func:`tiny_conv`.
"""

from __future__ import annotations

import os

import torch
from torch import nn

__all__ = [
    "TINY_CPU_BYTES",
    "TINY_LAYERS",
    "conv_stack",
    "offloaded_tiny",
    "tiny_conv",
    "tiny_net",
]

#: The five convolutions of :func:`tiny_net` (the layers a capture of it records).
TINY_LAYERS = ("0", "2", "4", "6", "8")

#: CPU bytes :func:`offloaded_tiny` leaves accelerate: the first convolution and its ReLU stay
#: in memory, every later module goes to disk (accelerate keeps room for the largest layer).
TINY_CPU_BYTES = 12000


def tiny_net() -> nn.Sequential:
    """Three 3x3 convolutions (3 -> 8 -> 16 -> 16 channels) with ReLUs, a global average pool
    and a 10-way linear layer; seed 0, eval mode."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()


def offloaded_tiny(folder: str | os.PathLike[str]) -> nn.Module:
    """:func:`tiny_net` placed by accelerate with :data:`TINY_CPU_BYTES` of CPU memory and the
    rest offloaded to disk under ``folder`` (needs ``accelerate``)."""
    import actviz

    return actviz.load_model(
        tiny_net(), device_map="auto", max_memory={"cpu": TINY_CPU_BYTES}, offload_folder=folder
    )


def tiny_conv() -> nn.Module:
    """Two small convolutions, a pool and a 10-way linear layer: the net ``scan_scale`` runs
    a million 16x16 images through (its layers ``"1"`` and ``"3"`` record embeddings)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()


def conv_stack(depth: int = 5, width: int = 32) -> nn.Sequential:
    """``depth`` 3x3 convolutions of ``width`` channels, each followed by a ReLU (the
    convolutions are modules ``0, 2, 4, ...``); seed 0, eval mode."""
    torch.manual_seed(0)
    return nn.Sequential(
        *[
            m
            for i in range(depth)
            for m in (nn.Conv2d(3 if i == 0 else width, width, 3, padding=1), nn.ReLU())
        ]
    ).eval()
