"""Numpy arrays ready to display or export: mosaics, magnitudes, saliency, Grad-CAM, statistics.

Everything returned here is float32 (or uint8 for RGB) and C-contiguous, so a widget can hand it
straight to pyqtgraph and an exporter straight to PIL. No Qt here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from actviz.core.capture import Capture, LayerRecord
from actviz.core.index_images import PAD_INDEX, to_indices

__all__ = [
    "COLORMAPS",
    "LayerView",
    "Mosaic",
    "PAD_INDEX",
    "clamp_first_channel",
    "colorize",
    "grad_cam",
    "gradient_flow",
    "grid_shape",
    "histogram",
    "layer_stats",
    "layer_view",
    "magnitude",
    "mosaic",
    "overlay",
    "saliency",
    "tensor_stats",
    "to_indices",
    "top_k",
]


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.is_complex():
            x = x.abs()
        return x.to("cpu", torch.float32).numpy()
    return np.asarray(x, dtype=np.float32)


# --------------------------------------------------------------------------- mosaic


@dataclass
class Mosaic:
    """All channels of a ``(C, H, W)`` map tiled into one image.

    Attributes
    ----------
    image
        ``(rows*(tile_h+pad)-pad, cols*(tile_w+pad)-pad)`` float32 in [0, 1], NaN in the padding
        and for non-finite values.
    levels
        Display levels of ``image``: always ``(0.0, 1.0)``.
    value_range
        Finite min and max of the data shown (for a colour bar legend).
    channels
        Number of channels shown; the ``i``-th shown channel sits at row ``i // cols``, column
        ``i % cols``.
    total_channels
        Channels in the layer (more than ``channels`` when capped by ``max_channels``).
    scale
        How many source pixels one tile pixel covers (1 unless ``max_tile`` downsampled).
    first_channel
        The layer channel of the first tile: a page of a layer with more channels than one
        mosaic shows holds channels ``first_channel .. first_channel + channels - 1``.
    """

    image: np.ndarray
    levels: tuple[float, float]
    value_range: tuple[float, float]
    rows: int
    cols: int
    tile_h: int
    tile_w: int
    pad: int
    channels: int
    total_channels: int
    normalize: str
    scale: int = 1
    #: ``image`` as uint8 colour-table indices (:func:`to_indices` of ``image`` at ``levels``)
    #: when computed ahead, off the GUI thread; None: the panel computes them.
    indices: np.ndarray | None = field(default=None, repr=False, compare=False)
    first_channel: int = 0

    @property
    def last_channel(self) -> int:
        """The layer channel of the last tile (``first_channel - 1`` when empty)."""
        return self.first_channel + self.channels - 1

    def channel_at(self, x: float, y: float) -> int | None:
        """The layer channel under image pixel ``(x, y)`` (column, row), or None for padding."""
        if x < 0 or y < 0:
            return None
        step_x, step_y = self.tile_w + self.pad, self.tile_h + self.pad
        col, row = int(x // step_x), int(y // step_y)
        if col >= self.cols or row >= self.rows:
            return None
        if x - col * step_x >= self.tile_w or y - row * step_y >= self.tile_h:
            return None
        c = row * self.cols + col
        return self.first_channel + c if c < self.channels else None

    def tile_origin(self, channel: int) -> tuple[int, int]:
        """``(y0, x0)`` of layer channel ``channel``'s tile in :attr:`image`."""
        c = channel - self.first_channel
        if not 0 <= c < self.channels:
            raise IndexError(
                f"channel {channel} is not on this mosaic "
                f"({self.first_channel}..{self.last_channel})"
            )
        return (c // self.cols) * (self.tile_h + self.pad), (c % self.cols) * (
            self.tile_w + self.pad
        )

    def pixel_in_tile(self, x: float, y: float) -> tuple[int, int]:
        """``(ty, tx)`` inside its tile, in source pixels, for image pixel ``(x, y)``."""
        tx = int(x) % (self.tile_w + self.pad)
        ty = int(y) % (self.tile_h + self.pad)
        return ty * self.scale, tx * self.scale


def grid_shape(channels: int, tile_h: int, tile_w: int, aspect: float = 1.6) -> tuple[int, int]:
    """``(rows, cols)`` of the mosaic grid :func:`mosaic` uses for ``channels`` tiles."""
    # Columns chosen so the whole mosaic is about `aspect` times wider than tall.
    cols = max(1, round(math.sqrt(channels * tile_h * aspect / max(tile_w, 1))))
    cols = min(cols, channels)
    rows = math.ceil(channels / cols)
    return rows, cols


