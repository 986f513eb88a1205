"""Live mode's per-layer arrays at a fraction of the window path's cost (no Qt).

* :func:`fast_stats`: :func:`actviz.core.views.tensor_stats` in five cheap single-threaded NumPy
  passes (a finite min and max double as the finite check), falling back to the exact path
  when a layer holds NaN/Inf;
* :func:`live_mosaic` / :func:`fast_mosaic`: :func:`actviz.core.views.mosaic` written straight
  into the tile grid, tiles downsampled to stay under :data:`MAX_MOSAIC_PIXELS` so painting
  stays cheap (:func:`max_tile_for`);
* :class:`LazyHistLayer` and :class:`LazyGradCams`: histograms and Grad-CAM maps computed the
  first time the window reads them;
* :func:`torch_threads`: torch's intra-op pool held at a thread count while preparing, for
  callers that prepare alone: on a loaded 2-core machine, waking a second OpenMP thread for
  each small reduction costs more than the work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from actviz.core import views
from actviz.ui.session import MAX_MOSAIC_CHANNELS, PreparedLayer, attach_indices, mosaic_pad

__all__ = [
    "HIST_BINS",
    "MAX_MOSAIC_PIXELS",
    "LazyGradCams",
    "LazyHistLayer",
    "as_float",
    "fast_mosaic",
    "fast_stats",
    "grad_norm",
    "live_mosaic",
    "max_tile_for",
    "turn_to_page",
    "torch_threads",
]

#: A mosaic is downsampled (area average) to stay under this many pixels: a grid cell is a few
#: hundred pixels wide, so more pixels only cost painting time.
MAX_MOSAIC_PIXELS = 512 * 512
HIST_BINS = 64


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch's intra-op pool at ``n`` threads (None: unchanged)."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def max_tile_for(
    channels: int,
    height: int,
    width: int,
    *,
    max_channels: int = MAX_MOSAIC_CHANNELS,
    max_pixels: int = MAX_MOSAIC_PIXELS,
) -> int | None:
    """The ``max_tile`` that keeps a mosaic of ``channels`` maps of ``height x width`` under
    ``max_pixels`` (None when it already fits).

    Parameters
    ----------
    channels, height, width
        Shape of the ``(C, H, W)`` map.
    max_channels
        Channels the mosaic shows at most.
    max_pixels
        Pixel budget of the whole mosaic (padding not counted).

    Returns
    -------
    int or None
        Pass it to :func:`actviz.core.views.mosaic` as ``max_tile``.
    """
    shown = max(1, min(channels, max_channels))
    if shown * height * width <= max_pixels or max(height, width) <= 1:
        return None
    scale = math.ceil(math.sqrt(shown * height * width / max_pixels))
    side = max(height, width)
    # views.mosaic uses scale = ceil(side / max_tile); find the largest tile giving >= scale.
    tile = max(1, side // scale)
    while tile > 1 and math.ceil(side / tile) < scale:
        tile -= 1
    return tile


def as_float(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached as a real float32 tensor (complex values by magnitude), copying only
    when the dtype differs."""
    t = t.detach()
    if t.is_complex():
        return t.abs().float()
    return t if t.dtype == torch.float32 else t.float()


