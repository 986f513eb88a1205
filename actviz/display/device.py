"""Records on a GPU: everything a frame shows comes to the host in one copy.

Statistics, histograms, the shown sample, Grad-CAM and saliency are reduced on the device,
packed into one buffer and copied once; the host then prepares as for CPU records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from actviz.display.stats import (
    HIST_BINS,
    as_float,
    histogram_tensor,
    split_histogram,
    stats_from_vector,
    stats_vector,
)

__all__ = ["HostCopy", "HostLayer", "copy_to_host"]


@dataclass
class HostLayer:
    """One layer's numbers after the copy: statistics, the shown sample, its histogram."""

    shape: tuple[int, ...]
    stats: dict[str, Any]
    sample: np.ndarray  # output[s : s + 1] (the whole output when it has no batch dimension)
    grad_sample: np.ndarray | None = None  # |gradient|, same slice
    hist: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class HostCopy:
    """What :func:`copy_to_host` brought back."""

    layers: dict[str, HostLayer] = field(default_factory=dict)
    extras: dict[str, np.ndarray] = field(default_factory=dict)


def _to_host(buffer: torch.Tensor) -> torch.Tensor:
    """The frame's single device-to-host copy (a seam the tests count)."""
    return buffer.cpu()


def _sample_slice(t: torch.Tensor, sample: int) -> torch.Tensor:
    if t.dim() < 2:
        return t
    s = min(sample, t.shape[0] - 1)
    return t[s : s + 1]


def copy_to_host(
    layers: Sequence[tuple[str, torch.Tensor | None, torch.Tensor | None]],
    *,
    sample: int = 0,
    hist_names: Sequence[str] = (),
    bins: int = HIST_BINS,
    extras: dict[str, torch.Tensor] | None = None,
) -> HostCopy:
    """Reduce ``(name, output, gradient)`` layers where they live and copy the results once.

    ``sample`` is the batch element brought back; ``hist_names`` get histograms of ``bins``;
    ``extras`` are more float tensors for the same copy.
    """
    f64: list[torch.Tensor] = []
    f32: list[torch.Tensor] = []
    plan: list[dict[str, Any]] = []
    wanted = set(hist_names)
    for name, tensor, grad in layers:
        if tensor is None:
            continue
        same = grad is not None and grad.shape == tensor.shape
        entry: dict[str, Any] = {"name": name, "shape": tuple(tensor.shape)}
        f64.append(stats_vector(tensor, grad))
        entry["stats"] = len(f64) - 1
        if name in wanted:
            f64.append(histogram_tensor(tensor, bins))
            entry["hist"] = len(f64) - 1
        part = as_float(_sample_slice(tensor, sample)).contiguous()
        f32.append(part)
        entry["sample"] = (len(f32) - 1, tuple(part.shape))
        if same:
            f32.append(as_float(_sample_slice(grad, sample)).abs().contiguous())  # type: ignore[arg-type]
            entry["grad"] = len(f32) - 1
        plan.append(entry)
    extra_index: dict[str, tuple[int, tuple[int, ...]]] = {}
    for key, value in (extras or {}).items():
        f32.append(as_float(value).contiguous())
        extra_index[key] = (len(f32) - 1, tuple(value.shape))
    if not f32 and not f64:
        return HostCopy()
    device = (f64 or f32)[0].device  # parts from elsewhere (a CPU extra) join it first
    parts = [p.reshape(-1).to(device, torch.float64).view(torch.uint8) for p in f64]
    parts += [p.reshape(-1).to(device).view(torch.uint8) for p in f32]
    host = _to_host(torch.cat(parts)).numpy()
    # Slice the buffer back into arrays (float64 parts first keeps every part aligned).
    out64, out32, offset = [], [], 0
    for p in f64:
        out64.append(np.frombuffer(host, np.float64, p.numel(), offset))
        offset += p.numel() * 8
    for p in f32:
        out32.append(np.frombuffer(host, np.float32, p.numel(), offset))
        offset += p.numel() * 4
    result = HostCopy()
    for entry in plan:
        i, shape = entry["sample"]
        layer = HostLayer(
            shape=entry["shape"],
            stats=stats_from_vector(entry["shape"], out64[entry["stats"]]),
            sample=out32[i].reshape(shape).copy(),
        )
        if "grad" in entry:
            layer.grad_sample = out32[entry["grad"]].reshape(shape).copy()
        if "hist" in entry:
            layer.hist = split_histogram(out64[entry["hist"]], bins)
        result.layers[entry["name"]] = layer
    result.extras = {k: out32[i].reshape(s).copy() for k, (i, s) in extra_index.items()}
    return result
