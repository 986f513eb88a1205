"""Tiny models and helpers shared by the io tests (files are always written under tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import nn

# Source of a small model written to disk, so "file.py:TinyNet" / arch="file.py:TinyNet"
# are exercised through a real import. BatchNorm + Dropout make eval mode observable.
TINY_SOURCE = """
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, num_classes: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(24, num_classes)

    def forward(self, x):
        x = self.pool(self.act(self.bn(self.conv(x))))
        return self.fc(self.drop(torch.flatten(x, 1)))


class GrayNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x):
        return self.conv(x)


def make_tiny():
    return TinyNet(num_classes=4)


def needs_args(width):
    return TinyNet(width)


instance = TinyNet()
not_a_model = 42
"""


def tiny_namespace() -> dict:
    """Execute TINY_SOURCE in a fresh namespace (the reference classes for comparisons)."""
    namespace: dict = {}
    exec(compile(TINY_SOURCE, "<tiny>", "exec"), namespace)
    return namespace


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    """TINY_SOURCE written as tmp_path/tiny_model.py."""
    path = tmp_path / "tiny_model.py"
    path.write_text(TINY_SOURCE, encoding="utf-8")
    return path


@pytest.fixture
def tiny_ref() -> nn.Module:
    """A TinyNet with non-trivial batch-norm statistics, in eval mode."""
    torch.manual_seed(1)
    model = tiny_namespace()["TinyNet"]()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model.eval()


@pytest.fixture
def rgb_model() -> nn.Module:
    """A TinyNet (3 input channels) as built, in eval mode."""
    return tiny_namespace()["TinyNet"]().eval()


@pytest.fixture
def fixed_input() -> torch.Tensor:
    """A deterministic 1x3x32x32 input."""
    return torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(7))


class Payload:
    """Pickles to ``os.mkdir(marker)``: proves whether unpickling ran code from a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list:
    """ACTVIZ_OFFLINE=1, an empty torch hub cache, and a socket probe that records calls."""
    calls: list = []

    def refuse(*args, **kwargs):
        calls.append((args, kwargs))
        raise OSError("network disabled in tests")

    monkeypatch.setenv("ACTVIZ_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setattr("socket.create_connection", refuse)
    return calls


def same_output(model: nn.Module, ref: nn.Module | torch.Tensor, x: torch.Tensor) -> bool:
    """Whether ``model(x)`` equals ``ref(x)`` (or ``ref`` itself when it is the output), to
    float tolerance."""
    with torch.no_grad():
        expected = ref if isinstance(ref, torch.Tensor) else ref(x)
        return torch.allclose(model(x), expected, atol=1e-5, rtol=1e-4)