def mosaic(
    fmap: Any,
    *,
    normalize: str = "channel",
    max_tile: int | None = None,
    max_channels: int | None = None,
    pad: int = 1,
    value_range: tuple[float, float] | None = None,
    first_channel: int = 0,
) -> Mosaic:
    """Tile the channels of a ``(C, H, W)`` map into one normalised image.

    Parameters
    ----------
    fmap
        ``(C, H, W)`` array or tensor (a ``(H, W)`` map counts as one channel).
    normalize
        ``"channel"``: each tile stretched to its own min..max; ``"shared"``: one range for all.
    max_tile
        Downsample (area average) tiles larger than this many pixels on a side.
    max_channels
        Show at most ``max_channels`` channels (one page), starting at ``first_channel``.
    pad
        Pixels of NaN between tiles.
    value_range
        Fixed ``(lo, hi)`` for ``"shared"`` normalisation (e.g. to compare runs).
    first_channel
        The first channel shown (a page of a layer with more than ``max_channels``); clamped
        to the layer's channels.

    Returns
    -------
    Mosaic
    """
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    if isinstance(fmap, torch.Tensor):
        t = fmap.detach().to("cpu", torch.float32)
    else:
        t = torch.from_numpy(np.ascontiguousarray(fmap, dtype=np.float32))
    if t.dim() == 2:
        t = t[None]
    if t.dim() != 3:
        raise ValueError(f"mosaic needs a (C, H, W) map, got shape {tuple(t.shape)}")
    total = t.shape[0]
    first = clamp_first_channel(first_channel, total)
    t = t[first : None if max_channels is None else first + max_channels]
    scale = 1
    if max_tile is not None and max(t.shape[1], t.shape[2]) > max_tile:
        scale = math.ceil(max(t.shape[1], t.shape[2]) / max_tile)
        # Area average keeps thin structures visible, unlike plain striding.
        t = F.avg_pool2d(t[None], kernel_size=scale, stride=scale, ceil_mode=True)[0]
    data = t.numpy()
    c, h, w = data.shape
    finite = np.isfinite(data)
    all_finite = bool(finite.all())
    if all_finite:
        lo_all, hi_all = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
    else:
        vals = data[finite]
        lo_all, hi_all = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 0.0)
    if normalize == "shared":
        lo, hi = value_range if value_range is not None else (lo_all, hi_all)
        span = hi - lo
        norm = (data - lo) / span if span > 0 else np.zeros_like(data)
    else:
        flat = data.reshape(c, -1)
        if all_finite:
            lo_c, hi_c = flat.min(axis=1), flat.max(axis=1)
        else:
            masked = np.where(finite.reshape(c, -1), flat, np.nan)
            with warnings.catch_warnings():  # all-NaN channels are expected here
                warnings.simplefilter("ignore", RuntimeWarning)
                lo_c = np.nan_to_num(np.nanmin(masked, axis=1), nan=0.0)
                hi_c = np.nan_to_num(np.nanmax(masked, axis=1), nan=0.0)
        span_c = hi_c - lo_c
        safe = np.where(span_c > 0, span_c, 1.0)
        norm = (data - lo_c[:, None, None]) / safe[:, None, None]
        norm[span_c <= 0] = 0.0
    norm = np.clip(norm, 0.0, 1.0, out=norm if norm.dtype == np.float32 else None).astype(
        np.float32, copy=False
    )
    if not all_finite:
        norm[~finite] = np.nan
    rows, cols = grid_shape(c, h, w)
    tiles = np.full((rows * cols, h + pad, w + pad), np.nan, dtype=np.float32)
    tiles[:c, :h, :w] = norm
    image = tiles.reshape(rows, cols, h + pad, w + pad).transpose(0, 2, 1, 3)
    image = image.reshape(rows * (h + pad), cols * (w + pad))
    image = np.ascontiguousarray(
        image[: image.shape[0] - pad or None, : image.shape[1] - pad or None]
    )
    return Mosaic(
        image=image,
        levels=(0.0, 1.0),
        value_range=(lo_all, hi_all),
        rows=rows,
        cols=cols,
        tile_h=h,
        tile_w=w,
        pad=pad,
        channels=c,
        total_channels=total,
        normalize=normalize,
        scale=scale,
        first_channel=first,
    )


