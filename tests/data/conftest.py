"""Tiny models and image folders for the scan tests (everything under tmp_path)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from actviz.core.threads import torch_threads
from actviz.data import Scan

LAYERS = ["1", "4", "7"]


def tiny_net(seed: int = 0) -> nn.Sequential:
    """conv-relu-pool-conv-relu-gap-flatten-linear; channel 0 of layer "1" is dead."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 3),
    )
    with torch.no_grad():
        net[0].bias[0] = -100.0  # never above zero: a dead channel
        net[3].bias[1] = -0.6  # above zero on some images only: exact zero ties
    return net.eval()


def write_images(folder: Path, count: int, *, seed: int = 0, start: int = 0) -> list[Path]:
    """``count`` random 16x16 RGB PNGs in two class folders; every 7th repeats an earlier one."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(start, start + count):
        cls = "a" if i % 2 else "b"
        (folder / cls).mkdir(parents=True, exist_ok=True)
        path = folder / cls / f"img{i:03d}.png"
        if i % 7 == 6 and len(paths) >= 3:
            shutil.copyfile(paths[-3], path)  # same pixels: ties broken by data order
        else:
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "images"
    write_images(folder, 60)
    return folder


def assert_same_scan(a: Scan, b: Scan, *, exact: bool = False) -> None:
    """Same top-k (indices and locations exactly, values to float rounding) and statistics."""
    assert a.layers == b.layers and a.count == b.count and a.sources == b.sources
    for layer in a.layers:
        assert a.channels(layer) == b.channels(layer)
        for c in range(a.channels(layer)):
            ta, tb = a.top(layer, c), b.top(layer, c)
            assert [(e.index, e.location) for e in ta] == [(e.index, e.location) for e in tb]
            va, vb = [e.value for e in ta], [e.value for e in tb]
            if exact:
                assert va == vb
            else:
                np.testing.assert_allclose(va, vb, rtol=1e-5, atol=1e-6)
        sa, sb = a.stats(layer), b.stats(layer)
        np.testing.assert_allclose(sa.mean, sb.mean, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(sa.std, sb.std, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(sa.frac_positive, sb.frac_positive)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny convolutions on a shared, loaded machine: one thread avoids thread-sync stalls."""
    with torch_threads(1):
        yield


class FakeUMAP:
    """A stand-in for umap.UMAP (umap-learn is not installed in CI; its fits take minutes):
    the first ``n_components`` columns, scaled, and what it was given."""

    seen: list = []

    def __init__(self, n_components=2, random_state=None, **options):
        self.k, self.options = n_components, options
        FakeUMAP.seen.append(self)

    def fit_transform(self, x):
        self.fitted = x
        self._raw_data = x
        return 2.0 * x[:, : self.k]

    def transform(self, x):
        return 2.0 * x[:, : self.k]
