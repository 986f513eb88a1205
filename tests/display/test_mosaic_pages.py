"""Page sizes chosen from a panel's width, symmetric normalisation, one shared scale per layer."""

from __future__ import annotations

import numpy as np
import pytest

from actviz.display.colormaps import AUTO, resolve
from actviz.display.mosaic import (
    MAX_MOSAIC_CHANNELS,
    grid_shape,
    mosaic,
    page_channels_for,
    tile_screen_px,
)


def test_page_size_keeps_tiles_at_least_32_screen_pixels():
    # ResNet-18 layer2 at 224 px: 128 maps of 28x28. A 310 px wide mosaic holds 9 columns.
    n = page_channels_for(128, 28, 28, 310)
    assert n == 54 and grid_shape(n, 28, 28) == (6, 9)  # a full rectangle
    assert tile_screen_px(n, 28, 28, 310) == pytest.approx(310 * 28 / (9 * 29 - 1))
    assert tile_screen_px(n, 28, 28, 310) >= 32
    # One more column would make the tiles smaller than 32 px.
    assert tile_screen_px(n + 10, 28, 28, 310) < 32
    # Wide enough: the whole layer on one page; never more than the cap; never empty.
    assert page_channels_for(128, 28, 28, 600) == 128
    assert page_channels_for(4096, 1, 1, 100_000) == MAX_MOSAIC_CHANNELS
    assert page_channels_for(128, 28, 28, 10) == 1
    # A floor for narrow panels (smaller tiles, but a few to find one's way).
    assert page_channels_for(128, 28, 28, 10, min_channels=16) == 16
    assert page_channels_for(8, 28, 28, 10, min_channels=16) == 8
    assert page_channels_for(0, 28, 28, 300) == 1


def test_symmetric_normalisation_puts_zero_at_mid_scale():
    x = np.array([[[-2.0, 1.0], [0.0, 0.5]], [[0.0, 4.0], [1.0, 2.0]]], np.float32)
    per = mosaic(x, symmetric=True, pad=0)
    # Channel 0 over [-2, 2], channel 1 over [-4, 4].
    np.testing.assert_allclose(per.image[:, :2], (x[0] + 2) / 4)
    np.testing.assert_allclose(per.image[:, 2:], (x[1] + 4) / 8)
    assert per.symmetric and per.scale_range == (-1.0, 1.0)
    shared = mosaic(x, normalize="shared", symmetric=True, pad=0)
    np.testing.assert_allclose(shared.image[:, :2], (x[0] + 4) / 8)
    assert shared.scale_range == (-4.0, 4.0)
    plain = mosaic(x, normalize="shared", pad=0)
    assert plain.scale_range == (-2.0, 4.0) and not plain.symmetric
    # An all-zero channel is mid-scale (0), not the low end.
    zeros = mosaic(np.zeros((1, 2, 2), np.float32), symmetric=True)
    np.testing.assert_array_equal(zeros.image, 0.5)


def test_one_value_on_a_shared_scale_reads_on_the_bar_where_it_is_painted():
    """Comparing a run with itself gives |A - B| all zeros: its bar read -1..1 (a range of
    zero width left the canvas's previous one) over black tiles."""
    zeros = mosaic(np.zeros((4, 3, 3), np.float32), normalize="shared", pad=0)
    painted = zeros.image[np.isfinite(zeros.image)]  # (empty grid cells are NaN)
    assert painted.size == 36 and np.all(painted == 0.0)  # at the bottom of the scale...
    assert zeros.scale_range == (0.0, 1.0)  # ...which reads 0
    for value, bar in ((2.0, (0.0, 4.0)), (-3.0, (-6.0, 0.0))):
        one = mosaic(np.full((2, 3, 3), value, np.float32), normalize="shared", pad=0)
        painted = one.image[np.isfinite(one.image)]
        assert painted.size == 18 and np.all(painted == 0.5)  # mid-scale...
        assert one.scale_range == bar and sum(bar) / 2 == value  # ...which reads the value


def test_shared_scale_is_the_layers_on_every_page():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 4, 4)).astype(np.float32)
    x[7] *= 10  # the largest values are on the second page
    page0 = mosaic(x, normalize="shared", max_channels=5)
    whole = mosaic(x, normalize="shared")
    lo, hi = float(x.min()), float(x.max())
    assert page0.scale_range == pytest.approx((lo, hi))
    y0, x0 = page0.tile_origin(2)
    np.testing.assert_allclose(
        page0.image[y0 : y0 + 4, x0 : x0 + 4], (x[2] - lo) / (hi - lo), atol=1e-6
    )
    y1, x1 = whole.tile_origin(2)
    np.testing.assert_array_equal(
        page0.image[y0 : y0 + 4, x0 : x0 + 4], whole.image[y1 : y1 + 4, x1 : x1 + 4]
    )
    assert page0.value_range == pytest.approx((float(x[:5].min()), float(x[:5].max())))


