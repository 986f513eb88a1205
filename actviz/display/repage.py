"""Pages of a prepared result: mosaics made again from the views a layer holds (new objects)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from actviz.display import colormaps
from actviz.display.layer_views import LayerView
from actviz.display.mosaic import MAX_MOSAIC_CHANNELS, ChannelOrder, Mosaic, mosaic
from actviz.display.prepared import PreparedLayer, RunResult


@dataclass(frozen=True)
class ReusableMosaics:
    """A layer's mosaics as shown now, for a panel off screen: no tensor, no capture."""

    shape: tuple[int, ...] | None
    mosaic: Mosaic
    grad_mosaic: Mosaic | None


def reusable_mosaics(result: RunResult | None) -> dict[str, ReusableMosaics]:
    """The mosaics of ``result``'s layers (for :func:`prepare`'s ``reuse``)."""
    if result is None:
        return {}
    return {
        name: ReusableMosaics(layer.shape, layer.mosaic, layer.grad_mosaic)
        for name, layer in result.layers.items()
        if layer.mosaic is not None
    }


def symmetric_for(colormap: str, view: LayerView | None) -> bool:
    """Whether the activation mosaic of ``view`` is normalised symmetrically about 0: under
    the :data:`~actviz.display.colormaps.AUTO` colour map, for a signed layer (not |gradient|)."""
    signed = view is not None and view.kind == "maps" and bool(view.signed)
    return colormaps.painting(colormap, signed=signed)[1]


def layer_mosaics(
    view: LayerView | None,
    grad_view: LayerView | None,
    normalize: str,
    first: int,
    max_tile: int | None = None,
    max_pixels: int | None = None,
    page: int = MAX_MOSAIC_CHANNELS,
    symmetric: bool = False,
    order: ChannelOrder | None = None,
) -> tuple[Mosaic | None, Mosaic | None]:
    """The activation and |gradient| mosaics of one page of a maps layer (``None`` for a layer
    that is not maps, or without a gradient): both on the same page, tile size and order."""
    if view is None or view.kind != "maps":
        return None, None
    options = dict(
        normalize=normalize,
        first_channel=first,
        max_channels=page,
        max_tile=max_tile,
        max_pixels=max_pixels,
        order=order,
    )
    grad = None
    if grad_view is not None and grad_view.kind == "maps":
        # |g| of the page from the signed values (the whole layer's |g| is made only if read).
        signed = getattr(grad_view, "magnitude_of", None)
        data = grad_view.data if signed is None else signed
        grad = mosaic(data, absolute=signed is not None, **options)  # type: ignore[arg-type]
    return mosaic(view.data, symmetric=symmetric, **options), grad  # type: ignore[arg-type]


def with_page(
    layer: PreparedLayer,
    first_channel: int,
    normalize: str | None = None,
    *,
    page_size: int | None = None,
    symmetric: bool | None = None,
    order: ChannelOrder | None | Any = ...,
) -> PreparedLayer:
    """A new ``layer`` showing the page from ``first_channel`` (a position in ``order``), with
    the same tile scale; ``layer`` itself when nothing changes. Unset options keep the layer's."""
    old, view = layer.mosaic, layer.view
    if old is None or view is None or view.kind != "maps":
        return layer
    c = view.data.shape[0]
    order = old.order if order is ... else order
    if order is not None and not order.fits(c):
        order = None  # another layer's order: the natural one (as mosaic() does)
    last = len(order.channels) if order is not None else c
    first = max(0, min(int(first_channel), last - 1))
    normalize = normalize or old.normalize
    page = old.page_size if page_size is None else max(1, int(page_size))
    symmetric = old.symmetric if symmetric is None else bool(symmetric)
    now = (old.position, old.normalize, old.page_size, old.symmetric, old.order)
    if (first, normalize, page, symmetric, order) == now:
        return layer
    return _remade(layer, normalize, first, page, symmetric, order)


def current_mosaics(layer: PreparedLayer) -> PreparedLayer:
    """``layer`` with mosaics of its own views (a new layer when its mosaics were stale)."""
    old, view = layer.mosaic, layer.view
    if not layer.stale_mosaics or old is None or view is None or view.kind != "maps":
        return layer
    return _remade(layer, old.normalize, old.position, old.page_size, old.symmetric, old.order)


def _remade(
    layer: PreparedLayer,
    normalize: str,
    first: int,
    page: int,
    symmetric: bool,
    order: ChannelOrder | None,
) -> PreparedLayer:
    """``layer`` with new mosaics of its maps view, at the tile scale of its mosaics."""
    _, h, w = layer.view.data.shape
    side, scale = max(h, w), layer.mosaic.scale  # the tile size downsampling by exactly ``scale``
    tiles = (t for t in range(side, 0, -1) if math.ceil(side / t) >= scale)
    max_tile = next(tiles) if scale > 1 else None
    views = layer.view, layer.grad_view
    act_m, grad_m = layer_mosaics(
        *views, normalize, first, max_tile, page=page, symmetric=symmetric, order=order
    )
    return replace(layer, mosaic=act_m, grad_mosaic=grad_m, stale_mosaics=False)


def renormalised(
    result: RunResult,
    normalize: str,
    pages: Mapping[str, int] | None = None,
    *,
    page_channels: Mapping[str, int] | None = None,
    colormap: str | None = None,
) -> RunResult:
    """A new ``result`` (it may be pinned) with every mosaic renormalised, unset options kept."""
    old = result.spec
    spec = replace(
        old,
        normalize=normalize,
        channel_pages=dict(old.channel_pages if pages is None else pages),
        page_channels=dict(old.page_channels if page_channels is None else page_channels),
        colormap=old.colormap if colormap is None else colormap,
    )
    layers = {}
    for name, layer in result.layers.items():
        if name in spec.channel_pages:
            first = spec.first_channel(name, layer.view)  # the page holding the channel asked for
        else:
            first = layer.mosaic.position if layer.mosaic else 0
        layers[name] = with_page(
            layer,
            first,
            normalize,
            page_size=spec.page_size(name, layer.view),
            symmetric=symmetric_for(spec.colormap, layer.view),
            order=spec.channel_orders.get(name),
        )
    return replace(result, layers=layers, spec=spec)
