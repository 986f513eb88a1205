"""Channel mosaics: a page of a ``(C, H, W)`` map's channels tiled into one normalised image.

The only place a mosaic is normalised: paging, downsampling, normalising and the painted indices."""

from __future__ import annotations

import functools
import math
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from actviz.display.colormaps import PAD_INDEX, to_indices
from actviz.display.layer_views import as_numpy

#: Channels on one mosaic page; the panels page through wider layers.
MAX_MOSAIC_CHANNELS = 256
#: The window picks its page size so a tile is at least this many screen pixels wide.
MIN_TILE_SCREEN_PX = 32
#: The fast (live) variant downsamples to stay under this many pixels (more only costs painting).
MAX_MOSAIC_PIXELS = 512 * 512
#: Tiles at most this many pixels on a side get no padding (it would turn them into speckle).
TINY_TILE_PX = 3
#: Fewest channels a mosaic page holds in the window, however narrow its panel.
MIN_PAGE_CHANNELS = 4


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class ChannelOrder:
    """An order of a layer's channels for its mosaic pages: ``channels`` each once, in tile
    order (e.g. by effect on the target); ``label`` names it."""

    channels: tuple[int, ...]
    label: str = "sorted"

    def __post_init__(self) -> None:
        channels = tuple(map(int, self.channels))
        if len(set(channels)) != len(channels) or any(c < 0 for c in channels):
            raise ValueError("a channel order names each channel (>= 0) once")
        object.__setattr__(self, "channels", channels)

    def position(self, channel: int) -> int | None:
        """Where ``channel`` is in the order (None: not in it)."""
        try:
            return self.channels.index(int(channel))
        except ValueError:
            return None

    def fits(self, total: int) -> bool:
        """Whether every channel of the order exists in a layer of ``total`` channels."""
        return bool(self.channels) and max(self.channels) < int(total)


