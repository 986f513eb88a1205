"""Per-frame preparation for live mode: the panels' arrays at a fraction of ``prepare_result``'s cost.

:func:`actviz.ui.session.prepare_result` prepares everything a result could ever show: a
histogram and a Grad-CAM for every layer, the module tree, float64 statistics. Live mode runs it
many times a second, so :func:`prepare_live` builds the same :class:`~actviz.ui.session.RunResult`
(through the same :func:`~actviz.ui.session.assemble_result`) but computes only what is on
screen and defers the rest until the user asks for it:

* statistics in five cheap single-threaded NumPy passes (a finite min and max double as the
  finite check), falling back to :func:`actviz.core.views.tensor_stats` when a layer holds NaN/Inf;
* histograms only for the layers named in ``eager_hist`` (the selected one); the others are
  computed when first read (:class:`LazyHistLayer`);
* Grad-CAM only for the layer shown; the other layers' maps are computed when first read
  (:class:`LazyGradCams`);
* the module tree only when an output shape changed (``tree=None`` otherwise, which the window
  reads as "keep the tree you have");
* mosaics limited to :data:`MAX_MOSAIC_PIXELS` by downsampling tiles, so painting stays cheap;
* torch's intra-op pool held at ``threads`` (default 1) while preparing, for callers that
  prepare alone: on a loaded 2-core machine, waking a second OpenMP thread for each small
  reduction costs more than the work. The thread count is global in torch, so live mode, which
  prepares beside the next capture, passes None and leaves it alone.

When the records are on a GPU, :func:`reduce_on_device` computes the statistics, histograms and
normalised mosaics there and copies everything to the host in one transfer per frame (not one
per layer). ``actviz.capture`` moves records to the CPU today, so that path is taken only with
records kept on the device.

No Qt here: this module can move to ``actviz.core`` unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from actviz.core import views
from actviz.core.capture import Capture, CaptureCancelled
from actviz.core.structures import first_tensor
from actviz.ui.session import (
    MAX_MOSAIC_CHANNELS,
    PreparedLayer,
    RunRequest,
    RunResult,
    assemble_result,
    default_gradcam_layer,
    display_image,
    gradcam_candidates,
    mosaic_pad,
    output_shapes,
    prepare_layer,
    saliency_at_image,
)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_MOSAIC_PIXELS",
    "ShownMosaics",
    "DeviceLayer",
    "LazyGradCams",
    "LazyHistLayer",
    "fast_stats",
    "max_tile_for",
    "prepare_live",
    "reduce_on_device",
    "shown_mosaics",
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


def _as_float(t: torch.Tensor) -> torch.Tensor:
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
    data = _as_float(t)
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


def _grad_norm(g: torch.Tensor | None) -> float | None:
    if g is None:
        return None
    f = _as_float(g)
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
# CPU preparation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownMosaics:
    """A layer's mosaics as shown now: stand-ins while its panel is off screen.

    Holds no tensor and no capture, so keeping it does not keep the previous frame alive.
    """

    shape: tuple[int, ...] | None
    mosaic: views.Mosaic
    grad_mosaic: views.Mosaic | None


def shown_mosaics(result: RunResult | None) -> dict[str, ShownMosaics]:
    """The mosaics of ``result``'s layers (for :func:`prepare_live`'s ``previous_mosaics``)."""
    if result is None:
        return {}
    return {
        name: ShownMosaics(layer.shape, layer.mosaic, layer.grad_mosaic)
        for name, layer in result.layers.items()
        if layer.mosaic is not None
    }


def _prepare_maps_layer(
    cap: Capture,
    name: str,
    normalize: str,
    eager_hist: bool,
    max_pixels: int,
    previous: ShownMosaics | None = None,
) -> PreparedLayer | None:
    """The fast path for a 4-D float output; None when the layer needs the general path.

    With ``previous`` (a layer off screen), its mosaics are reused instead of recomputed when
    the shapes match; views, statistics and histogram are always this frame's.
    """
    rec = cap[name]
    tensor = rec.tensor
    if tensor is None or tensor.dim() != 4 or not tensor.is_floating_point():
        return None
    stats = fast_stats(tensor)
    stats["name"] = rec.name
    stats["type"] = rec.module_type
    grad = rec.grad
    stats["grad_norm"] = _grad_norm(grad)
    view = views.layer_view(tensor)
    c, h, w = view.data.shape
    tile = max_tile_for(c, h, w, max_pixels=max_pixels)
    reuse = previous is not None and previous.shape == tuple(tensor.shape)
    mosaic = previous.mosaic if reuse else _mosaic(view.data, normalize, tile)
    grad_view = grad_mosaic = None
    if grad is not None and grad.shape == tensor.shape:
        # |gradient| of the sample shown only (views.magnitude would copy the whole batch).
        g0 = np.abs(_as_float(grad[0]).numpy())
        grad_view = views.LayerView("maps", g0, tuple(grad.shape), view.description)
        if reuse and previous.grad_mosaic is not None:  # type: ignore[union-attr]
            grad_mosaic = previous.grad_mosaic
        else:
            grad_mosaic = _mosaic(grad_view.data, normalize, tile)
    layer = LazyHistLayer(
        hist_source=tensor,
        name=name,
        module_type=rec.module_type,
        shape=tuple(tensor.shape),
        calls=len(cap.calls(name)),
        view=view,
        mosaic=mosaic,
        grad_view=grad_view,
        grad_mosaic=grad_mosaic,
        stats=stats,
        hist=None,
    )
    if eager_hist:
        _ = layer.hist
    return layer


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


def _mosaic(maps: np.ndarray, normalize: str, max_tile: int | None) -> views.Mosaic:
    """The mosaic live mode shows: the first :data:`MAX_MOSAIC_CHANNELS` channels, tiles
    downsampled to ``max_tile``, laid out and normalised like :func:`views.mosaic`."""
    total = int(maps.shape[0])
    shown = maps[:MAX_MOSAIC_CHANNELS]
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
            )
        shown = small
    pad = mosaic_pad(shown.shape)
    m = fast_mosaic(shown, normalize, pad)
    if m is None:
        m = views.mosaic(shown, normalize=normalize, pad=pad)
    return dataclasses.replace(m, total_channels=total, scale=scale)


def prepare_live(
    cap: Capture,
    request: RunRequest,
    *,
    previous_shapes: dict[str, tuple[int, ...]] | None = None,
    eager_hist: Sequence[str] = (),
    threads: int | None = 1,
    max_pixels: int = MAX_MOSAIC_PIXELS,
    should_stop: Callable[[], bool] | None = None,
    device_path: bool | None = None,
    mosaic_layers: Collection[str] | None = None,
    previous_mosaics: dict[str, ShownMosaics] | None = None,
) -> RunResult:
    """Turn a capture into panel-ready arrays, computing only what is on screen.

    Parameters
    ----------
    cap
        The frame's capture.
    request
        Layers with panels, normalisation, image, categories and Grad-CAM layer.
    previous_shapes
        The previous frame's ``output_shapes``; when they are equal the module tree is not
        rebuilt (``result.tree`` is None).
    eager_hist
        Layers whose histogram is computed now (the selected layer); the others on first read.
    threads
        torch intra-op threads while preparing (None leaves the setting alone).
    max_pixels
        Pixel budget of one mosaic (tiles are downsampled above it).
    should_stop
        Polled between layers; True raises ``CaptureCancelled``.
    device_path
        Reduce with :func:`reduce_on_device` (one host copy per frame); None: when the records
        are not on the CPU.
    mosaic_layers
        Layers whose panels are on screen: only their mosaics are built; the others reuse
        ``previous_mosaics`` (same shape and normalisation) until they scroll into view.
        None builds every mosaic.
    previous_mosaics
        :func:`shown_mosaics` of the result shown now.

    Returns
    -------
    RunResult
        Same fields as :func:`actviz.ui.session.prepare_result`; ``grad_cams`` is a
        :class:`LazyGradCams` and the layers are :class:`LazyHistLayer` where possible.
    """
    with torch_threads(threads):
        return _prepare_live(
            cap,
            request,
            previous_shapes,
            set(eager_hist),
            max_pixels,
            should_stop,
            device_path,
            None if mosaic_layers is None else set(mosaic_layers),
            previous_mosaics,
        )


def _prepare_live(
    cap: Capture,
    request: RunRequest,
    previous_shapes: dict[str, tuple[int, ...]] | None,
    eager_hist: set[str],
    max_pixels: int,
    should_stop: Callable[[], bool] | None,
    device_path: bool | None = None,
    mosaic_layers: set[str] | None = None,
    previous_mosaics: dict[str, ShownMosaics] | None = None,
) -> RunResult:
    from actviz.core.tree import module_tree

    def check() -> None:
        if should_stop is not None and should_stop():
            raise CaptureCancelled("cancelled while preparing the views")

    shown = [n for n in request.layers if n in cap]
    order = [n for n in cap.names if n in shown]
    image = display_image(cap.inputs, request.image)
    size = image.shape[:2] if image is not None else None

    def compute_cam(name: str) -> np.ndarray:
        rec = cap[name]
        try:
            return views.grad_cam(rec.tensor, rec.grad, size=size)
        except (ValueError, RuntimeError) as exc:
            log.debug("no Grad-CAM for %s: %s", name, exc)
            return np.zeros(size or (1, 1), dtype=np.float32)

    grad_cams = LazyGradCams(gradcam_candidates(cap, image), compute_cam)
    gradcam_default = default_gradcam_layer(request.gradcam_layer, grad_cams, order)

    on_device = device_path
    if on_device is None:
        on_device = any((t := cap[n].tensor) is not None and t.device.type != "cpu" for n in order)
    device_layers: dict[str, DeviceLayer] = {}
    saliency_map: np.ndarray | None = None
    saliency_message = ""
    if on_device:
        # Everything the panels show travels in one device-to-host copy.
        extras: dict[str, torch.Tensor] = {}
        if gradcam_default is not None:
            rec = cap[gradcam_default]
            extras["gradcam"] = _device_grad_cam(rec.tensor, rec.grad, size)
        in_grad = first_tensor(cap.input_grads)
        if in_grad is not None and in_grad.dim() in (3, 4) and image is not None:
            extras["saliency"] = _device_saliency(in_grad, image.shape[:2])
        reduced = reduce_on_device(
            [(n, cap[n].tensor, cap[n].grad) for n in order],
            normalize=request.normalize,
            max_pixels=max_pixels,
            hist_names=[n for n in order if n in eager_hist],
            extras=extras,
        )
        device_layers = reduced.layers
        if "gradcam" in reduced.extras:
            grad_cams.set_computed(gradcam_default, reduced.extras["gradcam"])
        if "saliency" in reduced.extras:
            saliency_map = reduced.extras["saliency"]
    if saliency_map is None:
        saliency_map, saliency_message = saliency_at_image(cap.input_grads, image)
    layers: dict[str, PreparedLayer] = {}
    for name in order:
        check()
        layer: PreparedLayer | None
        if name in device_layers:
            layer = device_layers[name].prepared(cap, name)
        else:
            stand_in = None
            if mosaic_layers is not None and name not in mosaic_layers and previous_mosaics:
                stand_in = previous_mosaics.get(name)
                if stand_in is not None and stand_in.mosaic.normalize != request.normalize:
                    stand_in = None
            layer = _prepare_maps_layer(
                cap, name, request.normalize, name in eager_hist, max_pixels, stand_in
            )
        if layer is None:
            layer = prepare_layer(cap, name, request.normalize)
        layers[name] = layer
    shapes = output_shapes(cap)
    check()
    if gradcam_default is not None:
        _ = grad_cams[gradcam_default]  # the one on screen: computed here, off the GUI thread
    tree = None
    if previous_shapes is None or previous_shapes != shapes:
        tree = module_tree(request.model, cap)
    return assemble_result(
        cap,
        request,
        layers=layers,
        order=order,
        image=image,
        saliency=saliency_map,
        saliency_message=saliency_message,
        grad_cams=grad_cams,
        tree=tree,
        shapes=shapes,
        gradcam_default=gradcam_default,
    )


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
                act_mosaic = _mosaic(view.data, self.normalize, None)
            if self.grad is not None:
                grad_view = views.layer_view(self.grad)
                if grad_view.kind == "maps":
                    grad_mosaic = _mosaic(grad_view.data, self.normalize, None)
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
    f = _as_float(t).reshape(-1)
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
    f = _as_float(t).reshape(-1).to(torch.float64)
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
    maps: torch.Tensor, normalize: str, max_channels: int, max_tile: int | None
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mosaic normalisation of ``(C, H, W)`` on its device, as :func:`views.mosaic` does it.

    Returns the normalised capped maps, ``[lo_all, hi_all]`` (float64) and the tile scale.
    """
    t = maps[:max_channels]
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


