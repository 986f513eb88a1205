"""Mosaic pages in a channel order of their own (the layer panels sorted by effect): tiles hold
the ordered channels, each maps back to its real channel, pages turn through the order."""

from __future__ import annotations

import numpy as np
import pytest

from actviz.display.layer_views import LayerView
from actviz.display.mosaic import ChannelOrder, mosaic, page_start
from actviz.display.prepared import DisplaySpec, PreparedLayer
from actviz.display.repage import with_page


def _normal_maps(c: int = 10, h: int = 4, w: int = 4) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.normal(size=(c, h, w)).astype(np.float32)


def test_ordered_page_tiles_the_ordered_channels():
    x = _normal_maps()
    order = ChannelOrder((7, 2, 9, 0, 5, 1, 3, 4, 6, 8), "by effect")
    m = mosaic(x, first_channel=4, max_channels=4, order=order, pad=0)
    assert m.tile_channels == (5, 1, 3, 4)
    assert (m.first_channel, m.last_channel, m.position, m.channels) == (5, 4, 4, 4)
    # Each tile is its channel, normalised on its own (per channel): same pixels as a
    # natural mosaic of that one channel.
    for c in m.tile_channels:
        y0, x0 = m.tile_origin(c)
        tile = m.image[y0 : y0 + m.tile_h, x0 : x0 + m.tile_w]
        np.testing.assert_allclose(tile, mosaic(x[c : c + 1], pad=0).image, atol=1e-6)
        assert m.channel_at(x0 + 0.5, y0 + 0.5) == c
        assert m.shows(c)
    assert not m.shows(7) and not m.shows(2)
    with pytest.raises(IndexError):
        m.tile_origin(7)
    # The shared scale is the layer's, whatever the order.
    shared = mosaic(x, normalize="shared", first_channel=0, max_channels=3, order=order)
    assert shared.scale_range == pytest.approx((float(x.min()), float(x.max())))


def test_natural_mosaic_is_unchanged_and_bad_orders():
    x = _normal_maps()
    m = mosaic(x, first_channel=4, max_channels=4)
    assert m.order is None and m.position == 4 and m.tile_channels == (4, 5, 6, 7)
    # An order naming channels the layer lacks (another model's) falls back to the natural one.
    other = mosaic(x, max_channels=4, order=ChannelOrder((12, 0, 1)))
    assert other.order is None and other.tile_channels == (0, 1, 2, 3)
    with pytest.raises(ValueError):
        ChannelOrder((1, 1, 2))


def test_page_rule_counts_positions_in_the_order():
    order = ChannelOrder((7, 2, 9, 0, 5, 1, 3, 4, 6, 8))
    assert page_start(9, 4, order) == 0  # channel 9 is third: page 0
    assert page_start(6, 4, order) == 8
    assert page_start(6, 4) == 4  # natural: the page holding channel 6
    assert page_start(42, 4, order) == 0  # not in the order: the first page
    spec = DisplaySpec(channel_pages={"a": 3}, page_channels={"a": 4}, channel_orders={"a": order})
    assert spec.first_channel("a") == 4  # channel 3 is at position 6


def test_with_page_reorders_and_goes_back():
    x = _normal_maps()
    view = LayerView("maps", x, (1, *x.shape), "")
    layer = PreparedLayer("a", "Conv2d", (1, *x.shape), 1, view, mosaic(x, max_channels=4),
                          None, None, {})  # fmt: skip
    order = ChannelOrder(tuple(int(c) for c in np.argsort(-np.abs(x).max(axis=(1, 2)))))
    sorted_ = with_page(layer, 0, order=order)
    assert sorted_.mosaic.tile_channels == order.channels[:4]
    assert with_page(sorted_, 0) is sorted_  # unset: the layer's order kept
    second = with_page(sorted_, 4)
    assert second.mosaic.tile_channels == order.channels[4:8]
    back = with_page(sorted_, 0, order=None)
    assert back.mosaic.order is None and back.mosaic.tile_channels == (0, 1, 2, 3)
