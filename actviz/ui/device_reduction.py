"""Device-side reduction for live mode: when the records are on a GPU, the statistics,
histograms, normalised mosaics, Grad-CAM and saliency are computed there and everything is
copied to the host in one transfer per frame (not one per layer). No Qt here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from actviz.core import views
from actviz.core.capture import Capture
from actviz.ui.fast_views import (
    HIST_BINS,
    MAX_MOSAIC_PIXELS,
    LazyHistLayer,
    as_float,
    live_mosaic,
    max_tile_for,
)
from actviz.ui.session import MAX_MOSAIC_CHANNELS, PreparedLayer, mosaic_pad

__all__ = [
    "DeviceLayer",
    "DeviceReduction",
    "device_grad_cam",
    "device_saliency",
    "reduce_on_device",
]

# --------------------------------------------------------------------------------------------
# device-side reduction (GPU): one host copy per frame
# --------------------------------------------------------------------------------------------

# Layout of the per-layer float64 statistics vector.
_STAT_FIELDS = (
    "numel", "finite", "nan", "zeros", "mean", "std", "min", "max", "grad_norm", "has_grad"
)  # fmt: skip


@dataclass
class DeviceLayer:
    """One layer reduced on its device and copied to the host (numpy only).

    Attributes
    ----------
    stats
        As :func:`actviz.core.views.layer_stats` (without name/type).
    act, grad
        Sample 0 of the output and of ``|gradient|`` (``(C, H, W)`` raw values) for 4-D
        outputs; for other ranks ``act`` is the whole output (the host prepares it).
    act_norm, grad_norm01
        The mosaic's channels (capped, downsampled), normalised to [0, 1], NaN where not finite.
    act_range, grad_range
        Finite min/max of the data the mosaic shows (its colour bar).
    scale
        Tile downsampling factor.
    first_channel
        The layer channel of the mosaic's first tile (its page).
    hist
        ``(counts, edges)`` for the layers asked for, else None.
    """

    shape: tuple[int, ...]
    stats: dict[str, Any]
    act: np.ndarray
    act_norm: np.ndarray | None = None
    act_range: tuple[float, float] = (0.0, 0.0)
    grad: np.ndarray | None = None
    grad_norm01: np.ndarray | None = None
    grad_range: tuple[float, float] = (0.0, 0.0)
    scale: int = 1
    normalize: str = "channel"
    hist: tuple[np.ndarray, np.ndarray] | None = None
    first_channel: int = 0

    def mosaics(self) -> tuple[views.Mosaic | None, views.Mosaic | None]:
        """Tile the normalised maps exactly as :func:`actviz.core.views.mosaic` lays them out."""
        return self._tile(self.act_norm, self.act_range), self._tile(
            self.grad_norm01, self.grad_range
        )

    def _tile(self, norm: np.ndarray | None, value_range: tuple[float, float]) -> Any:
        if norm is None:
            return None
        # Already normalised: "shared" over (0, 1) is the identity, so only the tiling runs.
        m = views.mosaic(
            norm, normalize="shared", value_range=(0.0, 1.0), pad=mosaic_pad(norm.shape)
        )
        return dataclasses.replace(
            m,
            value_range=value_range,
            normalize=self.normalize,
            total_channels=int(self.act.shape[0]) if self.act.ndim == 3 else m.total_channels,
            scale=self.scale,
            first_channel=self.first_channel,
        )

    def prepared(self, cap: Capture, name: str) -> PreparedLayer:
        """A :class:`PreparedLayer` for the panels, built from the host arrays only."""
        rec = cap[name]
        if self.act_norm is not None:
            act_mosaic, grad_mosaic = self.mosaics()
            batch = f" (sample 0 of {self.shape[0]})" if self.shape[0] > 1 else ""
            c, h, w = self.act.shape
            text = f"{c} channels of {h}x{w}{batch}"
            view = views.LayerView("maps", self.act, self.shape, text)
            grad_view = None
            if self.grad is not None:
                grad_view = views.LayerView("maps", self.grad, self.shape, text)
        else:
            # Other ranks are small (logits, tokens): the host views handle them as usual.
            view = views.layer_view(self.act)
            act_mosaic = grad_mosaic = grad_view = None
            if view.kind == "maps":
                act_mosaic = live_mosaic(view.data, self.normalize, None)
            if self.grad is not None:
                grad_view = views.layer_view(self.grad)
                if grad_view.kind == "maps":
                    grad_mosaic = live_mosaic(grad_view.data, self.normalize, None)
        stats = dict(self.stats, name=rec.name, type=rec.module_type)
        return LazyHistLayer(
            hist_source=None if self.hist is not None else rec.tensor,
            name=name,
            module_type=rec.module_type,
            shape=self.shape,
            calls=len(cap.calls(name)),
            view=view,
            mosaic=act_mosaic,
            grad_view=grad_view,
            grad_mosaic=grad_mosaic,
            stats=stats,
            hist=self.hist,
        )


def _device_stats(t: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor:
    """Branch-free statistics (no host sync): float64 vector laid out as ``_STAT_FIELDS``."""
    f = as_float(t).reshape(-1)
    n = f.numel()
    fin = torch.isfinite(f)
    n_fin = fin.sum().to(torch.float64)
    n_nan = torch.isnan(f).sum().to(torch.float64)
    zeros = (f == 0).sum().to(torch.float64)
    v = torch.where(fin, f, torch.zeros((), dtype=f.dtype, device=f.device)).to(torch.float64)
    denom = n_fin.clamp_min(1.0)
    mean = v.sum() / denom
    var = (((v - mean) * fin) ** 2).sum() / denom
    inf = torch.tensor(float("inf"), dtype=f.dtype, device=f.device)
    mn = torch.where(fin, f, inf).amin().to(torch.float64) if n else inf.double()
    mx = torch.where(fin, f, -inf).amax().to(torch.float64) if n else -inf.double()
    gn = (
        torch.linalg.vector_norm(g.detach(), dtype=torch.float64)
        if g is not None
        else torch.tensor(float("nan"), dtype=torch.float64, device=f.device)
    )
    has_grad = torch.tensor(float(g is not None), dtype=torch.float64, device=f.device)
    return torch.stack(
        [
            torch.tensor(float(n), dtype=torch.float64, device=f.device),
            n_fin,
            n_nan,
            zeros,
            mean,
            var.sqrt(),
            mn,
            mx,
            gn.to(torch.float64),
            has_grad,
        ]
    )


def _device_hist(t: torch.Tensor, bins: int) -> torch.Tensor:
    """``bins`` counts then ``bins + 1`` edges (float64), like :func:`views.histogram`."""
    f = as_float(t).reshape(-1).to(torch.float64)
    fin = torch.isfinite(f)
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=f.device)
    lo = torch.where(fin, f, inf).amin() if f.numel() else inf
    hi = torch.where(fin, f, -inf).amax() if f.numel() else inf
    empty = ~torch.isfinite(lo)
    lo = torch.where(empty, torch.zeros_like(lo), lo)
    hi = torch.where(empty, torch.ones_like(hi), hi)
    same = hi == lo
    lo, hi = torch.where(same, lo - 0.5, lo), torch.where(same, hi + 0.5, hi)
    idx = torch.floor((f - lo) * (bins / (hi - lo))).clamp(0, bins - 1).to(torch.int64)
    idx = torch.where(fin, idx, torch.full_like(idx, bins))  # non-finite: an overflow bin
    counts = torch.zeros(bins + 1, dtype=torch.float64, device=f.device)
    counts.scatter_add_(0, idx, torch.ones_like(f))
    edges = lo + (hi - lo) * torch.arange(bins + 1, device=f.device, dtype=torch.float64) / bins
    return torch.cat([counts[:bins], edges])


def _device_normalise(
    maps: torch.Tensor,
    normalize: str,
    max_channels: int,
    max_tile: int | None,
    first_channel: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mosaic normalisation of ``(C, H, W)`` on its device, as :func:`views.mosaic` does it.

    Returns the normalised page of ``max_channels`` maps from ``first_channel`` (already
    clamped), ``[lo_all, hi_all]`` (float64) and the tile scale.
    """
    t = maps[first_channel : first_channel + max_channels]
    scale = 1
    if max_tile is not None and max(t.shape[1], t.shape[2]) > max_tile:
        scale = math.ceil(max(t.shape[1], t.shape[2]) / max_tile)
        t = F.avg_pool2d(t[None], kernel_size=scale, stride=scale, ceil_mode=True)[0]
    c = t.shape[0]
    fin = torch.isfinite(t)
    inf = torch.tensor(float("inf"), dtype=t.dtype, device=t.device)
    flat = t.reshape(c, -1)
    ffin = fin.reshape(c, -1)
    lo_c = torch.where(ffin, flat, inf).amin(dim=1)
    hi_c = torch.where(ffin, flat, -inf).amax(dim=1)
    has = torch.isfinite(lo_c)
    lo_c = torch.where(has, lo_c, torch.zeros_like(lo_c))
    hi_c = torch.where(has, hi_c, torch.zeros_like(hi_c))
    any_fin = has.any()
    lo_all = torch.where(any_fin, torch.where(has, lo_c, inf).amin(), torch.zeros_like(inf))
    hi_all = torch.where(any_fin, torch.where(has, hi_c, -inf).amax(), torch.zeros_like(inf))
    if normalize == "shared":
        span = hi_all - lo_all
        safe = torch.where(span > 0, span, torch.ones_like(span))
        norm = torch.where(span > 0, (t - lo_all) / safe, torch.zeros_like(t))
    else:
        span_c = hi_c - lo_c
        safe = torch.where(span_c > 0, span_c, torch.ones_like(span_c))
        norm = (t - lo_c[:, None, None]) / safe[:, None, None]
        norm = torch.where((span_c > 0)[:, None, None], norm, torch.zeros_like(norm))
    norm = norm.clamp(0.0, 1.0)
    norm = torch.where(fin, norm, torch.full_like(norm, float("nan")))
    rng = torch.stack([lo_all, hi_all]).to(torch.float64)
    return norm.contiguous(), rng, scale