def test_a_read_only_layers_range_is_found_once_for_all_its_pages(monkeypatch):
    import actviz.display.mosaic as mosaic_module

    x = np.random.default_rng(1).normal(size=(12, 4, 4)).astype(np.float32)
    x.setflags(write=False)  # as a LayerView's data
    calls = []
    ranges = mosaic_module._channel_ranges
    monkeypatch.setattr(mosaic_module, "_channel_ranges", lambda f: calls.append(f) or ranges(f))
    pages = [mosaic(x, normalize="shared", first_channel=f, max_channels=4) for f in (0, 4, 8, 0)]
    assert len(calls) == 1  # the channel view closing re-made the pages: no pass over x again
    assert {p.scale_range for p in pages} == {(float(x.min()), float(x.max()))}
    y = x.copy()  # writable: read again each time
    for _ in range(2):
        mosaic(y, normalize="shared", max_channels=4)
    assert len(calls) == 3


def test_auto_colour_map_per_layer():
    assert resolve(AUTO, signed=True) == "CET-D1"
    assert resolve(AUTO, signed=False) == "viridis"
    assert resolve(AUTO, signed=True, gradient=True) == "inferno"
    assert resolve("magma", signed=True) == "magma"


def test_page_size_is_found_without_trying_every_count(monkeypatch):
    # Every panel's page is chosen again on each resize (40 panels: one event-loop turn);
    # trying each count up to the answer cost ~1.3 ms a panel. The same answers, by bisection,
    # as the largest count whose tiles are at least 32 px wide.
    from actviz.display import mosaic as mosaic_module

    tried: list[int] = []
    original = mosaic_module.tile_screen_px

    def counted(channels: int, *args: float) -> float:
        tried.append(channels)
        return original(channels, *args)

    monkeypatch.setattr(mosaic_module, "tile_screen_px", counted)
    for total, h, w, width in [(512, 4, 4, 800), (128, 28, 28, 310), (4096, 1, 1, 3000)]:
        tried.clear()
        n = page_channels_for(total, h, w, width)
        assert len(tried) <= 2 * int(np.log2(total)) + 2, (total, len(tried))
        largest = max(k for k in range(1, total + 1) if original(k, h, w, width) >= 32 or k == 1)
        assert n <= largest and (n == total or original(n, h, w, width) >= 32)


@pytest.mark.parametrize(
    ("channels", "tile", "page", "position", "ordered"),
    [
        (64, (8, 8), 16, 0, False),
        (64, (8, 8), 24, 48, False),  # the last page holds 16
        (10, (3, 3), 4, 9, False),  # tiny tiles: no padding; one tile on the last page
        (12, (5, 9), 5, 3, True),
        (7, (6, 4), 256, 0, False),
    ],
)
def test_a_pages_shape_is_known_before_it_is_made(channels, tile, page, position, ordered):
    from actviz.display.mosaic import ChannelOrder, mosaic, page_image_shape

    rng = np.random.default_rng(channels)
    maps = rng.random((channels, *tile), dtype=np.float32)
    order = ChannelOrder(tuple(rng.permutation(channels).tolist())) if ordered else None
    shown = mosaic(maps, max_channels=8, order=order)
    made = mosaic(maps, first_channel=position, max_channels=page, order=order)
    assert page_image_shape(shown, page, position) == made.image.shape


def test_a_mosaic_counts_its_flat_tiles():
    maps = np.stack([np.full((4, 4), 2.0), np.zeros((4, 4)), np.arange(16.0).reshape(4, 4)])
    maps = maps.astype(np.float32)
    # Per channel: the tile of one non-zero value is flat (mid-scale); all zeros is no signal.
    assert mosaic(maps).flat_tiles == 1
    assert mosaic(maps).image[:4, :4] == pytest.approx(np.full((4, 4), 0.5))
    assert mosaic(maps, normalize="shared").flat_tiles == 0
    # One value over the whole page under one shared scale: every tile is flat.
    assert mosaic(np.full((3, 4, 4), -1.5, np.float32), normalize="shared").flat_tiles == 3
    assert mosaic(maps, symmetric=True).flat_tiles == 0  # +-max |x|: its value is an end
