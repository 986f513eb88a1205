"""The passive panels of actviz.ui.panels, fed real captures of tiny models."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import numpy as np
import pyqtgraph as pg
import pytest
import torch
from PIL import Image
from PySide6 import QtCore, QtGui
from torch import nn

from actviz.core.capture import capture
from actviz.display.attribution import grad_cam, top_k
from actviz.display.colormaps import PAD_INDEX, indexed_table, to_indices
from actviz.display.layer_views import layer_view, magnitude_view
from actviz.display.mosaic import mosaic
from actviz.display.stats import histogram, layer_stats
from actviz.ui.panels import (
    COLORMAPS,
    ChannelView,
    GradFlowPanel,
    HistogramPanel,
    InputPreview,
    LayerPanel,
    OverlayPanel,
    PredictionPanel,
    StatsTable,
    lut,
)
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.colorbar import nice_ticks, tick_texts
from actviz.ui.panels.style import ROW_BAD_BACKGROUND, SELECTION, format_value
from actviz.ui.panels.view_slot import Location
from tests.core.seed_models import SeedMLP
from tests.ui.qt_helpers import cell_texts, show_widget

LEFT = QtCore.Qt.MouseButton.LeftButton


class TinyConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flat(self.pool(self.conv2(self.relu(self.conv1(x))))))


class SqrtOfInput(nn.Module):
    """sqrt of a signed input: NaN wherever the input is negative."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(self.lin(x))


@pytest.fixture(scope="module")
def conv_capture():
    torch.manual_seed(0)
    model = TinyConvNet()
    x = torch.randn(1, 3, 16, 16)
    return capture(model, x)


@pytest.fixture(scope="module")
def mlp_capture():
    return capture(SeedMLP(), torch.tensor([[0.05, 0.1]]))


def _maps_panel(qtbot, cap, name: str = "conv1") -> tuple[LayerPanel, object, object]:
    panel = LayerPanel(name, module_type=cap[name].module_type)
    view = layer_view(cap[name].tensor)
    tiles = mosaic(view.data)
    panel.set_activation(view, tiles)
    show_widget(qtbot, panel)
    return panel, view, tiles


def _mosaic_point(panel: LayerPanel, tiles, channel: int, x: int, y: int) -> QtCore.QPoint:
    """Viewport position of data pixel (x, y) of ``channel`` in the activation mosaic."""
    y0, x0 = tiles.tile_origin(channel)
    canvas = panel.activation_slot.image_canvas
    return canvas.image_to_widget(x0 + x + 0.5, y0 + y + 0.5)