def device_grad_cam(
    activation: torch.Tensor, gradient: torch.Tensor, size: tuple[int, int] | None
) -> torch.Tensor:
    """:func:`actviz.core.views.grad_cam` (sample 0) on the tensors' device, without syncs."""
    a, g = as_float(activation), as_float(gradient)
    if a.dim() == 4:
        a, g = a[0], g[0]
    weights = g.mean(dim=(1, 2))
    cam = torch.relu((weights[:, None, None] * a).sum(dim=0))
    cam = torch.nan_to_num(cam, nan=0.0, posinf=0.0, neginf=0.0)
    if size is not None and tuple(cam.shape) != tuple(size):
        cam = F.interpolate(cam[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]
        cam = cam.clamp_min(0)
    peak = cam.max()
    return torch.where(peak > 0, cam / torch.where(peak > 0, peak, 1.0), torch.zeros_like(cam))


def device_saliency(input_grad: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The window's saliency map (max over channels of |grad|, scaled, resized) on the device."""
    g = as_float(input_grad).abs()
    if g.dim() == 4:
        g = g[0]
    g = torch.nan_to_num(g.amax(dim=0), nan=0.0, posinf=0.0, neginf=0.0)
    peak = g.max()
    g = torch.where(peak > 0, g / torch.where(peak > 0, peak, 1.0), torch.zeros_like(g))
    if tuple(g.shape) != tuple(size):
        g = F.interpolate(g[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]
    return g


@dataclass
class DeviceReduction:
    """What :func:`reduce_on_device` brought to the host."""

    layers: dict[str, DeviceLayer]
    extras: dict[str, np.ndarray]


def _to_host(buffer: torch.Tensor) -> torch.Tensor:
    """The frame's single device-to-host copy (a seam the tests count)."""
    return buffer.cpu()


def reduce_on_device(
    layers: Sequence[tuple[str, torch.Tensor | None, torch.Tensor | None]],
    *,
    normalize: str = "channel",
    max_channels: int = MAX_MOSAIC_CHANNELS,
    max_pixels: int = MAX_MOSAIC_PIXELS,
    hist_names: Sequence[str] = (),
    bins: int = HIST_BINS,
    extras: dict[str, torch.Tensor] | None = None,
    first_channels: dict[str, int] | None = None,
) -> DeviceReduction:
    """Reduce layers where they live and bring the results to the host in one copy.

    For each ``(name, output, gradient)`` the statistics, the gradient norm, the mosaic
    normalisation of sample 0 (activation and ``|gradient|``) and, for ``hist_names``, the
    histogram are computed with torch on the tensors' device without any host synchronisation;
    everything is packed into one byte buffer and copied once.

    Parameters
    ----------
    layers
        ``(name, output tensor, gradient tensor or None)``; entries with no output are skipped.
    normalize
        ``"channel"`` or ``"shared"``, as for :func:`actviz.core.views.mosaic`.
    max_channels, max_pixels
        Mosaic limits (see :func:`~actviz.ui.fast_views.max_tile_for`).
    hist_names
        Layers whose histogram is computed here.
    bins
        Histogram bins.
    extras
        More float tensors to bring along in the same copy (Grad-CAM, saliency).
    first_channels
        ``{name: first channel}`` of the mosaic page to show (default 0).

    Returns
    -------
    DeviceReduction
        ``layers``: ``name -> DeviceLayer``; ``extras``: the extra tensors as numpy arrays.
    """
    f64: list[torch.Tensor] = []
    f32: list[torch.Tensor] = []
    plan: list[dict[str, Any]] = []
    hist_set = set(hist_names)
    for name, tensor, grad in layers:
        if tensor is None:
            continue
        entry: dict[str, Any] = {"name": name, "shape": tuple(tensor.shape)}
        f64.append(_device_stats(tensor, grad))
        entry["stats"] = len(f64) - 1
        if name in hist_set:
            f64.append(_device_hist(tensor, bins))
            entry["hist"] = len(f64) - 1
        data = as_float(tensor)
        if data.dim() == 4:
            maps = data[0]
            c, h, w = maps.shape
            tile = max_tile_for(c, h, w, max_channels=max_channels, max_pixels=max_pixels)
            first = views.clamp_first_channel((first_channels or {}).get(name, 0), c)
            norm, rng, scale = _device_normalise(maps, normalize, max_channels, tile, first)
            entry.update(
                scale=scale, norm_shape=tuple(norm.shape), act_shape=(c, h, w), first=first
            )
            f32.append(maps.contiguous())
            entry["act"] = len(f32) - 1
            f32.append(norm)
            entry["act_norm"] = len(f32) - 1
            f64.append(rng)
            entry["act_range"] = len(f64) - 1
            if grad is not None and grad.shape == tensor.shape:
                gmaps = as_float(grad)[0].abs()
                gnorm, grng, _ = _device_normalise(gmaps, normalize, max_channels, tile, first)
                f32.append(gmaps.contiguous())
                entry["grad"] = len(f32) - 1
                f32.append(gnorm)
                entry["grad_norm01"] = len(f32) - 1
                f64.append(grng)
                entry["grad_range"] = len(f64) - 1
        else:
            entry["act_shape"] = tuple(data.shape)
            f32.append(data.contiguous())
            entry["act"] = len(f32) - 1
            if grad is not None and grad.shape == tensor.shape:
                f32.append(as_float(grad).abs().contiguous())
                entry["grad"] = len(f32) - 1
        plan.append(entry)
    extra_index: dict[str, tuple[int, tuple[int, ...]]] = {}
    for key, value in (extras or {}).items():
        f32.append(as_float(value).contiguous())
        extra_index[key] = (len(f32) - 1, tuple(value.shape))
    if not f32 and not f64:
        return DeviceReduction({}, {})
    device = (f64 or f32)[0].device  # parts from elsewhere (a CPU extra) join it first
    parts = [p.reshape(-1).to(device, torch.float64).view(torch.uint8) for p in f64]
    parts += [p.reshape(-1).to(device).view(torch.uint8) for p in f32]
    host = _to_host(torch.cat(parts)).numpy()
    # Slice the host buffer back into arrays (float64 parts first keeps every part aligned).
    out64: list[np.ndarray] = []
    offset = 0
    for p in f64:
        out64.append(np.frombuffer(host, np.float64, p.numel(), offset))
        offset += p.numel() * 8
    out32: list[np.ndarray] = []
    for p in f32:
        out32.append(np.frombuffer(host, np.float32, p.numel(), offset))
        offset += p.numel() * 4
    result: dict[str, DeviceLayer] = {}
    for entry in plan:
        s = dict(zip(_STAT_FIELDS, out64[entry["stats"]].tolist(), strict=True))
        stats = _stats_dict(entry["shape"], s)
        act = out32[entry["act"]].reshape(entry["act_shape"]).copy()
        layer = DeviceLayer(shape=entry["shape"], stats=stats, act=act, normalize=normalize)
        if "act_norm" in entry:
            layer.act_norm = out32[entry["act_norm"]].reshape(entry["norm_shape"]).copy()
            lo, hi = out64[entry["act_range"]].tolist()
            layer.act_range = (lo, hi)
            layer.scale = entry["scale"]
            layer.first_channel = entry["first"]
        if "grad" in entry:
            layer.grad = out32[entry["grad"]].reshape(entry["act_shape"]).copy()
        if "grad_norm01" in entry:
            layer.grad_norm01 = out32[entry["grad_norm01"]].reshape(entry["norm_shape"]).copy()
            lo, hi = out64[entry["grad_range"]].tolist()
            layer.grad_range = (lo, hi)
        if "hist" in entry:
            h = out64[entry["hist"]]
            layer.hist = (h[:bins].astype(np.float32), h[bins:].astype(np.float32))
        result[entry["name"]] = layer
    extras_out = {key: out32[i].reshape(shape).copy() for key, (i, shape) in extra_index.items()}
    return DeviceReduction(result, extras_out)


def _stats_dict(shape: tuple[int, ...], s: dict[str, float]) -> dict[str, Any]:
    n, n_fin, n_nan = int(s["numel"]), int(s["finite"]), int(s["nan"])
    out: dict[str, Any] = {
        "shape": shape,
        "numel": n,
        "nan": n_nan,
        "inf": n - n_fin - n_nan,
        "zero_frac": s["zeros"] / n if n else 0.0,
    }
    if n_fin:
        out.update(mean=s["mean"], std=s["std"], min=s["min"], max=s["max"])
    else:
        out.update(mean=float("nan"), std=float("nan"), min=float("nan"), max=float("nan"))
    out["grad_norm"] = s["grad_norm"] if s["has_grad"] else None
    return out
