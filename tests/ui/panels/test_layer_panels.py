"""Layer panels that use their space: tiles >= 32 px, square pixels, visible gaps, channel
numbers, colour bars as tall as the mosaic, and the "auto" colour map per layer (real window)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPointF, QRectF
from torch import nn

from actviz.display.mosaic import (
    MIN_PAGE_CHANNELS,
    MIN_TILE_SCREEN_PX,
    grid_shape,
    mosaic,
    page_channels_for,
)
from actviz.ui.panels.tile_grid import LABEL_MIN_TILE_PX
from actviz.ui.window.main_window import MainWindow

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()


def _uniform_image(size: int = 224) -> torch.Tensor:
    return torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(1))


def _settled(qtbot, window: MainWindow, name: str) -> None:
    """Wait until layer ``name``'s page is the one its panel's width asks for."""
    panel = window.host.layer_panels[name]

    def fits() -> bool:
        m, width = panel.activation_slot.mosaic, panel.mosaic_width()
        if m is None or not width:
            return False
        want = page_channels_for(
            m.total_channels, m.tile_h, m.tile_w, width, min_channels=MIN_PAGE_CHANNELS
        )
        return m.page_size == want

    qtbot.waitUntil(fits, timeout=30_000)
    window.display.flush_panel_updates()


def _tile_on_screen(canvas, m, channel: int) -> tuple[float, float]:
    """Width and height in widget pixels of ``channel``'s tile (the view's transform)."""
    y0, x0 = m.tile_origin(channel)
    a = canvas.image_to_widget(x0, y0)
    b = canvas.image_to_widget(x0 + m.tile_w, y0 + m.tile_h)
    return float(b.x() - a.x()), float(b.y() - a.y())


def test_resnet_layer2_tiles_are_readable_at_1280x720(qtbot, actviz_window, resnet):
    win = actviz_window(resnet, _uniform_image(), ["layer2"], size=(1280, 720))
    win.run_and_wait()
    window = win.window
    _settled(qtbot, window, "layer2")
    panel = window.host.layer_panels["layer2"]
    canvas = panel.activation_slot.image_canvas
    m = panel.activation_slot.mosaic
    assert (m.total_channels, m.tile_h, m.tile_w) == (128, 28, 28)
    # Fewer channels per page than the layer has; the arrows page through the rest.
    size = m.page_size
    assert MIN_PAGE_CHANNELS <= size < 128 and m.channels == size
    assert panel.page_bar.text() == f"ch 0-{size - 1} of 128"
    assert panel.page_bar.next_button.isEnabled()
    # Every tile at least 32 screen pixels, square pixels.
    for channel in (0, size - 1):
        w, h = _tile_on_screen(canvas, m, channel)
        assert w >= MIN_TILE_SCREEN_PX and abs(w - h) <= 1.0
    assert canvas.view.state["aspectLocked"]
    # The mosaic fills the canvas's width (less its colour bar), and the colour bar is as
    # tall as the mosaic.
    strip = canvas.colorbar.strip

    def strip_rect():
        return canvas.mapFromScene(strip.sceneBoundingRect()).boundingRect()

    # The colour bar follows the re-paged mosaic once its layout pass ran.
    qtbot.waitUntil(
        lambda: abs(strip_rect().height() - canvas.image_rect_on_screen().height()) <= 3,
        timeout=30_000,
    )
    rect = canvas.image_rect_on_screen()
    assert abs(rect.width() - canvas.image_area_width()) <= 3
    assert abs(strip_rect().height() - rect.height()) <= 3
    assert abs(strip_rect().top() - rect.top()) <= 3
    # Tiles are separated: one cosmetic (>= 1 screen pixel at any zoom) line between tiles.
    rows, cols = grid_shape(size, 28, 28)
    assert (m.rows, m.cols) == (rows, cols)
    # One line (a move and a line element) between each two rows and columns.
    assert canvas.grid.path_item.path().elementCount() == 2 * ((rows - 1) + (cols - 1))
    assert canvas.grid._pen.isCosmetic() and canvas.grid._pen.widthF() >= 1.0
    # Channel numbers only on tiles large enough for them.
    tile_px = canvas.grid.tile_screen_px()
    assert tile_px == pytest.approx(_tile_on_screen(canvas, m, 0)[0], abs=0.5)
    assert bool(canvas.grid.labels()) == (tile_px >= LABEL_MIN_TILE_PX)
    # The hover read-out names the channel (the layout settled: a later pass would move the
    # tile from under the point the pointer was sent to).
    assert win.settle()
    y0, x0 = m.tile_origin(7)
    # From another point first: a move to where the pointer already is (an earlier test left
    # it there) sends no event, and the read-out would wait for one.
    qtbot.mouseMove(canvas.viewport(), canvas.image_to_widget(x0 + 1.5, y0 + 1.5))
    qtbot.mouseMove(canvas.viewport(), canvas.image_to_widget(x0 + 3.5, y0 + 2.5))
    qtbot.waitUntil(
        lambda: panel.status_label.text().startswith("ch 7  (x=3, y=2)"), timeout=30_000
    )
    # Next page: the layer's channels, still readable.
    assert window.display.turn_page("layer2", 1)
    m2 = panel.activation_slot.mosaic
    assert m2.first_channel == size and panel.page_bar.text().startswith(f"ch {size}-")
    np.testing.assert_allclose(
        m2.image,
        mosaic(window.session.result.layers["layer2"].view.data[size : 2 * size]).image,
        atol=1e-6,
        equal_nan=True,
    )


def test_mosaics_grow_with_the_window_and_the_result_stays_frozen(qtbot, actviz_window, resnet):
    win = actviz_window(resnet, _uniform_image(), ["layer2"], size=(1280, 720))
    win.run_and_wait()
    window = win.window
    _settled(qtbot, window, "layer2")
    panel = window.host.layer_panels["layer2"]
    small_width = panel.activation_slot.image_canvas.image_rect_on_screen().width()
    small_page = window.session.page_channels["layer2"]
    held = window.session.result.layers["layer2"].mosaic
    window.resize(1600, 1000)
    qtbot.waitUntil(lambda: panel.mosaic_width() > small_width + 50, timeout=30_000)
    _settled(qtbot, window, "layer2")
    canvas = panel.activation_slot.image_canvas
    assert canvas.image_rect_on_screen().width() > small_width + 50
    assert window.session.page_channels["layer2"] > small_page
    m = panel.activation_slot.mosaic
    assert _tile_on_screen(canvas, m, 0)[0] >= MIN_TILE_SCREEN_PX
    # Re-paged from the result's views: the result (and its mosaic) are not changed.
    assert window.session.result.layers["layer2"].mosaic is held


def _conv_tiles(qtbot, actviz_window, channels: int):
    """A window on one conv of ``channels`` channels, run and settled: its canvas and mosaic."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    win = actviz_window(model, x, ["0"], size=(1280, 720))
    win.run_and_wait()
    _settled(qtbot, win.window, "0")
    slot = win.window.host.layer_panels["0"].activation_slot
    return slot.image_canvas, slot.mosaic