def fast_stats(t: torch.Tensor) -> dict[str, Any]:
    """:func:`actviz.core.views.tensor_stats` in five cheap passes for all-finite tensors.

    A finite min and max prove the whole tensor finite (both propagate NaN and return ±Inf).
    The mean is a float32 pairwise sum and the std a two-pass float32 sum of squares of the
    centred values (relative error below 1e-5, far below the 4 digits shown; float64 casts cost
    5x). Tensors with NaN/Inf take the exact NumPy path.

    CPU float32 tensors are reduced with NumPy, single-threaded: torch's thread count is
    global, so its reductions would take both cores from the capture running beside a live
    frame's preparation; and ``torch.count_nonzero`` is ~8x slower than NumPy's (5.2 against
    0.7 ms for 800k floats, measured here). The zero count is ``count_nonzero(a == 0)``: about
    0.3 ms, most of it without the GIL, which the GUI thread needs to paint.
    """
    data = as_float(t)
    f = data.reshape(-1)
    n = f.numel()
    if n == 0:
        return views.tensor_stats(data)
    if f.device.type == "cpu" and f.dtype == torch.float32:
        a = f.numpy()
        lo, hi = float(a.min()), float(a.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return views.tensor_stats(data)
        mean = float(a.sum()) / n
        centred = a - np.float32(mean)
        var = _sum_of_squares(centred) / n
        # Counting the zeros of a boolean mask: the comparison runs without the GIL, and
        # counting booleans is fast; count_nonzero on floats holds the GIL for ~1 ms a layer.
        zeros = int(np.count_nonzero(a == 0))
    else:
        mn, mx = torch.aminmax(f)
        lo, hi = float(mn), float(mx)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return views.tensor_stats(data)
        mean = float(f.sum()) / n
        c = f - mean
        var = float(torch.dot(c, c)) / n
        zeros = n - int(torch.count_nonzero(f))
    return {
        "shape": tuple(t.shape),
        "numel": n,
        "nan": 0,
        "inf": 0,
        "zero_frac": float(zeros) / n,
        "mean": mean,
        "std": math.sqrt(var),
        "min": lo,
        "max": hi,
    }


def _sum_of_squares(a: np.ndarray) -> float:
    # einsum's own loop, not BLAS: OpenBLAS threads dot products above 10k elements.
    return float(np.einsum("i,i->", a, a))


def grad_norm(g: torch.Tensor | None) -> float | None:
    """L2 norm of gradient ``g`` (None for no gradient), single-threaded on CPU float32."""
    if g is None:
        return None
    f = as_float(g)
    if f.device.type == "cpu" and f.dtype == torch.float32:
        return math.sqrt(_sum_of_squares(f.reshape(-1).numpy()))
    return float(torch.linalg.vector_norm(f))


# --------------------------------------------------------------------------------------------
# lazy pieces
# --------------------------------------------------------------------------------------------


class LazyHistLayer(PreparedLayer):
    """A :class:`PreparedLayer` whose histogram is computed the first time it is read.

    Parameters
    ----------
    hist_source
        The tensor to histogram (the layer's output); None means no histogram.
    **fields
        The :class:`PreparedLayer` fields (``hist`` may be given to set it eagerly).
    """

    def __init__(self, *, hist_source: torch.Tensor | None = None, **fields: Any) -> None:
        self._hist_source = hist_source
        self._hist: tuple[np.ndarray, np.ndarray] | None = None
        super().__init__(**fields)

    @property  # type: ignore[override]
    def hist(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self._hist is None and self._hist_source is not None:
            self._hist = views.histogram(self._hist_source, bins=HIST_BINS)
            self._hist_source = None
        return self._hist

    @hist.setter
    def hist(self, value: tuple[np.ndarray, np.ndarray] | None) -> None:
        self._hist = value
        if value is not None:
            self._hist_source = None

    @property
    def hist_ready(self) -> bool:
        """Whether the histogram was already computed (tests, diagnostics)."""
        return self._hist is not None or self._hist_source is None


class LazyGradCams(dict):
    """``{layer: Grad-CAM map}`` whose maps are computed when first read.

    Keys are known up front (the selector lists them); values are filled by ``compute(name)``
    on first access through ``[]``, ``get``, ``values`` or ``items``.
    """

    def __init__(self, names: Iterable[str], compute: Callable[[str], np.ndarray]) -> None:
        super().__init__((name, None) for name in names)
        self._compute = compute

    def __getitem__(self, name: str) -> np.ndarray:
        value = super().__getitem__(name)
        if value is None:
            value = self._compute(name)
            super().__setitem__(name, value)
        return value

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if name in self else default

    def values(self) -> list[np.ndarray]:  # type: ignore[override]
        return [self[name] for name in self]

    def items(self) -> list[tuple[str, np.ndarray]]:  # type: ignore[override]
        return [(name, self[name]) for name in self]

    def set_computed(self, name: str, value: np.ndarray) -> None:
        """Store a map computed elsewhere (on the device)."""
        super().__setitem__(name, value)

    def computed(self) -> list[str]:
        """Names whose map exists already."""
        return [name for name, value in dict.items(self) if value is not None]


# --------------------------------------------------------------------------------------------
# mosaics
# --------------------------------------------------------------------------------------------


def _block_mean(maps: np.ndarray, scale: int) -> np.ndarray | None:
    """Area average over ``scale x scale`` blocks by strided sums (several times faster than
    ``avg_pool2d`` on one thread); None when the sides are not multiples of ``scale``."""
    c, h, w = maps.shape
    if h % scale or w % scale:
        return None
    out = np.zeros((c, h // scale, w // scale), dtype=np.float32)
    for dy in range(scale):
        for dx in range(scale):
            out += maps[:, dy::scale, dx::scale]
    out *= np.float32(1.0 / (scale * scale))
    return out


def fast_mosaic(maps: np.ndarray, normalize: str = "channel", pad: int = 1) -> views.Mosaic | None:
    """:func:`actviz.core.views.mosaic` of an all-finite ``(C, H, W)`` map, in three passes.

    The normalised values are written straight into the padded tile grid (subtract, scale,
    clip in place) instead of normalising a copy and tiling it afterwards. Same layout, values
    and metadata as ``views.mosaic(maps, normalize=..., pad=...)``; returns None when the map
    holds NaN/Inf (the caller then uses ``views.mosaic``, which masks them).
    """
    from actviz.core.views import grid_shape  # the layout must be exactly views.mosaic's

    c, h, w = maps.shape
    if c == 0 or h == 0 or w == 0:
        return None
    flat = maps.reshape(c, -1)
    lo_c = flat.min(axis=1)
    hi_c = flat.max(axis=1)
    if not (np.isfinite(lo_c).all() and np.isfinite(hi_c).all()):
        return None
    lo_all, hi_all = float(lo_c.min()), float(hi_c.max())
    if normalize == "shared":
        span = hi_all - lo_all
        lo = np.full(c, lo_all, np.float32)
        scale = np.full(c, 1.0 / span if span > 0 else 0.0, np.float32)
    elif normalize == "channel":
        span_c = hi_c - lo_c
        lo = lo_c.astype(np.float32)
        scale = np.where(span_c > 0, 1.0 / np.where(span_c > 0, span_c, 1.0), 0.0)
        scale = scale.astype(np.float32)
    else:
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    rows, cols = grid_shape(c, h, w)
    grid = np.full((rows, h + pad, cols, w + pad), np.nan, dtype=np.float32)

    def fill(dst: np.ndarray, src: np.ndarray, lo_: np.ndarray, sc: np.ndarray) -> None:
        # dst (r, h, cols', w) strided view into the grid; src (r*cols', h, w) channels.
        r, k = dst.shape[0], dst.shape[2]
        s4 = src.reshape(r, k, h, w).transpose(0, 2, 1, 3)
        np.subtract(s4, lo_.reshape(r, 1, k, 1), out=dst)
        np.multiply(dst, sc.reshape(r, 1, k, 1), out=dst)
        np.clip(dst, 0.0, 1.0, out=dst)

    full = c // cols
    if full:
        n = full * cols
        fill(grid[:full, :h, :, :w], maps[:n], lo[:n], scale[:n])
    rest = c - full * cols
    if rest:
        n = full * cols
        fill(grid[full : full + 1, :h, :rest, :w], maps[n:], lo[n:], scale[n:])
    image = grid.reshape(rows * (h + pad), cols * (w + pad))
    image = np.ascontiguousarray(
        image[: image.shape[0] - pad or None, : image.shape[1] - pad or None]
    )
    return views.Mosaic(
        image=image,
        levels=(0.0, 1.0),
        value_range=(lo_all, hi_all),
        rows=rows,
        cols=cols,
        tile_h=h,
        tile_w=w,
        pad=pad,
        channels=c,
        total_channels=c,
        normalize=normalize,
        scale=1,
    )


def live_mosaic(
    maps: np.ndarray, normalize: str, max_tile: int | None, first_channel: int = 0
) -> views.Mosaic:
    """The mosaic live mode shows: a page of :data:`MAX_MOSAIC_CHANNELS` channels from
    ``first_channel``, tiles downsampled to ``max_tile``, laid out and normalised like
    :func:`views.mosaic`."""
    total = int(maps.shape[0])
    first = views.clamp_first_channel(first_channel, total)
    shown = maps[first : first + MAX_MOSAIC_CHANNELS]
    scale = 1
    if max_tile is not None and max(maps.shape[1], maps.shape[2]) > max_tile:
        scale = math.ceil(max(maps.shape[1], maps.shape[2]) / max_tile)
        small = _block_mean(shown, scale)
        if small is None:  # sides not multiples of scale: views' ceil-mode pooling
            return views.mosaic(
                maps,
                normalize=normalize,
                max_channels=MAX_MOSAIC_CHANNELS,
                max_tile=max_tile,
                pad=mosaic_pad(
                    (math.ceil(maps.shape[1] / scale), math.ceil(maps.shape[2] / scale))
                ),
                first_channel=first,
            )
        shown = small
    pad = mosaic_pad(shown.shape)
    m = fast_mosaic(shown, normalize, pad)
    if m is None:
        m = views.mosaic(shown, normalize=normalize, pad=pad)
    return dataclasses.replace(m, total_channels=total, scale=scale, first_channel=first)


def turn_to_page(layer: PreparedLayer, first_channel: int) -> bool:
    """Rebuild ``layer``'s mosaics in place to show the channel page from ``first_channel``.

    The views hold every channel, so no capture is needed: the new page keeps the old
    mosaics' normalisation and tile downsampling and gets its colour-table indices. Returns False, changing nothing, when the
    layer has no mosaic or already shows that page.
    """
    old, view = layer.mosaic, layer.view
    if old is None or view is None or view.kind != "maps":
        return False
    c, h, w = view.data.shape
    first = views.clamp_first_channel(first_channel, c)
    if first == old.first_channel:
        return False
    tile = _max_tile_of_scale(max(h, w), old.scale)
    layer.mosaic = live_mosaic(view.data, old.normalize, tile, first)
    if layer.grad_mosaic is not None and layer.grad_view is not None:
        layer.grad_mosaic = live_mosaic(layer.grad_view.data, old.normalize, tile, first)
    attach_indices([layer])
    return True


def _max_tile_of_scale(side: int, scale: int) -> int | None:
    """The ``max_tile`` that makes :func:`live_mosaic` downsample a ``side``-pixel tile by
    exactly ``scale`` (None for 1)."""
    if scale <= 1:
        return None
    # scale = ceil(side / max_tile): the largest such tile (scales came from such a tile).
    return next(t for t in range(side, 0, -1) if math.ceil(side / t) >= scale)