# -- LayerPanel ------------------------------------------------------------------------------
def test_layer_panel_maps_shows_the_mosaic_with_its_levels_and_title(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    canvas = panel.activation_slot.image_canvas
    assert canvas.source_image() is tiles.image
    # drawn as uint8 indices of a 256-entry table: padding (NaN) is the transparent entry
    np.testing.assert_array_equal(canvas.image.image, to_indices(tiles.image, tiles.levels))
    assert canvas.image.image.dtype == np.uint8
    np.testing.assert_array_equal(canvas.image.image == PAD_INDEX, np.isnan(tiles.image))
    # every real value gets a colour of the table; only padding gets the transparent entry
    assert canvas.image.image[~np.isnan(tiles.image)].max() < PAD_INDEX
    assert canvas.levels() == pytest.approx(tiles.levels)
    assert canvas.image.levels is None  # the indices need no scaling
    # per-channel tiles have no common value range: the bar reads 0..1 of a tile's own range
    # (numeric ticks) and the legend under the mosaic says so instead of lying
    assert tiles.normalize == "channel"
    assert canvas.colorbar.levels() == (0.0, 1.0)
    ticks = canvas.colorbar.axis.ticks()  # numbers: 0..1 of each tile's own range
    assert ticks[0] == (0.0, "0") and ticks[-1][0] == pytest.approx(1.0) and len(ticks) >= 2
    assert (
        panel.activation_slot.legend.text()
        == "per\u2011channel: each tile 0-1 of its own min\u2011max"
    )
    assert panel.activation_slot.legend.isVisible()
    assert panel.title() == "conv1 · Conv2d · 8×16×16"
    assert panel.status_label.text() == view.description
    # The canvas asks for the height at which the mosaic fills its width (square pixels),
    # as height-for-width: layouts resolve it from the width they give.
    rows, cols = tiles.image.shape
    needed = math.ceil(canvas.image_area_width() * rows / cols) + 14
    assert canvas.hasHeightForWidth() and canvas.sizePolicy().hasHeightForWidth()
    assert canvas.heightForWidth(canvas.width()) == max(needed, 40, canvas.minimumHeight())
    wider = math.ceil(canvas.image_area_width(canvas.width() + 100) * rows / cols) + 14
    assert canvas.heightForWidth(canvas.width() + 100) == max(wider, 40)
    assert panel.layout().hasHeightForWidth()
    assert panel.heightForWidth(panel.width()) >= canvas.heightForWidth(canvas.width())
    assert not panel.gradient_shown()


def test_layer_panel_updates_in_place_without_new_items(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    canvas = panel.activation_slot.image_canvas
    item = canvas.image
    items_before = len(canvas.scene().items())
    doubled = mosaic(view.data * 2.0, normalize="shared")
    panel.set_activation(view, doubled)
    assert panel.activation_slot.image_canvas is canvas
    assert canvas.image is item
    assert len(canvas.scene().items()) == items_before
    assert canvas.source_image() is doubled.image
    np.testing.assert_array_equal(item.image, to_indices(doubled.image, doubled.levels))
    assert canvas.colorbar.levels() == pytest.approx(doubled.value_range)
    assert "min" not in dict(canvas.colorbar.axis.ticks()).values()  # shared: numbers again


def test_indices_computed_ahead_are_drawn_as_given(qtbot, conv_capture, monkeypatch):
    from actviz.ui.panels import canvas as canvas_module

    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    marked = to_indices(tiles.image, tiles.levels)
    marked[0, 0] = 7  # a mark that converting the float image again would erase
    ahead = dataclasses.replace(tiles, indices=marked)

    def no_conversion(*args):
        raise AssertionError("converted on the GUI thread")

    monkeypatch.setattr(canvas_module, "to_indices", no_conversion)
    panel.set_activation(view, ahead)
    canvas = panel.activation_slot.image_canvas
    np.testing.assert_array_equal(canvas.image.image, ahead.indices)
    assert canvas.source_image() is ahead.image


def test_the_fast_indexed_render_paints_what_pyqtgraph_paints(qtbot):
    from actviz.ui.panels.canvas import ClickableImageItem

    rng = np.random.default_rng(0)
    indices = rng.integers(0, 256, size=(37, 53), dtype=np.uint8)  # odd width: row padding
    indices[3, :] = PAD_INDEX
    table = indexed_table("viridis")
    fast = ClickableImageItem(axisOrder="row-major")
    fast.setLookupTable(table)
    fast.setImage(indices, autoLevels=False, levels=None)
    fast.render()
    assert fast._render_indexed()  # the fast path applies to this image
    generic = pg.ImageItem(axisOrder="row-major")
    generic.setLookupTable(table)
    generic.setImage(indices, autoLevels=False, levels=None)
    generic.render()
    fmt = QtGui.QImage.Format.Format_ARGB32_Premultiplied
    a = fast.qimage.convertToFormat(fmt)
    b = generic.qimage.convertToFormat(fmt)
    assert (a.width(), a.height()) == (53, 37) == (b.width(), b.height())
    assert a == b
    # Row 3 is padding: fully transparent.
    assert a.pixel(10, 3) == 0 and QtGui.qAlpha(a.pixel(11, 4)) == 255


def test_layer_panel_hover_reports_channel_pixel_and_raw_value(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    canvas = panel.activation_slot.image_canvas
    qtbot.mouseMove(canvas.viewport(), _mosaic_point(panel, tiles, 5, 3, 7))
    expected = f"ch 5  (x=3, y=7)  value {format_value(view.data[5, 7, 3])}"
    qtbot.waitUntil(lambda: panel.status_label.text() == expected, timeout=10_000)
    # Over the padding between tiles there is no channel: the description comes back.
    y0, x0 = tiles.tile_origin(0)
    gap = canvas.image_to_widget(x0 + tiles.tile_w + 0.5, y0 + 2.5)
    qtbot.mouseMove(canvas.viewport(), gap)
    qtbot.waitUntil(lambda: panel.status_label.text() == view.description, timeout=10_000)


def test_layer_panel_hover_adds_the_gradient_value(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    grad_view = magnitude_view(layer_view(conv_capture["conv1"].grad))
    panel.set_gradient(grad_view, mosaic(grad_view.data))
    QtCore.QCoreApplication.processEvents()
    qtbot.mouseMove(
        panel.activation_slot.image_canvas.viewport(), _mosaic_point(panel, tiles, 2, 10, 4)
    )
    expected = (
        f"ch 2  (x=10, y=4)  value {format_value(view.data[2, 4, 10])}"
        f"  |grad| {format_value(grad_view.data[2, 4, 10])}"
    )
    qtbot.waitUntil(lambda: panel.status_label.text() == expected, timeout=10_000)


def test_layer_panel_click_on_a_tile_emits_channel_clicked(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    canvas = panel.activation_slot.image_canvas
    with qtbot.waitSignal(panel.channel_clicked, timeout=10_000) as blocker:
        qtbot.mouseClick(canvas.viewport(), LEFT, pos=_mosaic_point(panel, tiles, 6, 8, 8))
    assert blocker.args == ["conv1", 6]
    with qtbot.waitSignal(panel.channel_clicked, timeout=10_000) as blocker:
        qtbot.mouseClick(canvas.viewport(), LEFT, pos=_mosaic_point(panel, tiles, 0, 0, 0))
    assert blocker.args == ["conv1", 0]


def test_layer_panel_bars_for_the_two_unit_seed_mlp(qtbot, mlp_capture):
    panel = LayerPanel("fc1", module_type="Linear")
    view = layer_view(mlp_capture["fc1"].tensor)
    assert view.kind == "bars"
    panel.set_activation(view, None)
    show_widget(qtbot, panel)
    bars = panel.activation_slot.bar_canvas
    assert bars.count() == 2
    heights = np.add(bars.positive.opts["height"], bars.negative.opts["height"])  # signed
    np.testing.assert_allclose(heights, [0.3775, 0.3925], atol=1e-4)
    assert panel.title() == "fc1 · Linear · 2"
    # Both bars inside the view with margin, ticks labelled by unit index, y from zero.
    (x_low, x_high), (y_low, y_high) = bars.view.viewRange()
    assert x_low < -0.3 and 1.3 < x_high < 2.0
    assert y_low == pytest.approx(0.0) and y_high > 0.3925
    assert bars.positive.opts["width"] <= 0.6
    ticks = bars.bottom_axis._tickLevels
    assert ticks == [[(0.0, "0"), (1.0, "1")]]
    point = bars.mapFromScene(bars.view.mapViewToScene(QtCore.QPointF(1.0, 0.1)))
    qtbot.mouseMove(bars.viewport(), point)
    qtbot.waitUntil(lambda: panel.status_label.text() == "unit 1  value 0.392", timeout=10_000)


def test_a_global_pools_bars_are_named_channels_on_the_axis_and_in_the_read_out(qtbot):
    # (N, C, 1, 1) shows as bars, one a channel: "unit" would be another thing than the menus'
    # "ch 2" (ablate, open) for the same bar.
    panel = LayerPanel("avgpool", module_type="AdaptiveAvgPool2d")
    pooled = torch.tensor([0.25, -0.5, 0.75]).reshape(1, 3, 1, 1)
    panel.set_activation(layer_view(pooled), None)
    show_widget(qtbot, panel)
    bars = panel.activation_slot.bar_canvas
    assert bars.bottom_axis.labelText == "channel"
    point = bars.mapFromScene(bars.view.mapViewToScene(QtCore.QPointF(2.0, 0.1)))
    qtbot.mouseMove(bars.viewport(), point)
    qtbot.waitUntil(lambda: panel.status_label.text() == "ch 2  value 0.750", timeout=10_000)
    # A layer of units (N, C) in the same panel (another run) is units again; class names win.
    units = layer_view(pooled.reshape(1, 3))
    panel.set_activation(units, None)
    assert bars.bottom_axis.labelText == "unit"
    assert panel.hover_text(Location("bars", 1)) == "unit 1  value -0.500"
    panel.set_unit_names(("cat", "dog", "bird"))
    panel.set_activation(units, None)
    assert bars.bottom_axis.labelText == "class"
    assert panel.hover_text(Location("bars", 1)) == "class 1: dog  value -0.500"


def test_a_bar_chart_lays_each_axis_label_out_once(qtbot, monkeypatch):
    from actviz.ui.panels import style
    from actviz.ui.panels.view_slot import BarCanvas

    made = []
    label = pg.AxisItem.labelString
    monkeypatch.setattr(pg.AxisItem, "labelString", lambda axis: made.append(axis) or label(axis))
    bars = BarCanvas(x_label="class")
    qtbot.addWidget(bars)
    assert len(made) == 2  # was 22, one per setter (a bar chart built in 6.9 -> 5.5 ms)
    plain = pg.AxisItem("bottom")
    style.style_axis(plain, "class")
    assert bars.bottom_axis.label.toHtml() == plain.label.toHtml()
    assert bars.bottom_axis.height() == plain.height()


def test_a_bar_chart_draws_major_and_minor_ticks_only(qtbot):
    from actviz.ui.panels.view_slot import BarCanvas

    bars = show_widget(qtbot, BarCanvas(), width=600, height=300)
    bars.set_values(np.arange(512, dtype=np.float32) - 200)
    image = QtGui.QImage(600, 300, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(image)

    def drawn(axis: pg.AxisItem) -> tuple[int, list[str]]:
        _, ticks, texts = axis.generateDrawSpecs(painter)
        return len(ticks), [text for *_, text in texts]

    try:
        for axis in (bars.bottom_axis, bars.left_axis):
            lines, labels = drawn(axis)
            axis.setStyle(maxTickLevel=2, maxTextLevel=2)  # pyqtgraph's default
            default_lines, default_labels = drawn(axis)
            # The third level's lines were all but invisible and took half the paint time.
            assert labels == default_labels and len(labels) >= 3
            assert 0 < lines < default_lines / 2
    finally:
        painter.end()


def test_layer_panel_heatmap_and_scalar(qtbot):
    torch.manual_seed(1)
    tokens = torch.randn(1, 6, 20)
    tokens[0, 2, 3] = float("nan")
    panel = LayerPanel("encoder.norm", module_type="LayerNorm")
    view = layer_view(tokens)
    assert view.kind == "heatmap"
    panel.set_activation(view, None)
    show_widget(qtbot, panel)
    canvas = panel.activation_slot.image_canvas
    np.testing.assert_array_equal(canvas.source_image(), view.data)
    finite = view.data[np.isfinite(view.data)]
    assert canvas.levels() == pytest.approx((finite.min(), finite.max()))
    indices = canvas.image.image
    assert indices[2, 3] == PAD_INDEX  # the NaN token
    assert indices[np.isfinite(view.data)].min() == 0
    assert indices[np.isfinite(view.data)].max() == PAD_INDEX - 1
    assert panel.title() == "encoder.norm · LayerNorm · 6×20"

    scalar = LayerPanel("loss")
    scalar.set_activation(layer_view(torch.tensor(0.25)), None)
    show_widget(qtbot, scalar)
    assert scalar.activation_slot.scalar_label.text() == "0.25"
    assert scalar.title() == "loss · scalar"


def test_layer_panel_gradient_visibility_and_colormap(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    grad_view = magnitude_view(layer_view(conv_capture["conv1"].grad))
    grad_tiles = mosaic(grad_view.data)
    panel.set_gradient(grad_view, grad_tiles)
    assert panel.gradient_shown()
    np.testing.assert_array_equal(
        panel.gradient_slot.image_canvas.image.image, to_indices(grad_tiles.image, (0.0, 1.0))
    )
    panel.set_gradients_visible(False)
    assert not panel.gradient_shown()
    panel.set_gradients_visible(True)
    assert panel.gradient_shown()
    panel.set_gradient(None, None)
    assert not panel.gradient_shown()
    assert panel.gradient_slot.view is None

    panel.set_colormap("magma")
    table = panel.activation_slot.image_canvas.image.lut
    np.testing.assert_array_equal(table, indexed_table("magma"))
    np.testing.assert_array_equal(table[[0, PAD_INDEX - 1]], lut("magma")[[0, -1]])
    assert table[PAD_INDEX, 3] == 0  # padding shows the background
    assert panel.activation_slot.image_canvas.colormap_name() == "magma"
    panel.clear()
    assert panel.activation_slot.image_canvas.image.image is None
    assert panel.title() == "conv1 · Conv2d"


def test_colormaps_load_offline_as_256_entry_luts():
    assert COLORMAPS[:4] == ["viridis", "inferno", "magma", "plasma"]
    assert {"turbo", "gray", "CET-D1"} <= set(COLORMAPS)
    for name in COLORMAPS:
        table = lut(name)
        assert table.shape == (256, 4) and table.dtype == np.uint8
        assert len({tuple(row) for row in table}) > 100
    np.testing.assert_array_equal(lut("gray")[[0, -1], :3], [[0, 0, 0], [255, 255, 255]])
    with pytest.raises(ValueError):
        lut("no-such-map")


def test_to_indices_maps_levels_to_the_colour_entries_and_non_finite_to_padding():
    image = np.array([[0.0, 0.5, 1.0], [-3.0, 7.0, np.nan], [np.inf, -np.inf, 0.999]], np.float32)
    indices = to_indices(image, (0.0, 1.0))
    assert indices.dtype == np.uint8 and indices.flags.c_contiguous
    np.testing.assert_array_equal(indices, [[0, 127, 254], [0, 254, 255], [255, 255, 254]])
    # a constant image (no span) still gets a colour, not the padding entry
    np.testing.assert_array_equal(to_indices(np.full((2, 2), 3.0, np.float32), (3.0, 3.0)), 0)


def test_colour_bar_is_left_alone_when_the_range_barely_moves(qtbot):
    canvas = ImageCanvas()
    qtbot.addWidget(canvas)
    image = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    canvas.set_image(image, (0.0, 1.0), (-2.0, 6.0))
    assert canvas.colorbar.levels() == (-2.0, 6.0)
    calls = []
    shown = canvas.colorbar.axis.show_range
    canvas.colorbar.axis.show_range = lambda *a: calls.append(a) or shown(*a)  # type: ignore[method-assign]
    canvas.set_image(image, (0.0, 1.0), (-2.01, 6.05))  # under 1% of the span of 8
    assert calls == [] and canvas.colorbar.levels() == (-2.0, 6.0)
    canvas.set_image(image, (0.0, 1.0), (-2.0, 7.0))
    assert calls == [(-2.0, 7.0, None)] and canvas.colorbar.levels() == (-2.0, 7.0)
    canvas.set_image(image, (0.0, 1.0), (0.0, 1.0), bar_labels=("ch min", "ch max"))
    assert calls[-1] == (0.0, 1.0, ("ch min", "ch max"))
    assert [text for _, text in canvas.colorbar.axis.ticks()] == ["ch min", "ch max"]


def test_colour_bar_values_are_round_numbers_written_alike():
    assert nice_ticks(0.0, 1.0, 6) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert nice_ticks(-2.0, 6.0, 5) == pytest.approx([-2.0, 0.0, 2.0, 4.0, 6.0])
    assert nice_ticks(0.0, 0.0437, 6) == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])
    assert nice_ticks(3.0, 3.0, 6) == [3.0]  # one value: no span to divide
    assert tick_texts([0.0, 0.01, 0.02], 0.01) == ["0", "0.01", "0.02"]
    assert tick_texts([-2e-5, 0.0, 2e-5], 2e-5) == ["-2e-5", "0", "2e-5"]
    assert tick_texts([0.0, 6e4, 1.2e5], 6e4) == ["0", "6e4", "1.2e5"]  # all alike
    assert tick_texts([-2.0, 0.0, 2.0], 2.0) == ["-2", "0", "2"]


def test_colour_bar_lays_its_values_out_once_per_size(qtbot):
    canvas = ImageCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(220, 180)
    canvas.show()
    image = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    canvas.set_image(image, (0.0, 1.0), (-2.0, 6.0))
    qtbot.waitUntil(lambda: canvas.colorbar.axis._picture is not None)
    laid_out = canvas.colorbar.axis._picture
    canvas.viewport().repaint()  # a new frame's paint: the same layout
    assert canvas.colorbar.axis._picture is laid_out
    texts = [text for _, text in canvas.colorbar.axis.ticks()]
    assert texts[0] == "-2" and texts[-1] == "6" and "0" in texts
    # A second bar of that size and range shares the layout (a grid's bars mostly do).
    other = ImageCanvas()
    qtbot.addWidget(other)
    other.resize(220, 180)
    other.show()
    other.set_image(image, (0.0, 1.0), (-2.0, 6.0))
    # (Its first paint may come at a size it passes through: then it lays out its own.)
    qtbot.waitUntil(lambda: other.colorbar.axis._picture is laid_out, timeout=10_000)
    height = canvas.colorbar.axis.boundingRect().height()
    canvas.resize(440, 400)  # the image and its bar taller: laid out again, with more values
    qtbot.waitUntil(lambda: canvas.colorbar.axis._picture not in (None, laid_out))
    assert canvas.colorbar.axis.boundingRect().height() > 1.5 * height
    assert len(canvas.colorbar.axis.ticks()) > len(texts)


def test_panels_never_import_torch():
    code = "import sys, actviz.ui.panels; sys.exit('torch' in sys.modules)"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0


# -- ChannelView -------------------------------------------------------------------------------
def test_channel_view_shows_channel_and_gradient(qtbot, conv_capture):
    act = layer_view(conv_capture["conv1"].tensor).data[3]
    grad = magnitude_view(layer_view(conv_capture["conv1"].grad)).data[3]
    panel = ChannelView()
    panel.set_channel("conv1", 3, act, grad)
    show_widget(qtbot, panel, 600, 320)
    np.testing.assert_array_equal(panel.activation_canvas.source_image(), act)
    np.testing.assert_array_equal(panel.gradient_canvas.source_image(), grad)
    # The default "auto" colour map: a signed channel on a range symmetric about 0 in the
    # diverging map; a named map shows min..max.
    bound = float(np.abs(act).max())
    assert act.min() < 0 and panel.activation_canvas.levels() == pytest.approx((-bound, bound))
    assert panel.activation_canvas.colormap_name() == "CET-D1"
    assert panel.gradient_canvas.colormap_name() == "inferno"
    panel.set_colormap("viridis")
    levels = panel.activation_canvas.levels()
    assert levels == pytest.approx((act.min(), act.max()))
    assert panel.activation_levels.levels() == pytest.approx(levels)
    np.testing.assert_array_equal(panel.activation_canvas.image.image, to_indices(act, levels))
    assert panel.title() == "conv1 · ch 3 · 16×16"
    point = panel.activation_canvas.image_to_widget(5.5, 9.5)
    qtbot.mouseMove(panel.activation_canvas.viewport(), point)
    expected = f"(x=5, y=9)  value {format_value(act[9, 5])}  |grad| {format_value(grad[9, 5])}"
    qtbot.waitUntil(lambda: panel.status_label.text() == expected, timeout=10_000)
    panel.set_channel("conv1", 4, act, None)
    assert panel.gradient_canvas.image.image is None
    assert panel._grad_box.isHidden()


# -- PredictionPanel ---------------------------------------------------------------------------
def test_prediction_panel_rows_in_order(qtbot, conv_capture):
    labels = [f"category {i}" for i in range(10)]
    rows = top_k(conv_capture.output, k=5, categories=labels)
    panel = PredictionPanel()
    panel.set_predictions(rows)
    panel.set_target_text(f"target: {conv_capture.target_description}")
    show_widget(qtbot, panel, 360, 220)
    probs = torch.softmax(conv_capture.output[0].double(), 0)
    order = torch.argsort(probs, descending=True)[:5].tolist()
    assert panel.row_texts() == [labels[i] for i in order]
    first = panel._rows[0]
    assert first.index.text() == str(order[0])
    assert first.percent.text() == f"{100 * float(probs[order[0]]):.1f} %"
    assert first.bar.value() == pytest.approx(float(probs[order[0]]))
    assert panel.target_label.text() == f"target: {conv_capture.target_description}"
    assert panel.target_label.isVisible()
    panel.set_predictions(rows[:2])
    assert panel.row_texts() == [labels[i] for i in order[:2]]
    assert all(row.label.isHidden() for row in panel._rows[2:])


def test_prediction_change_view_orders_bolds_and_skips_repeats(qtbot, monkeypatch):
    from actviz.display.difference import prediction_change
    from actviz.ui.panels.prediction import PredictionChangeView

    a = torch.tensor([[3.0, 1.0, 0.0, -1.0, 0.5, 2.0]])
    b = torch.tensor([[0.0, 1.0, 3.0, -1.0, 0.5, 2.0]])
    change = prediction_change(a, b, k=2, target=3)
    # The what-if's reading: B (before) first, then A (after); changes stay A - B.
    view = PredictionChangeView(
        names=("after", "before"), reference_first=True, caption="before → after", framed=False
    )
    show_widget(qtbot, view, 320, 300)
    view.set_change(change)
    table = view.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["before", "after", "Δp", "Δlogit"]
    assert [r.index for r in view.rows()] == [0, 2, 5] and view.target_row().index == 3
    texts = cell_texts(view)
    assert [t[0] for t in texts] == ["class 0", "class 2", "class 5", "class 3  (target)"]
    p_a, p_b = torch.softmax(a[0], 0), torch.softmax(b[0], 0)
    assert texts[0][1:] == [
        f"{100 * float(p_b[0]):.1f}%",
        f"{100 * float(p_a[0]):.1f}%",
        f"{100 * float(p_a[0] - p_b[0]):+.1f}",
        "+3.00",
    ]
    # Each run's top class is bold in its own column; the target's row is bold throughout.
    assert not table.item(1, 0).font().bold() and table.item(1, 1).font().bold()  # top of A
    assert table.item(3, 0).font().bold() and not table.item(3, 1).font().bold()  # top of B
    assert table.item(6, 0).font().bold() and table.item(7, 3).font().bold()
    # As tall as its rows: no scrolling inside the table.
    rows_height = table.verticalHeader().defaultSectionSize() * table.rowCount()
    assert table.height() >= rows_height and table.verticalScrollBar().maximum() == 0
    # The same change again (a live frame): nothing is rebuilt.
    calls: list[int] = []
    monkeypatch.setattr(table, "setRowCount", calls.append)
    view.set_change(change)
    assert calls == []
    monkeypatch.undo()
    # No rows: the message instead; cleared without an empty text, the view is hidden.
    view.set_message("no class scores to compare")
    assert view.message() == "no class scores to compare" and table.isHidden()
    assert not view.isHidden() and view.caption.isHidden()
    view.clear()
    assert view.isHidden() and view.rows() == [] and view.target_row() is None


# -- OverlayPanel ------------------------------------------------------------------------------
def test_overlay_panel_layer_selector_and_heat(qtbot, conv_capture):
    panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
    show_widget(qtbot, panel, 320, 380)
    with qtbot.assertNotEmitted(panel.layer_changed):
        panel.set_layers(["conv1", "conv2"], "conv2")
    assert panel.current_layer() == "conv2"
    with qtbot.waitSignal(panel.layer_changed, timeout=10_000) as blocker:
        panel.layer_combo.setCurrentIndex(0)
    assert blocker.args == ["conv1"]

    rgb = np.zeros((16, 16, 3), np.uint8)
    rgb[..., 0] = np.arange(16, dtype=np.uint8)[None, :] * 16
    cam = grad_cam(conv_capture["conv2"].tensor, conv_capture["conv2"].grad)
    assert cam.shape == (8, 8)
    panel.set_image(rgb)
    panel.set_heat(cam)
    np.testing.assert_array_equal(panel.rgb_item.image, rgb)
    np.testing.assert_array_equal(panel.canvas.source_image(), cam)
    np.testing.assert_array_equal(panel.heat_item.image, to_indices(cam, (0.0, 1.0)))
    # The 8x8 heat map is stretched over the 16x16 picture.
    rect = panel.heat_item.mapRectToParent(panel.heat_item.boundingRect())
    assert (rect.width(), rect.height()) == pytest.approx((16.0, 16.0))
    panel.opacity_slider.setValue(25)
    assert panel.heat_item.opacity() == pytest.approx(0.25)
    panel.set_message("Grad-CAM needs a layer with a spatial output")
    assert panel.message_label.isVisible()
    panel.set_heat(None)
    assert panel.heat_item.image is None


# -- GradFlowPanel -----------------------------------------------------------------------------
def _grad_norms(cap):
    """Each layer's name and gradient L2 norm (float32), in execution order."""
    names = list(cap.names)
    return names, np.array([layer_stats(cap[n])["grad_norm"] for n in names], np.float32)


def test_grad_flow_panel_log_scale_with_zero_and_nan(qtbot, conv_capture):
    names, norms = _grad_norms(conv_capture)
    names = [*names, "dead", "broken"]
    norms = np.concatenate([norms, [0.0, np.nan]])
    panel = GradFlowPanel()
    panel.set_norms(names, norms)
    show_widget(qtbot, panel, 520, 260)
    assert panel.plot.getAxis("left").logMode
    good = np.isfinite(norms) & (norms > 0)
    np.testing.assert_allclose(panel.finite_bars.opts["y1"], np.log10(norms[good]), rtol=1e-6)
    np.testing.assert_array_equal(panel.zero_bars.opts["x"], [len(names) - 2])
    np.testing.assert_array_equal(panel.bad_bars.opts["x"], [len(names) - 1])
    assert panel.floor < np.log10(norms[good]).min()
    assert "1 NaN/Inf" in panel.status_label.text()
    assert panel.hover_text(len(names) - 2) == f"{len(names) - 2}: dead  ‖grad‖ 0 (no gradient)"
    panel.set_norms(["a", "b"], np.array([0.0, np.nan]))  # nothing positive at all
    assert panel.finite_bars.opts["x"].size == 0
    with pytest.raises(ValueError):
        panel.set_norms(["a"], np.array([1.0, 2.0]))


# -- StatsTable --------------------------------------------------------------------------------
def test_stats_table_highlights_nan_rows_sorts_and_selects(qtbot, conv_capture):
    torch.manual_seed(2)
    bad = capture(SqrtOfInput(), torch.randn(3, 4), layers=["lin"], gradients=False)
    sqrt_stats = layer_stats(bad["lin"])
    rows = [layer_stats(conv_capture[name]) for name in conv_capture.names]
    nan_row = {**sqrt_stats, "name": "sqrt", "nan": 5, "grad_norm": None}
    table = StatsTable()
    table.set_rows([*rows, nan_row])
    show_widget(qtbot, table, 700, 300)
    model = table.model
    assert model.rowCount() == len(rows) + 1
    names = table.names()
    bad_row = names.index("sqrt")
    background = model.data(model.index(bad_row, 0), QtCore.Qt.ItemDataRole.BackgroundRole)
    assert isinstance(background, QtGui.QBrush)
    assert background.color() == QtGui.QColor(ROW_BAD_BACKGROUND)
    assert model.data(model.index(0, 0), QtCore.Qt.ItemDataRole.BackgroundRole) is None
    assert "1 with NaN/Inf" in table.summary_label.text()

    mean_column = 2
    table.view.sortByColumn(mean_column, QtCore.Qt.SortOrder.DescendingOrder)
    all_rows = [*rows, nan_row]
    expected = [r["name"] for r in sorted(all_rows, key=lambda r: r["mean"], reverse=True)]
    assert table.names() == expected
    grad_column = 9
    table.view.sortByColumn(grad_column, QtCore.Qt.SortOrder.AscendingOrder)
    assert table.names()[-1] == "sqrt"  # missing gradient norms sort last
    assert model.data(model.index(len(all_rows) - 1, grad_column)) == "—"

    cell = table.view.visualRect(model.index(1, 3)).center()
    with qtbot.waitSignal(table.layer_selected, timeout=10_000) as blocker:
        qtbot.mouseClick(table.view.viewport(), LEFT, pos=cell)
    assert blocker.args == [table.names()[1]]
    with qtbot.assertNotEmitted(table.layer_selected):
        table.select_layer("conv2")
    assert table.view.selectionModel().selectedRows()[0].row() == table.names().index("conv2")


# -- HistogramPanel ----------------------------------------------------------------------------
def test_histogram_panel_counts(qtbot, conv_capture):
    values = conv_capture["relu"].tensor
    counts, edges = histogram(values, bins=32)
    panel = HistogramPanel()
    panel.set_histogram("relu · activation", counts, edges)
    show_widget(qtbot, panel, 420, 280)
    x, y = panel.curve.getData()
    np.testing.assert_array_equal(y, counts)
    np.testing.assert_array_equal(x, edges)
    assert counts.sum() == values.numel()
    assert panel.title() == "relu · activation"
    assert panel.status_label.text().startswith(f"{values.numel()} values in 32 bins")
    with pytest.raises(ValueError):
        panel.set_histogram("bad", counts, edges[:-1])


def _plot_point(panel, x: float, y: float) -> QtCore.QPoint:
    """Viewport pixel of data point (x, y) in a PlotPanel's plot."""
    scene = panel.plot.vb.mapViewToScene(QtCore.QPointF(x, y))
    return panel.plot_widget.mapFromScene(scene)


def test_plot_panels_read_out_what_is_under_the_mouse(qtbot, conv_capture):
    counts, edges = histogram(conv_capture["relu"].tensor, bins=8)
    hist = show_widget(qtbot, HistogramPanel(), 420, 280)
    hist.set_histogram("relu", counts, edges)
    QtCore.QCoreApplication.processEvents()
    summary = hist.status_label.text()
    assert summary.startswith(f"{int(counts.sum())} values in 8 bins")
    third = (edges[2] + edges[3]) / 2
    qtbot.mouseMove(hist.plot_widget.viewport(), _plot_point(hist, third, counts.max() / 2))
    expected = f"[{format_value(edges[2])}, {format_value(edges[3])})  count {int(counts[2])}"
    qtbot.waitUntil(lambda: hist.status_label.text() == expected, timeout=10_000)
    assert hist.plot_widget.toolTip() == expected
    assert hist.hover_text(edges[-1] + 1.0) is None  # right of the last bin
    QtCore.QCoreApplication.sendEvent(
        hist.plot_widget.viewport(), QtCore.QEvent(QtCore.QEvent.Type.Leave)
    )
    assert hist.status_label.text() == summary
    assert hist.plot_widget.toolTip() == ""

    flow = show_widget(qtbot, GradFlowPanel(), 520, 260)
    flow.set_norms(["a", "b.0", "c"], np.array([1e-3, 0.0, 2.5]))
    QtCore.QCoreApplication.processEvents()
    assert flow.status_label.text() == "3 layers, 1 with zero gradient"
    qtbot.mouseMove(flow.plot_widget.viewport(), _plot_point(flow, 2.1, flow.floor + 0.1))
    expected = f"2: c  ‖grad‖ {format_value(2.5)}"
    qtbot.waitUntil(lambda: flow.status_label.text() == expected, timeout=10_000)
    assert flow.hover_text(-0.7) is None
    flow.clear()
    assert flow.status_label.text() == "no gradients"


# -- InputPreview ------------------------------------------------------------------------------
def test_input_preview_image_and_placeholder(qtbot):
    rgb = np.zeros((12, 20, 3), np.uint8)
    rgb[:, 10:, 2] = 255
    panel = InputPreview()
    panel.set_image(rgb, "1×3×12×20")
    show_widget(qtbot, panel, 260, 260)
    np.testing.assert_array_equal(panel.canvas.image.image, rgb)
    assert panel.stack.currentWidget() is panel.canvas
    assert panel.caption_label.text() == "1×3×12×20"
    panel.set_image(None, "")
    assert panel.stack.currentWidget() is panel.placeholder
    with pytest.raises(ValueError):
        panel.set_image(np.zeros((4, 4), np.float32), "")


# -- export ------------------------------------------------------------------------------------
def _colours(path) -> int:
    with Image.open(path) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or [])


def test_layer_panel_export_png_is_not_blank(qtbot, conv_capture, tmp_path):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    path = tmp_path / "conv1.png"
    panel.export_png(path)
    with Image.open(path) as image:
        assert image.size == (panel.width(), panel.height())
    assert _colours(path) > 50  # a viridis mosaic, not a flat fill


def test_selected_panel_draws_a_highlight_border(qtbot, conv_capture):
    panel, view, tiles = _maps_panel(qtbot, conv_capture)
    corner = (1, panel.height() // 2)  # on the frame, left of the content margins
    before = panel.grab().toImage().pixelColor(*corner)
    panel.set_selected(True)
    assert panel.is_selected()
    assert panel.grab().toImage().pixelColor(*corner) == QtGui.QColor(SELECTION)
    panel.set_selected(False)
    assert panel.grab().toImage().pixelColor(*corner) == before


@pytest.mark.parametrize(
    "factory",
    [
        ChannelView,
        PredictionPanel,
        GradFlowPanel,
        HistogramPanel,
        StatsTable,
        InputPreview,
        lambda: OverlayPanel("Saliency"),
    ],
    ids=["channel", "prediction", "gradflow", "histogram", "stats", "input", "overlay"],
)
def test_every_panel_exports_a_png_even_unshown(qtbot, conv_capture, tmp_path, factory):
    panel = factory()
    qtbot.addWidget(panel)
    if isinstance(panel, GradFlowPanel):
        panel.set_norms(*_grad_norms(conv_capture))
    elif isinstance(panel, HistogramPanel):
        panel.set_histogram("conv1", *histogram(conv_capture["conv1"].tensor))
    elif isinstance(panel, PredictionPanel):
        panel.set_predictions(top_k(conv_capture.output))
    path = tmp_path / "panel.png"
    panel.export_png(path)
    with Image.open(path) as image:
        assert image.size[0] >= 160 and image.size[1] >= 160
    assert _colours(path) > 1


def test_changes_are_short_enough_for_the_narrow_overview_column():
    from actviz.ui.panels.prediction import format_change

    logits = [0.0581, -0.798, 3.0, -12.345, 123.4, float("nan")]
    assert [format_change(v, percent=False) for v in logits] == [
        "+0.06",
        "-0.80",
        "+3.00",
        "-12.3",
        "+123",
        "nan",
    ]
    assert [format_change(v, percent=True) for v in (0.071, -0.0712, 1.0)] == [
        "+7.1",
        "-7.1",
        "+100.0",
    ]
    # A change that rounds to nothing has no sign (it read "-0.0 pp" after an edit).
    assert [format_change(v, percent=True) for v in (-0.0001, 0.0004, 0.0)] == ["±0.0"] * 3
    assert format_change(-0.004, percent=False) == "±0.00"


def _painted_argb(canvas: ImageCanvas) -> np.ndarray:
    """The canvas's image as the item converts it for drawing: (H, W) 0xAARRGGBB."""
    item = canvas.image
    item.render()
    qimage = item.qimage
    h, w = qimage.height(), qimage.width()
    return np.array([[qimage.pixel(x, y) for x in range(w)] for y in range(h)], dtype=np.uint32)


def test_new_pixels_of_the_same_shape_are_painted_exactly(qtbot):
    """Live frames replace only the pixels of a canvas (no pyqtgraph setImage): what is
    drawn is still exactly the new frame, for index images and for pictures."""
    rng = np.random.default_rng(3)
    canvas = ImageCanvas(cmap="viridis")
    show_widget(qtbot, canvas, 300, 200)
    table = indexed_table("viridis").astype(np.uint32)
    argb = (table[:, 3] << 24) | (table[:, 0] << 16) | (table[:, 1] << 8) | table[:, 2]
    first = rng.integers(0, 256, (7, 9), dtype=np.uint8)
    canvas.set_image(first, (0.0, 1.0))
    item_before = canvas.image.image
    for _ in range(2):
        new = rng.integers(0, 256, (7, 9), dtype=np.uint8)
        canvas.set_image(new, (0.0, 1.0))
        assert canvas.image.image is not item_before and np.array_equal(canvas.image.image, new)
        painted = _painted_argb(canvas)
        # Transparent padding premultiplies to 0; every other index is its table colour.
        want = np.where(new == PAD_INDEX, 0, argb[new])
        np.testing.assert_array_equal(painted, want)
    rgb = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
    canvas.set_image(rgb, (0.0, 255.0))
    for _ in range(2):
        rgb = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
        canvas.set_image(rgb, (0.0, 255.0))
        painted = _painted_argb(canvas)
        want = (
            (np.uint32(255) << 24)
            | (rgb[..., 0].astype(np.uint32) << 16)
            | (rgb[..., 1].astype(np.uint32) << 8)
            | rgb[..., 2]
        )
        np.testing.assert_array_equal(painted, want)
    assert canvas.image_shape() == (5, 6)


def test_the_scale_legend_names_one_flat_tile_in_the_singular():
    from actviz.ui.panels.view_slot import scale_legend

    maps = np.stack([np.full((4, 4), 2.0), np.arange(16.0).reshape(4, 4)]).astype(np.float32)
    assert scale_legend(mosaic(maps)) == (
        "per\u2011channel: each tile 0-1 of its own min\u2011max"
        " · 1 flat tile (one value), painted mid\u2011scale"
    )
    assert scale_legend(mosaic(maps[1:], normalize="shared")) == "shared: one scale for all tiles"


def test_a_new_axis_title_is_centred_under_its_axis(qtbot):
    """pyqtgraph centres an axis label when the axis is resized, not when its text changes: the
    gradient flow's whole title, replacing "layer" as the panel widened, ran off its right."""
    panel = show_widget(qtbot, GradFlowPanel(), width=190, height=260)
    panel.set_norms(["layer3", "layer4", "avgpool", "fc"], np.array([0.15, 0.14, 0.6, 1.0]))
    qtbot.waitUntil(lambda: panel.axis.labelText == "layer")
    panel.resize(420, 260)
    qtbot.waitUntil(lambda: panel.axis.labelText == "layer (execution order)")
    label, width = panel.axis.label, panel.axis.size().width()
    left = label.pos().x()
    right = left + label.boundingRect().width()
    assert 0 <= left and right <= width and abs((left + right) / 2 - width / 2) <= 2