def test_large_tiles_carry_their_channel_numbers(qtbot, actviz_window):
    canvas, m = _conv_tiles(qtbot, actviz_window, 6)
    assert m.channels == 6 and canvas.grid.tile_screen_px() >= LABEL_MIN_TILE_PX
    labels = canvas.grid.labels()
    assert [c for c, _ in labels] == list(range(6))
    # Each number sits at its tile's corner on screen.
    for channel, corner in labels:
        y0, x0 = m.tile_origin(channel)
        want = canvas.image_to_widget(x0, y0)
        assert abs(corner.x() - want.x()) <= 1.5 and abs(corner.y() - want.y()) <= 1.5
    # Zoomed out so far that tiles are small: no numbers.
    canvas.view.scaleBy((20, 20), center=QPointF(0, 0))
    assert canvas.grid.tile_screen_px() < LABEL_MIN_TILE_PX and canvas.grid.labels() == []


def test_auto_colour_map_diverging_for_signed_layers_sequential_otherwise(
    qtbot, actviz_window, resnet
):
    win = actviz_window(resnet, _uniform_image(64), ["conv1", "relu"], size=(1280, 720))
    window = win.window
    assert window.commands.colormap_combo.currentText() == "auto"  # the default
    win.run_and_wait()
    conv, relu = window.host.layer_panels["conv1"], window.host.layer_panels["relu"]
    layer = window.session.result.layers["conv1"]
    assert layer.view.data.min() < 0 <= window.session.result.layers["relu"].view.data.min()
    # The convolution's output is signed: diverging map, symmetric about 0 (0 mid-scale).
    m = conv.activation_slot.mosaic
    assert m.symmetric and conv.activation_slot.image_canvas.colormap_name() == "CET-D1"
    c = m.first_channel
    y0, x0 = m.tile_origin(c)
    tile = m.image[y0 : y0 + m.tile_h, x0 : x0 + m.tile_w]
    data = layer.view.data[c]
    bound = np.abs(data).max()
    np.testing.assert_allclose(tile, (data + bound) / (2 * bound), atol=1e-6)
    assert conv.activation_slot.legend.text().startswith("per\u2011channel: each tile -1..1")
    # After the ReLU, and every |gradient|: sequential maps, min..max.
    rm = relu.activation_slot.mosaic
    assert not rm.symmetric and relu.activation_slot.image_canvas.colormap_name() == "viridis"
    assert conv.gradient_slot.image_canvas.colormap_name() == "inferno"
    assert (
        relu.activation_slot.legend.text()
        == "per\u2011channel: each tile 0-1 of its own min\u2011max"
    )
    # Shared scale: the bar shows [-M, M] of the layer, in numbers.
    with win.expect_run():
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    bound = float(np.abs(layer.view.data).max())
    bar = conv.activation_slot.image_canvas.colorbar
    assert bar.levels() == pytest.approx((-bound, bound))
    values = [value for value, _ in bar.axis.ticks()]  # round numbers, symmetric about 0
    assert 0.0 in values and values == sorted(-v for v in values)
    assert conv.activation_slot.legend.text() == (
        "shared: one scale for all tiles, symmetric about 0"
    )
    # A named map overrides: both sides, min..max, no new run.
    held = window.session.result
    window.commands.colormap_combo.setCurrentText("magma")
    win.wait_idle()  # mosaics made anew in the display passes, on-screen panels first
    assert window.session.result is held
    for panel in (conv, relu):
        assert panel.activation_slot.image_canvas.colormap_name() == "magma"
        assert panel.gradient_slot.image_canvas.colormap_name() == "magma"
        assert not panel.activation_slot.mosaic.symmetric
    assert held.layers["conv1"].mosaic.symmetric  # the result is not edited
    window.commands.colormap_combo.setCurrentText("auto")
    win.wait_idle()
    assert conv.activation_slot.mosaic.symmetric
    assert conv.activation_slot.image_canvas.colormap_name() == "CET-D1"


def test_zoomed_in_the_numbers_are_those_of_the_tiles_in_view(qtbot, actviz_window):
    """Only the rows and columns in view are tried: the same numbers as trying every tile."""
    canvas, m = _conv_tiles(qtbot, actviz_window, 48)
    assert m.rows > 2 and m.cols > 2
    seen = set()
    for zoom, centre in ((0.45, (40, 30)), (0.3, (70, 55)), (0.6, (0, 0)), (0.35, (90, 10))):
        canvas.view.autoRange(padding=0)
        canvas.view.scaleBy((zoom, zoom), center=QPointF(*centre))
        view = canvas.view.viewRect()
        want = []
        for channel in m.tile_channels:
            y0, x0 = m.tile_origin(channel)
            if view.intersects(QRectF(x0, y0, m.tile_w, m.tile_h)):
                want.append(channel)
        got = [c for c, _ in canvas.grid.labels()]
        assert got == want and 0 < len(want) < m.channels
        seen.add(tuple(got))
    assert len(seen) == 4