def page_start(channel: int, size: int, order: ChannelOrder | None = None) -> int:
    """Start of the page of ``size`` tiles holding ``channel`` (a position when ``order``)."""
    size = max(1, int(size))
    at = max(0, int(channel))
    if order is not None:
        at = order.position(at) or 0
    return (at // size) * size


@dataclass(frozen=True, eq=False)  # compared by identity: the pixels are not fields
class Mosaic:
    """A page of a layer's channels tiled into one image (immutable; arrays read-only).

    ``image`` is ``(rows*(tile_h+pad)-pad, cols*(tile_w+pad)-pad)`` float32 in [0, 1], NaN in the
    padding and for non-finite values, and ``indices`` its uint8 colour-table indices (what is
    painted); ``value_range`` the finite min and max shown (a colour bar's legend); ``channels``
    tiles, the ``i``-th at row ``i // cols``, column ``i % cols``; ``scale`` source pixels per tile
    pixel; ``symmetric``: normalised about 0 (0 paints mid-scale); ``order`` a channel order
    other than the natural one, tile ``i`` showing ``order.channels[position + i]``;
    ``scale_range`` the values mapped to 0 and 1 (nominal ``(0, 1)`` / ``(-1, 1)`` per channel)."""

    #: None until first read, then made from ``_tiles`` (live frames paint ``indices`` only).
    _image: np.ndarray | None = field(repr=False, compare=False)
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
    first_channel: int = 0
    symmetric: bool = False
    page_size: int = MAX_MOSAIC_CHANNELS
    scale_range: tuple[float, float] = (0.0, 1.0)
    indices: np.ndarray = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    order: ChannelOrder | None = None
    position: int = 0
    flat_tiles: int = 0  # tiles of one non-zero value (no min-max range): painted mid-scale
    #: ``(tiles (C, H*W), lo, mul, constant, absolute)`` the image is normalised from when read:
    #: the page's values (a view of the layer's, mostly), not a float copy of the page.
    _tiles: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    #: Whether the tiles are a copy of the mosaic's own (picked, downsampled), not the layer's.
    _own_tiles: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._image is None and self._tiles is None:
            raise ValueError("a Mosaic needs its image or its tiles")
        if self._image is not None:
            _frozen(self._image)
        if self.indices is None:
            object.__setattr__(self, "indices", to_indices(self.image, self.levels))
        _frozen(self.indices)

    @property
    def image(self) -> np.ndarray:
        """The float image, made on first read when the mosaic was built straight to indices."""
        if self._image is None and (tiles := self._tiles) is not None:  # (else made meanwhile)
            shape = _geometry(self.channels, self.tile_h, self.tile_w, self.pad)[2].shape
            image = np.full(shape, np.nan, np.float32)
            norm = _normalised(*tiles).reshape(self.channels, self.tile_h, self.tile_w)
            _place(image, np.clip(norm, 0.0, 1.0), self.rows, self.cols, self.pad)
            object.__setattr__(self, "_image", _frozen(image))
            object.__setattr__(self, "_tiles", None)  # nothing of the layer's kept
        return self._image  # type: ignore[return-value]

    @property
    def nbytes(self) -> int:
        """Bytes held now (the image, or tiles of its own, and indices), without making the image."""
        tiles = self._tiles[0] if self._tiles is not None and self._own_tiles else None
        held = self._image if self._image is not None else tiles
        indices = self.indices.nbytes if self.indices is not None else 0
        return int(held.nbytes if held is not None else 0) + int(indices)

    @property
    def last_channel(self) -> int:
        """The layer channel of the last tile (``first_channel - 1`` when empty)."""
        return self.tile_channels[-1] if self.channels else self.first_channel - 1

    @property
    def tile_channels(self) -> tuple[int, ...]:
        """The layer channel of each tile, in tile order."""
        if self.order is not None:
            return self.order.channels[self.position : self.position + self.channels]
        return tuple(range(self.first_channel, self.first_channel + self.channels))

    def shows(self, channel: int) -> bool:
        return int(channel) in self.tile_channels

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
        return self.tile_channels[c] if c < self.channels else None

    def tile_origin(self, channel: int) -> tuple[int, int]:
        """``(y0, x0)`` of layer channel ``channel``'s tile in :attr:`image`."""
        if not self.shows(channel):
            raise IndexError(
                f"channel {channel} is not on this mosaic "
                f"({self.first_channel}..{self.last_channel})"
            )
        row, col = divmod(self.tile_channels.index(int(channel)), self.cols)
        return row * (self.tile_h + self.pad), col * (self.tile_w + self.pad)


def _place(image: np.ndarray, tiles: np.ndarray, rows: int, cols: int, pad: int) -> None:
    """``tiles`` cast into their places in ``image`` through a ``(rows, h, cols, w)`` view."""
    c, h, w = tiles.shape
    step, item = image.strides
    grid = np.ndarray(
        (rows, h, cols, w), image.dtype, image, 0, ((h + pad) * step, step, (w + pad) * item, item)
    )
    full = c // cols
    n = full * cols
    grid[:full] = tiles[:n].reshape(full, cols, h, w).transpose(0, 2, 1, 3)
    if c > n:
        grid[full, :, : c - n] = tiles[n:].transpose(1, 0, 2)


def grid_shape(channels: int, tile_h: int, tile_w: int, aspect: float = 1.6) -> tuple[int, int]:
    """``(rows, cols)`` of the mosaic grid for ``channels`` tiles (about ``aspect`` wide:tall)."""
    cols = min(max(1, round(math.sqrt(channels * tile_h * aspect / max(tile_w, 1)))), channels)
    return math.ceil(channels / cols), cols


def tile_screen_px(channels: int, tile_h: int, tile_w: int, width_px: float) -> float:
    """On-screen width of one tile when a page of ``channels`` tiles fills ``width_px`` pixels."""
    pad = mosaic_pad((tile_h, tile_w))
    _rows, cols = grid_shape(max(1, channels), tile_h, tile_w)
    return float(width_px) * tile_w / max(1, cols * (tile_w + pad) - pad)


def page_image_shape(m: Mosaic, page_size: int, position: int) -> tuple[int, int]:
    """Pixel ``(rows, cols)`` of the page of ``page_size`` of ``m``'s tiles from ``position``."""
    last = len(m.order.channels) if m.order is not None else m.total_channels
    shown = max(0, min(int(page_size), last - max(0, min(int(position), last - 1))))
    rows, cols = grid_shape(shown, m.tile_h, m.tile_w) if shown else (1, 1)
    return rows * (m.tile_h + m.pad) - m.pad, cols * (m.tile_w + m.pad) - m.pad


def page_channels_for(
    total: int,
    tile_h: int,
    tile_w: int,
    width_px: float,
    *,
    max_channels: int = MAX_MOSAIC_CHANNELS,
    min_channels: int = 1,
) -> int:
    """The largest page (at most ``max_channels``) whose tiles are :data:`MIN_TILE_SCREEN_PX`
    wide in ``width_px``, rounded down to whole grid rows where that keeps the columns."""
    limit = max(1, min(int(total), int(max_channels)))
    floor = max(1, min(int(min_channels), limit))
    # The largest n with tiles large enough, by bisection (tiles only shrink as n grows)
    best, over = 1, limit + 1
    while over - best > 1:
        n = (best + over) // 2
        small = tile_screen_px(n, tile_h, tile_w, width_px) < MIN_TILE_SCREEN_PX
        best, over = (best, n) if small else (n, over)
    if best >= limit:  # the whole layer, or the cap: the tiles are large enough
        return limit
    cols = grid_shape(best, tile_h, tile_w)[1]
    whole = (best // cols) * cols
    if whole and grid_shape(whole, tile_h, tile_w)[1] == cols:
        best = whole
    return max(best, floor)


def clamp_first_channel(first_channel: int, total: int) -> int:
    """``first_channel`` limited to a layer of ``total`` channels (0 for an empty layer)."""
    return max(0, min(int(first_channel), int(total) - 1))


def mosaic_pad(shape: Any) -> int:
    """Padding between the tiles of a ``(C, H, W)`` map: 0 for tiny tiles, else 1 pixel."""
    h, w = (int(shape[-2]), int(shape[-1])) if len(shape) >= 2 else (1, 1)
    return 0 if max(h, w) <= TINY_TILE_PX else 1


def max_tile_for(
    channels: int,
    height: int,
    width: int,
    *,
    max_channels: int = MAX_MOSAIC_CHANNELS,
    max_pixels: int = MAX_MOSAIC_PIXELS,
) -> int | None:
    """The ``max_tile`` that keeps a mosaic of ``channels`` maps of ``height x width`` under
    ``max_pixels`` (None when it already fits; padding not counted)."""
    shown = max(1, min(channels, max_channels))
    if shown * height * width <= max_pixels or max(height, width) <= 1:
        return None
    scale = math.ceil(math.sqrt(shown * height * width / max_pixels))
    # The mosaic then downsamples by ceil(side / tile) >= side / tile >= scale.
    return max(1, max(height, width) // scale)


def downsample(maps: np.ndarray, scale: int) -> np.ndarray:
    """Area average of ``(C, H, W)`` over ``scale x scale`` blocks (ceil mode at the borders)."""
    if scale <= 1:
        return maps
    c, h, w = maps.shape
    if h % scale == 0 and w % scale == 0:  # strided sums: faster than avg_pool2d
        blocks = [maps[:, dy::scale, dx::scale] for dy in range(scale) for dx in range(scale)]
        if maps.dtype == np.float32:
            # 0 + b0 + b1 + ... summed as b0 + b1 + ... + 0, one strided pass less: the 0
            # only turns a sum of negative zeros into +0, first or last.
            out = np.add(blocks[0], blocks[1])
            blocks = [*blocks[2:], np.float32(0.0)]
        else:
            out = np.add(blocks.pop(0), np.float32(0.0), dtype=np.float32)
        for block in blocks:
            out += block
        out *= np.float32(1.0 / (scale * scale))
        return out
    t = torch.from_numpy(np.ascontiguousarray(maps, dtype=np.float32))
    return F.avg_pool2d(t[None], kernel_size=scale, stride=scale, ceil_mode=True)[0].numpy()


def _as_maps(fmap: Any) -> np.ndarray:
    data = as_numpy(fmap)
    if data.ndim == 2:
        data = data[None]
    if data.ndim != 3:
        raise ValueError(f"mosaic needs a (C, H, W) map, got shape {tuple(data.shape)}")
    return data


def _channel_ranges(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    lo_c, hi_c = flat.min(axis=1), flat.max(axis=1)
    if np.isfinite(lo_c).all() and np.isfinite(hi_c).all():  # min/max propagate NaN and Inf
        return lo_c, hi_c, True
    masked = np.where(np.isfinite(flat), flat, np.nan)
    with warnings.catch_warnings():  # all-NaN channels are expected here
        warnings.simplefilter("ignore", RuntimeWarning)
        lo_c = np.nan_to_num(np.nanmin(masked, axis=1), nan=0.0)
        hi_c = np.nan_to_num(np.nanmax(masked, axis=1), nan=0.0)
    return lo_c, hi_c, False


#: Each read-only layer's range (a weak reference to it first): re-made pages read it again.
_LAYER_RANGES: dict[int, tuple[weakref.ref, tuple[float, float]]] = {}


def _layer_range(data: np.ndarray) -> tuple[float, float]:
    """The finite (min, max) of all of ``data``'s channels, computed once per read-only array."""
    if (kept := _LAYER_RANGES.get(id(data))) is not None and kept[0]() is data:
        return kept[1]
    lo, hi, _ = _channel_ranges(data.reshape(len(data), -1))
    found = (float(lo.min()), float(hi.max()))
    if not data.flags.writeable:  # (a writable array may change under its identity)
        _LAYER_RANGES[id(data)] = (weakref.ref(data), found)
        if len(_LAYER_RANGES) > 256:
            del _LAYER_RANGES[next(iter(_LAYER_RANGES))]
    return found


def mosaic(
    fmap: Any,
    *,
    normalize: str = "channel",
    first_channel: int = 0,
    max_channels: int | None = None,
    max_tile: int | None = None,
    max_pixels: int | None = None,
    pad: int | None = None,
    value_range: tuple[float, float] | None = None,
    symmetric: bool = False,
    order: ChannelOrder | None = None,
    absolute: bool = False,
) -> Mosaic:
    """Tile a page (``first_channel``, ``max_channels``: clamped) of the channels of ``fmap``, a
    ``(C, H, W)`` array or tensor (``(H, W)``: one channel), into one normalised image.

    ``normalize`` ``"channel"`` scales each tile over its own min..max, ``"shared"`` over one range
    (``value_range``, default the whole layer's finite range); ``symmetric`` over
    ``[-max|x|, +max|x|]``. Tiles larger than ``max_tile`` on a side, or a page over
    ``max_pixels``, are downsampled; ``pad`` pixels of NaN go between tiles (default
    :func:`mosaic_pad`); ``order`` tiles in that order (``first_channel`` counts positions;
    ignored if it does not fit); ``absolute`` tiles ``|fmap|`` (a gradient's magnitude), taken
    of the page only."""
    if normalize not in ("channel", "shared"):
        raise ValueError(f"normalize must be 'channel' or 'shared', not {normalize!r}")
    data = _as_maps(fmap)
    total, h0, w0 = data.shape
    if order is not None and not order.fits(total):
        order = None
    position = clamp_first_channel(first_channel, total if order is None else len(order.channels))
    stop = None if max_channels is None else position + max_channels
    picked = None if order is None else order.channels[position:stop]
    page = shown = data[position:stop] if picked is None else data[list(picked)]
    if absolute:
        shown = np.abs(page)
    first = position if picked is None else picked[0]
    if max_tile is None and max_pixels is not None:
        # From the layer's channels, not the page's: every page of a layer gets one scale.
        cap = max_channels if max_channels is not None else total
        max_tile = max_tile_for(total, h0, w0, max_channels=cap, max_pixels=max_pixels)
    scale = 1
    if max_tile is not None and max(h0, w0) > max_tile:
        scale = math.ceil(max(h0, w0) / max_tile)
    shown = downsample(shown, scale)
    c, h, w = shown.shape
    pad = mosaic_pad(shown.shape) if pad is None else pad
    flat = shown.reshape(c, -1)
    if c and h and w:
        lo_c, hi_c = flat.min(axis=1), flat.max(axis=1)
        lo_all, hi_all = float(lo_c.min()), float(hi_c.max())
        # NaN propagates through min and max, and a channel holding Inf reaches an end.
        if not (finite := math.isfinite(lo_all) and math.isfinite(hi_all)):
            lo_c, hi_c, _ = _channel_ranges(flat)
            lo_all, hi_all = float(lo_c.min()), float(hi_c.max())
            # NaN marks what is not data; Inf would otherwise paint as an end colour.
            shown = np.where(np.isfinite(shown), shown, np.float32(np.nan))
    else:
        lo_c = hi_c = np.zeros(c, np.float32)
        lo_all = hi_all = 0.0
        finite = False  # nothing to paint: the indices come from the (empty) image
    if normalize == "shared":
        if value_range is not None:
            lo_s, hi_s = float(value_range[0]), float(value_range[1])
        elif (c == total and scale == 1) or not data.size:
            lo_s, hi_s = lo_all, hi_all
        else:
            # The layer's range, not the page's: every page (and the export's) on one scale.
            lo_s, hi_s = _layer_range(np.abs(data) if absolute else data)
        if symmetric:
            bound = max(abs(lo_s), abs(hi_s)) or 1.0  # all zeros: mid-scale
            lo_s, hi_s = -bound, bound
        span = hi_s - lo_s
        lo = np.full(c, lo_s, np.float32)
        mul = np.full(c, 1.0 / span if span > 0 else 0.0, np.float32)
        scale_range = (float(lo_s), float(hi_s))
        if span == 0:  # one value: the bar needs a range, with the value where it paints
            scale_range = (0.0, 1.0) if lo_s == 0 else (lo_s - abs(lo_s), lo_s + abs(lo_s))
        constant = np.full(c, span == 0 and lo_s != 0, bool)
    else:
        if symmetric:
            bound_c = np.maximum(np.abs(lo_c), np.abs(hi_c))
            if not bound_c.all():
                bound_c[bound_c == 0] = 1.0  # an all-zero tile: mid-scale
            lo_c, hi_c = -bound_c, bound_c
        span_c = hi_c - lo_c  # float32: min and max of float32 tiles
        lo = lo_c
        positive = None if symmetric else span_c > 0  # symmetric: 2 * bound > 0
        # Ranges in float32, as the tiles: 1 / 0 never taken (0: no signal, or mid-scale).
        if positive is None or positive.all():
            mul, constant = 1.0 / span_c, None
        else:
            mul = np.where(positive, 1.0 / np.where(positive, span_c, 1.0), 0.0).astype(np.float32)
            constant = (span_c == 0) & (lo_c != 0)
        scale_range = (-1.0, 1.0) if symmetric else (0.0, 1.0)
    rows, cols, blank = _geometry(c, h, w, pad)
    # The float image is made from the tiles only when read; live frames need only the indices.
    # A magnitude keeps the signed page it was taken of (made again when read), not a copy.
    signed = absolute and scale == 1 and finite
    kept = page if signed else shown
    own = not np.may_share_memory(kept, data)
    if not own and kept.flags.writeable:  # a caller's array may change: the image is of now
        kept, own = kept.copy(), True
    constant = constant if constant is not None and constant.any() else None
    norm = _normalised(shown.reshape(c, -1), lo, mul, constant) if finite else None
    return Mosaic(
        _image=None,
        indices=_indices_of(norm.reshape(c, h, w), rows, cols, pad, blank) if finite else None,
        _tiles=(kept.reshape(c, -1), lo, mul, constant, signed),
        _own_tiles=own,
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
        symmetric=bool(symmetric),
        page_size=int(max_channels) if max_channels is not None else max(int(total), 1),
        scale_range=scale_range,
        order=order,
        position=position,
        flat_tiles=0 if constant is None else int(constant.sum()),
    )


@functools.lru_cache(maxsize=64)
def _geometry(c: int, h: int, w: int, pad: int) -> tuple[int, int, np.ndarray]:
    """``(rows, cols)`` of ``c`` tiles of ``h x w`` and their index image, all padding."""
    rows, cols = grid_shape(c, h, w) if c else (1, 1)
    # The padding after the last row and column is not kept (unless that leaves no pixels).
    shape = (rows * (h + pad) - pad or rows * (h + pad), cols * (w + pad) - pad or cols * (w + pad))
    return rows, cols, _frozen(np.full(shape, PAD_INDEX, np.uint8))


def _normalised(
    flat: np.ndarray,
    lo: np.ndarray,
    mul: np.ndarray,
    constant: np.ndarray | None,
    absolute: bool = False,
) -> np.ndarray:
    """``(C, H*W)`` tiles (``absolute``: their ``|x|``) as ``(x - lo) * mul`` in float32, a
    constant non-zero tile mid-scale (not "no signal"); not clipped (``Mosaic.image`` and
    :func:`_indices_of` clip)."""
    norm = np.subtract(np.abs(flat) if absolute else flat, lo[:, None], dtype=np.float32)
    norm *= mul[:, None]
    if constant is not None:
        norm += np.where(constant, 0.5, 0.0).astype(np.float32)[:, None]
    return norm


def _indices_of(norm: np.ndarray, rows: int, cols: int, pad: int, blank: np.ndarray) -> np.ndarray:
    """Exactly ``to_indices(image, (0, 1))``, clipped once scaled (1 maps to ``PAD_INDEX``);
    scales ``norm`` (a temporary) in place."""
    work = np.multiply(norm, np.float32(PAD_INDEX), out=norm)
    work.clip(np.float32(0.0), np.float32(PAD_INDEX - 1), out=work)
    image = blank.copy()
    _place(image, work, rows, cols, pad)  # the float-to-uint8 cast truncates, as to_indices does
    return image