def clamp_first_channel(first_channel: int, total: int) -> int:
    """``first_channel`` limited to a layer of ``total`` channels (0 for an empty layer)."""
    return max(0, min(int(first_channel), int(total) - 1))


def magnitude(grad: Any) -> np.ndarray:
    """Absolute value of a gradient, float32, same shape."""
    return np.ascontiguousarray(np.abs(_np(grad)), dtype=np.float32)


# --------------------------------------------------------------------------- layer views


@dataclass
class LayerView:
    """How one layer's output is best shown.

    ``kind`` is ``"maps"`` (``data`` is ``(C, H, W)``), ``"bars"`` (``(C,)``), ``"heatmap"``
    (2-D, e.g. tokens x features) or ``"scalar"`` (0-d).
    """

    kind: str
    data: np.ndarray
    shape: tuple[int, ...]
    description: str


def layer_view(tensor: Any, sample: int = 0) -> LayerView:
    """Pick a display for a layer output by its rank.

    Parameters
    ----------
    tensor
        A layer output (tensor or array). Batched layouts are assumed: ``(N, C, H, W)`` ->
        maps, ``(N, C)`` -> bars, ``(N, L, D)`` -> heatmap; 1-D -> bars, one element -> scalar.
    sample
        Which batch element to show.

    Returns
    -------
    LayerView
    """
    data = _np(tensor)
    shape = tuple(data.shape)
    if data.size == 1:
        return LayerView("scalar", np.asarray(data.reshape(()), np.float32), shape, "scalar")
    if data.ndim == 1:
        return LayerView("bars", np.ascontiguousarray(data), shape, f"{shape[0]} values")
    s = min(sample, data.shape[0] - 1)
    pick = data[s]
    batch = f" (sample {s} of {data.shape[0]})" if data.shape[0] > 1 else ""
    if data.ndim == 2:
        return LayerView("bars", np.ascontiguousarray(pick), shape, f"{shape[1]} units{batch}")
    if data.ndim == 3:
        return LayerView(
            "heatmap", np.ascontiguousarray(pick), shape, f"{shape[1]} x {shape[2]}{batch}"
        )
    if data.ndim == 4:
        c, h, w = pick.shape
        return LayerView(
            "maps", np.ascontiguousarray(pick), shape, f"{c} channels of {h}x{w}{batch}"
        )
    if data.ndim == 5:
        mid = pick.shape[1] // 2
        c, _, h, w = pick.shape
        return LayerView(
            "maps",
            np.ascontiguousarray(pick[:, mid]),
            shape,
            f"{c} channels of {h}x{w}, depth slice {mid} of {pick.shape[1]}{batch}",
        )
    flat = pick.reshape(pick.shape[0], -1)
    return LayerView("heatmap", np.ascontiguousarray(flat), shape, f"{shape} flattened{batch}")


# --------------------------------------------------------------------------- attribution


def saliency(input_grad: Any, sample: int = 0) -> np.ndarray:
    """Saliency map: max over channels of ``|d target / d input|``, scaled to [0, 1].

    Parameters
    ----------
    input_grad
        ``(N, C, H, W)``, ``(C, H, W)`` or ``(H, W)`` gradient of the target w.r.t. the input.
        Other ranks give a ``(1, D)`` or 2-D strip.
    sample
        Batch element for 4-D gradients.
    """
    g = np.abs(_np(input_grad))
    if g.ndim == 4:
        g = g[min(sample, g.shape[0] - 1)]
    if g.ndim == 3:
        g = g.max(axis=0)
    elif g.ndim == 1:
        g = g[None]
    elif g.ndim == 0:
        g = g.reshape(1, 1)
    elif g.ndim > 3:
        g = g.reshape(g.shape[0], -1)
    g = np.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
    peak = float(g.max()) if g.size else 0.0
    out = g / peak if peak > 0 else np.zeros_like(g)
    return np.ascontiguousarray(out, dtype=np.float32)