def _device_grad_cam(
    activation: torch.Tensor, gradient: torch.Tensor, size: tuple[int, int] | None
) -> torch.Tensor:
    """:func:`actviz.core.views.grad_cam` (sample 0) on the tensors' device, without syncs."""
    a, g = _as_float(activation), _as_float(gradient)
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


def _device_saliency(input_grad: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The window's saliency map (max over channels of |grad|, scaled, resized) on the device."""
    g = _as_float(input_grad).abs()
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
        Mosaic limits (see :func:`max_tile_for`).
    hist_names
        Layers whose histogram is computed here.
    bins
        Histogram bins.
    extras
        More float tensors to bring along in the same copy (Grad-CAM, saliency).

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
        data = _as_float(tensor)
        if data.dim() == 4:
            maps = data[0]
            c, h, w = maps.shape
            tile = max_tile_for(c, h, w, max_channels=max_channels, max_pixels=max_pixels)
            norm, rng, scale = _device_normalise(maps, normalize, max_channels, tile)
            entry.update(scale=scale, norm_shape=tuple(norm.shape), act_shape=(c, h, w))
            f32.append(maps.contiguous())
            entry["act"] = len(f32) - 1
            f32.append(norm)
            entry["act_norm"] = len(f32) - 1
            f64.append(rng)
            entry["act_range"] = len(f64) - 1
            if grad is not None and grad.shape == tensor.shape:
                gmaps = _as_float(grad)[0].abs()
                gnorm, grng, _ = _device_normalise(gmaps, normalize, max_channels, tile)
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
                f32.append(_as_float(grad).abs().contiguous())
                entry["grad"] = len(f32) - 1
        plan.append(entry)
    extra_index: dict[str, tuple[int, tuple[int, ...]]] = {}
    for key, value in (extras or {}).items():
        f32.append(_as_float(value).contiguous())
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
