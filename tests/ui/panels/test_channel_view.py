"""The channel view in the real window: large, aspect-locked, linked zoom, levels, statistics,
previous/next keys and the input overlay."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from actviz.display.colormaps import to_indices
from actviz.ui.panels.channel_view import OVERLAY_OPACITY
from actviz.ui.window.main_window import MainWindow
from tests.helpers import noise_picture

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

LEFT = Qt.MouseButton.LeftButton


LAYERS = ["conv1", "layer2"]


def _open_by_click(qtbot, window: MainWindow, name: str, channel: int) -> None:
    panel = window.host.layer_panels[name]
    window.centre.layers_scroll.ensureWidgetVisible(panel)
    qtbot.waitUntil(lambda: panel.activation_slot.mosaic.page_size > 1, timeout=30_000)
    window.display.flush_panel_updates()
    m = panel.activation_slot.mosaic
    canvas = panel.activation_slot.image_canvas
    y0, x0 = m.tile_origin(channel)
    point = canvas.image_to_widget(x0 + m.tile_w / 2, y0 + m.tile_h / 2)
    with qtbot.waitSignal(panel.channel_clicked, timeout=10_000):
        qtbot.mouseClick(canvas.viewport(), LEFT, pos=point)
    qtbot.waitUntil(lambda: window.centre.channel_box.isVisible(), timeout=10_000)
    QApplication.processEvents()


def _channel_opened(actviz_window, resnet, name: str, channel: int):
    """A window on ResNet-18 (the noise picture), run, with ``channel`` of ``name`` opened by
    a click on its tile; returns the driver and the channel view."""
    win = actviz_window(resnet, noise_picture(), LAYERS)
    win.run_and_wait()
    _open_by_click(win.qtbot, win.window, name, channel)
    win.settle()  # laid out as the user sees it (its column scrolls: laid out a turn later)
    return win, win.window.centre.channel_view


def _wheel_once(canvas, steps: int = 2) -> None:
    """A real wheel event over the middle of the canvas (zoom in)."""
    viewport = canvas.viewport()
    pos = QPointF(viewport.width() / 2, viewport.height() / 2)
    event = QWheelEvent(
        pos,
        QPointF(viewport.mapToGlobal(pos.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(viewport, event)


def test_clicking_a_tile_opens_the_channel_large(qtbot, actviz_window, resnet):
    win, view = _channel_opened(actviz_window, resnet, "layer2", 5)
    window = win.window
    layer = window.session.result.layers["layer2"]
    assert (view.name, view.channel, view.channels) == ("layer2", 5, 128)
    np.testing.assert_array_equal(view.activation, layer.view.data[5])
    np.testing.assert_array_equal(view.gradient, layer.grad_view.data[5])
    # At least 60 % of the Layers tab.
    box, tab = window.centre.channel_box, window.centre.layers_splitter
    qtbot.waitUntil(lambda: box.width() * box.height() >= 0.6 * tab.width() * tab.height())
    # Square pixels: the views are aspect-locked, and the image is drawn square.
    for canvas in (view.activation_canvas, view.gradient_canvas):
        assert canvas.view.state["aspectLocked"]
        rect = canvas.image_rect_on_screen()
        assert rect.width() >= 150 and abs(rect.width() - rect.height()) <= 1.5
    assert view.title() == "layer2 · ch 5 · 12×12"  # 96 px input
    assert view.position_label.text() == "ch 5 of 128"


def test_zoom_is_aspect_locked_and_linked(qtbot, actviz_window, resnet):
    win, view = _channel_opened(actviz_window, resnet, "layer2", 3)
    act, grad = view.activation_canvas, view.gradient_canvas
    before = act.view.viewRect()
    _wheel_once(act)
    after = act.view.viewRect()
    assert after.width() < before.width() * 0.9  # zoomed in ...
    # ... on both axes alike (square pixels) ...
    scale_x = act.view.width() / after.width()
    scale_y = act.view.height() / after.height()
    assert scale_x == pytest.approx(scale_y, rel=0.02)
    # ... and the gradient followed.
    g = grad.view.viewRect()
    assert g.center().x() == pytest.approx(after.center().x(), abs=0.05)
    assert g.center().y() == pytest.approx(after.center().y(), abs=0.05)
    assert min(g.width(), g.height()) == pytest.approx(min(after.width(), after.height()), rel=0.03)
    assert view.linked()
    # Zooming the gradient zooms the activation too.
    _wheel_once(grad)
    a = act.view.viewRect()
    assert a.width() < after.width() * 0.9 and view.linked()


def test_previous_next_keys_step_through_channels(qtbot, actviz_window, resnet):
    win, view = _channel_opened(actviz_window, resnet, "layer2", 10)
    window = win.window
    layer = window.session.result.layers["layer2"]
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_BracketRight)
    assert view.channel == 11
    np.testing.assert_array_equal(view.activation, layer.view.data[11])
    qtbot.keyClick(view, Qt.Key.Key_PageDown)
    assert view.channel == 12
    qtbot.keyClick(view, Qt.Key.Key_BracketLeft)
    qtbot.keyClick(view, Qt.Key.Key_PageUp)
    assert view.channel == 10
    # With an image focused (clicked), the arrow keys step too.
    view.activation_canvas.setFocus()
    qtbot.keyClick(view.activation_canvas, Qt.Key.Key_Right)
    assert view.channel == 11
    qtbot.keyClick(view.activation_canvas, Qt.Key.Key_Left)
    assert view.channel == 10
    # The layer's mosaic shows the page holding the channel opened.
    m = window.host.layer_panels["layer2"].activation_slot.mosaic
    assert m.first_channel <= 10 <= m.last_channel
    # No channel before the first.
    window.display.open_channel("layer2", 0)
    qtbot.keyClick(view, Qt.Key.Key_BracketLeft)
    assert view.channel == 0 and not view.prev_button.isEnabled()


def test_statistics_levels_and_overlay(qtbot, actviz_window, resnet):
    win, view = _channel_opened(actviz_window, resnet, "conv1", 7)
    window = win.window
    data = window.session.result.layers["conv1"].view.data[7].astype(np.float64)
    stats = view.stats
    assert stats["min"] == data.min() and stats["max"] == data.max()
    assert stats["mean"] == pytest.approx(data.mean(), rel=1e-12)
    assert stats["std"] == pytest.approx(data.std(), rel=1e-12)
    assert stats["zero_frac"] == np.count_nonzero(data == 0) / data.size
    assert view.stats_label.text().startswith(f"min {data.min():.3f}  max {data.max():.3f}")
    # The signed convolution under "auto": symmetric levels, diverging map.
    bound = float(np.abs(data).max())
    assert view.levels() == pytest.approx((-bound, bound), rel=1e-6)
    assert view.activation_canvas.colormap_name() == "CET-D1"
    # Level (contrast) controls.
    view.activation_levels.low.setValue(-0.1)
    view.activation_levels.high.setValue(0.2)
    assert view.levels() == pytest.approx((-0.1, 0.2))
    act = view.activation.astype(np.float32)
    np.testing.assert_array_equal(
        view.activation_canvas.image.image, to_indices(act, view.activation_canvas.levels())
    )
    view.activation_levels.auto_button.click()
    assert view.levels() == pytest.approx((-bound, bound), rel=1e-6)
    # The input picture under the activation: stretched onto the map's pixels.
    assert view.overlay_box.isEnabled() and not view.backdrop.isVisible()
    view.overlay_box.click()
    assert view.backdrop.isVisible()
    np.testing.assert_array_equal(view.backdrop.image, window.session.result.image)
    rect = view.backdrop.mapRectToParent(view.backdrop.boundingRect())
    height, width = view.activation.shape
    assert (rect.width(), rect.height()) == pytest.approx((width, height))
    assert view.activation_canvas.image.opacity() == pytest.approx(OVERLAY_OPACITY)
    view.overlay_box.click()
    assert not view.backdrop.isVisible()
    assert view.activation_canvas.image.opacity() == pytest.approx(1.0)


def test_the_gradients_toggle_hides_the_gradient_in_the_channel_view_too(
    qtbot, actviz_window, resnet
):
    """Unticking Gradients hides |gradient| in every view: the layer panels and the open
    channel, which then draws its activation larger; a channel opened while it is off opens
    without it, and ticking it again brings the same gradient back."""
    win, view = _channel_opened(actviz_window, resnet, "layer2", 5)
    window = win.window
    assert view.gradient_shown()
    before = view.activation_canvas.image_rect_on_screen()
    window.commands.gradients_action.setChecked(False)
    QApplication.processEvents()
    assert not window.host.layer_panels["layer2"].gradient_shown()
    assert not view.gradient_shown()
    qtbot.waitUntil(
        lambda: view.activation_canvas.image_rect_on_screen().width() > before.width() + 10,
        timeout=10_000,
    )
    window.display.open_channel("layer2", 6)
    QApplication.processEvents()
    assert view.channel == 6 and not view.gradient_shown()
    window.commands.gradients_action.setChecked(True)
    QApplication.processEvents()
    assert view.gradient_shown()
    np.testing.assert_array_equal(
        view.gradient, window.session.result.layers["layer2"].grad_view.data[6]
    )


def test_a_tiny_gradient_is_drawn_and_read_on_its_own_range(qtbot):
    """A deep layer's |gradient| of 1e-7: the level boxes (6 decimals) read 0 to 0 and the
    image was drawn on those rounded levels, all one colour."""
    from actviz.ui.panels.channel_view import ImageColumn

    column = ImageColumn("|gradient|", lambda: "inferno")
    qtbot.addWidget(column)
    data = np.linspace(0.0, 3e-7, 16, dtype=np.float32).reshape(4, 4)
    column.set_data(data)
    assert column.levels() == (0.0, pytest.approx(3e-7, rel=1e-6))
    assert column.high.text() == "0.0000003000"  # four digits of the range
    drawn = column.canvas.image.image
    assert drawn.min() == 0 and drawn.max() >= 250  # the whole colour map, not one colour
    # Typed levels are used as typed; "auto" brings back the exact range.
    column.high.setValue(1.5e-7)
    assert column.levels() == (0.0, pytest.approx(1.5e-7))
    column.auto_button.click()
    assert column.levels() == (0.0, pytest.approx(3e-7, rel=1e-6))