def grad_cam(
    activation: Any,
    gradient: Any,
    size: tuple[int, int] | None = None,
    sample: int = 0,
) -> np.ndarray:
    """Grad-CAM: ReLU of the gradient-weighted sum of a layer's channels, scaled to [0, 1].

    Parameters
    ----------
    activation, gradient
        The layer's output and d target / d output, ``(N, C, H, W)`` or ``(C, H, W)``.
    size
        ``(H, W)`` to upsample to (bilinear), e.g. the input image size.
    sample
        Batch element.

    Raises
    ------
    ValueError
        If the layer has no spatial output.
    """
    a = torch.as_tensor(_np(activation))
    g = torch.as_tensor(_np(gradient))
    if a.shape != g.shape:
        raise ValueError(f"activation {tuple(a.shape)} and gradient {tuple(g.shape)} differ")
    if a.dim() == 4:
        s = min(sample, a.shape[0] - 1)
        a, g = a[s], g[s]
    if a.dim() != 3 or a.shape[1] < 1 or a.shape[2] < 1:
        raise ValueError(
            f"Grad-CAM needs a layer with a spatial (N, C, H, W) output, got {tuple(a.shape)}"
        )
    weights = g.mean(dim=(1, 2))
    cam = torch.relu((weights[:, None, None] * a).sum(dim=0))
    cam = torch.nan_to_num(cam, nan=0.0, posinf=0.0, neginf=0.0)
    if size is not None and tuple(cam.shape) != tuple(size):
        cam = F.interpolate(cam[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]
        cam = cam.clamp_min(0)
    peak = float(cam.max()) if cam.numel() else 0.0
    cam = cam / peak if peak > 0 else torch.zeros_like(cam)
    return np.ascontiguousarray(cam.numpy(), dtype=np.float32)


# --------------------------------------------------------------------------- statistics


def tensor_stats(t: Any) -> dict[str, Any]:
    """Mean, std, min, max (finite values), fraction of zeros, NaN and Inf counts, shape."""
    data = _np(t)
    finite = np.isfinite(data)
    vals = data[finite] if not finite.all() else data.reshape(-1)
    n = int(data.size)
    out: dict[str, Any] = {
        "shape": tuple(data.shape),
        "numel": n,
        "nan": int(np.isnan(data).sum()),
        "inf": int(np.isinf(data).sum()),
        "zero_frac": float((data == 0).sum() / n) if n else 0.0,
    }
    if vals.size:
        v64 = vals.astype(np.float64)
        out.update(
            mean=float(v64.mean()), std=float(v64.std()), min=float(v64.min()), max=float(v64.max())
        )
    else:
        out.update(mean=float("nan"), std=float("nan"), min=float("nan"), max=float("nan"))
    return out


def layer_stats(record: LayerRecord) -> dict[str, Any]:
    """Statistics of a layer's output plus the L2 norm of its gradient (None without one)."""
    t = record.tensor
    stats = tensor_stats(t) if t is not None else tensor_stats(np.zeros(0, np.float32))
    stats["name"] = record.name
    stats["type"] = record.module_type
    g = record.grad
    stats["grad_norm"] = (
        float(torch.linalg.vector_norm(g.detach().double())) if g is not None else None
    )
    return stats


def gradient_flow(cap: Capture) -> tuple[list[str], np.ndarray]:
    """Per captured layer (execution order), the L2 norm of d target / d its output."""
    names, norms = [], []
    for name in cap.names:
        g = cap[name].grad
        names.append(name)
        norms.append(float(torch.linalg.vector_norm(g.double())) if g is not None else np.nan)
    return names, np.asarray(norms, dtype=np.float32)


def histogram(values: Any, bins: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of the finite values: ``(counts, edges)`` with ``len(edges) == bins + 1``."""
    data = _np(values).reshape(-1)
    data = data[np.isfinite(data)]
    if data.size == 0:
        return np.zeros(bins, np.float32), np.linspace(0, 1, bins + 1, dtype=np.float32)
    lo, hi = float(data.min()), float(data.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(data, bins=bins, range=(lo, hi))
    return counts.astype(np.float32), edges.astype(np.float32)


def top_k(
    output: Any, k: int = 5, categories: list[str] | None = None, sample: int = 0
) -> list[tuple[int, str, float]]:
    """Top-k classes of a ``(N, C)`` or ``(C,)`` output as ``(index, label, probability)``.

    Probabilities are the softmax of the logits. Returns [] for outputs that are not class
    scores (other ranks, or a single value).
    """
    t = torch.as_tensor(_np(output))
    if t.dim() == 2 and t.shape[0] == 0:
        return []  # no rows, e.g. a detector's boxes when it found nothing
    if t.dim() == 2:
        t = t[min(sample, t.shape[0] - 1)]
    if t.dim() != 1 or t.numel() < 2:
        return []
    probs = torch.softmax(t.double(), dim=0)
    values, idx = torch.topk(probs, min(k, t.numel()))
    rows = []
    for p, i in zip(values.tolist(), idx.tolist(), strict=True):
        label = categories[i] if categories and i < len(categories) else f"class {i}"
        rows.append((int(i), label, float(p)))
    return rows


# --------------------------------------------------------------------------- colour

# A few anchor colours per map, interpolated to 256 entries: no matplotlib needed.
_ANCHORS: dict[str, list[tuple[int, int, int]]] = {
    "viridis": [
        (68, 1, 84),
        (72, 40, 120),
        (62, 74, 137),
        (49, 104, 142),
        (38, 130, 142),
        (31, 158, 137),
        (53, 183, 121),
        (109, 205, 89),
        (180, 222, 44),
        (253, 231, 37),
    ],
    "inferno": [
        (0, 0, 4),
        (31, 12, 72),
        (85, 15, 109),
        (136, 34, 106),
        (186, 54, 85),
        (227, 89, 51),
        (249, 140, 10),
        (249, 201, 50),
        (252, 255, 164),
    ],
    "magma": [
        (0, 0, 4),
        (28, 16, 68),
        (79, 18, 123),
        (129, 37, 129),
        (181, 54, 122),
        (229, 80, 100),
        (251, 135, 97),
        (254, 194, 135),
        (252, 253, 191),
    ],
    "plasma": [
        (13, 8, 135),
        (84, 2, 163),
        (139, 10, 165),
        (185, 50, 137),
        (219, 92, 104),
        (244, 136, 73),
        (254, 188, 43),
        (240, 249, 33),
    ],
    "jet": [
        (0, 0, 128),
        (0, 0, 255),
        (0, 128, 255),
        (0, 255, 255),
        (128, 255, 128),
        (255, 255, 0),
        (255, 128, 0),
        (255, 0, 0),
        (128, 0, 0),
    ],
    "gray": [(0, 0, 0), (255, 255, 255)],
}
COLORMAPS: list[str] = list(_ANCHORS)


def lut(name: str) -> np.ndarray:
    """A ``(256, 3)`` uint8 lookup table for colormap ``name``."""
    if name not in _ANCHORS:
        raise ValueError(f"unknown colormap {name!r}; choose from {', '.join(COLORMAPS)}")
    anchors = np.asarray(_ANCHORS[name], dtype=np.float64)
    pos = np.linspace(0, 1, len(anchors))
    x = np.linspace(0, 1, 256)
    table = np.stack([np.interp(x, pos, anchors[:, i]) for i in range(3)], axis=1)
    return np.round(table).astype(np.uint8)


def colorize(
    image01: np.ndarray, cmap: str = "viridis", background: tuple[int, int, int] = (255, 255, 255)
) -> np.ndarray:
    """Map a ``(H, W)`` image in [0, 1] to ``(H, W, 3)`` uint8; NaN becomes ``background``."""
    img = np.asarray(image01, dtype=np.float32)
    nan = np.isnan(img)
    idx = np.clip(np.nan_to_num(img, nan=0.0) * 255 + 0.5, 0, 255).astype(np.uint8)
    rgb = lut(cmap)[idx]
    if nan.any():
        rgb[nan] = background
    return np.ascontiguousarray(rgb)


def overlay(
    rgb: np.ndarray, heat01: np.ndarray, alpha: float = 0.5, cmap: str = "jet"
) -> np.ndarray:
    """Blend a ``(h, w)`` heat map in [0, 1] over an ``(H, W, 3)`` uint8 image.

    The heat map is resized (bilinear) to the image; the result is ``(H, W, 3)`` uint8.
    """
    base = np.asarray(rgb)
    if base.ndim == 2:
        base = np.repeat(base[..., None], 3, axis=2)
    base = base[..., :3].astype(np.float32)
    heat = torch.as_tensor(np.asarray(heat01, dtype=np.float32))
    if heat.dim() != 2:
        raise ValueError(f"overlay needs a 2-D heat map, got shape {tuple(heat.shape)}")
    if tuple(heat.shape) != base.shape[:2]:
        heat = F.interpolate(
            heat[None, None], size=base.shape[:2], mode="bilinear", align_corners=False
        )[0, 0]
    colored = colorize(heat.clamp(0, 1).numpy(), cmap).astype(np.float32)
    out = (1 - alpha) * base + alpha * colored
    return np.ascontiguousarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))
