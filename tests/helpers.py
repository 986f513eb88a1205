"""Plain helpers several test folders share: seeded inputs, a mosaic tile's pixels, a session
file rewritten with a change (Qt-free; the window tests' own are in tests/ui)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch


def frame(seed: int, size: int = 16) -> torch.Tensor:
    """A random normal 1x3x``size``x``size`` input, the same for the same ``seed``."""
    return random_frames(1, seed, size)


def random_frames(count: int, seed: int, size: int = 16) -> torch.Tensor:
    """``count`` random normal 3x``size``x``size`` frames stacked (a clip), seeded."""
    return torch.randn(count, 3, size, size, generator=torch.Generator().manual_seed(seed))


def tile_pixels(pixels: np.ndarray, mosaic, channel: int) -> np.ndarray:
    """The part of a mosaic's painted ``pixels`` that is the tile of ``channel``."""
    y0, x0 = mosaic.tile_origin(channel)
    return pixels[y0 : y0 + mosaic.tile_h, x0 : x0 + mosaic.tile_w]


def rewrite_zip(src: Path, dst: Path, change: Callable[[dict[str, bytes]], None]) -> None:
    """Copy the zip file ``src`` (a session file) to ``dst`` with ``change(members)`` applied
    to its ``{name: bytes}`` members."""
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    change(members)
    with zipfile.ZipFile(dst, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def make_capture(layers: dict[str, list[torch.Tensor]], output: torch.Tensor | None = None):
    """A hand-made capture: each layer's calls are the tensors given (Conv2d records)."""
    from actviz.core.records import Capture, LayerRecord

    records = {
        name: [LayerRecord(name, k, "Conv2d", (), t) for k, t in enumerate(calls)]
        for name, calls in layers.items()
    }
    return Capture(
        names=list(layers),
        records=records,
        output=output,
        input_grads=None,
        target_value=None,
        target_index=None,
        target_description="",
        warnings=[],
        inputs=None,
        nbytes=0,
        elapsed_s=0.0,
    )


def seeded_resnet18() -> torch.nn.Module:
    """A random-init ResNet-18 made after ``torch.manual_seed(0)``, in eval mode."""
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


class ConvMean(torch.nn.Module):
    """A 3x3 conv to ``channels`` channels averaged over space (a model the tests script, save
    or open; nothing knows its class)."""

    def __init__(self, channels: int = 2) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean((2, 3))


def noise_picture(size: int = 96, seed: int = 4) -> torch.Tensor:
    """A random ``size`` x ``size`` RGB picture (uint8 noise) as a 1x3xHxW tensor in [0, 1]."""
    image = (np.random.default_rng(seed).random((size, size, 3)) * 255).astype(np.uint8)
    return torch.from_numpy(image).permute(2, 0, 1)[None].float() / 255
