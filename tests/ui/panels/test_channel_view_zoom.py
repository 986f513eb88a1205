"""A map zoomed in the channel view uses the room of its canvas, in the real window.

A square map in a wide canvas is fitted to the canvas's height; zoomed in, it used to stay in
that square (the room beside it blank, the map cut at the square's edges). Now the view widens
with the zoom up to the whole room: square pixels, the colour bar right beside the map, the
gradient following, and zooming out or a double click brings the fitted square back.
"""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication
from torch import nn

from tests.helpers import noise_picture
from tests.ui.qt_helpers import process_events

#: pyqtgraph zooms 1.02 ** (delta / 8) per wheel event (its wheelScaleFactor is -1/8).
STEP = 1.02 ** (120 / 8)


def _wheel_steps(canvas, steps: int) -> None:
    """``abs(steps)`` real wheel events over the middle of the canvas (> 0: zoom in)."""
    viewport = canvas.viewport()
    pos = QPointF(viewport.width() / 2, viewport.height() / 2)
    for _ in range(abs(steps)):
        event = QWheelEvent(
            pos,
            QPointF(viewport.mapToGlobal(pos.toPoint())),
            QPoint(0, 0),
            QPoint(0, 120 if steps > 0 else -120),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(viewport, event)
        process_events()


def _scale(canvas) -> tuple[float, float]:
    """Widget pixels per map pixel, across and down."""
    origin = QPointF(canvas.image_to_widget(0, 0))
    across = QPointF(canvas.image_to_widget(100, 0)) - origin
    down = QPointF(canvas.image_to_widget(0, 100)) - origin
    return across.x() / 100, down.y() / 100


def _geometry(canvas) -> tuple[QRectF, float, float]:
    """(the map's rectangle drawn, the band between it and the bar, the band left of it
    less the band right of the bar) in widget pixels."""
    image = canvas.image_rect_on_screen()
    bar = QRectF(canvas.mapFromScene(canvas.colorbar.sceneBoundingRect()).boundingRect())
    return image, bar.left() - image.right(), image.left() - (canvas.width() - bar.right())


def _check_beside(canvas) -> QRectF:
    image, between, unevenness = _geometry(canvas)
    sx, sy = _scale(canvas)
    assert sx == pytest.approx(sy, rel=0.005)  # square pixels
    assert -1 <= between <= 4, between  # the bar right next to the map
    assert abs(unevenness) <= 3, unevenness  # the map and its bar centred together
    return image


class _SideBranch(nn.Module):
    """A classifier with a side branch its output does not use (as an auxiliary head): the
    branch's maps get no gradient, so the channel view shows one map across its width."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=4, padding=1), nn.ReLU())
        self.side = nn.Conv2d(3, 4, 3, stride=8, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.side(x)
        return self.head(self.features(x).mean(dim=(2, 3)))


def test_a_zoomed_map_uses_the_room_beside_it(qtbot, actviz_window):
    torch.manual_seed(0)
    win = actviz_window(_SideBranch().eval(), noise_picture(), ["side"], size=(1600, 720))
    window = win.window
    win.run_and_wait()
    assert window.display.open_channel("side", 2)
    qtbot.waitUntil(lambda: window.centre.channel_box.isVisible(), timeout=10_000)
    win.settle()
    view = window.centre.channel_view
    act = view.activation_canvas
    assert view.activation.shape == (12, 12) and view.gradient is None
    room = act.image_area_width()
    fitted = _check_beside(act)
    fit_scale = _scale(act)[0]
    # The square map fitted to the canvas's height, with room to spare beside it.
    assert fitted.height() == pytest.approx(12 * fit_scale, abs=2)
    assert fitted.width() < 0.75 * room

    # Zoomed in (about the middle) by less than the room allows: the whole width of the map
    # is drawn, wider than the fitted square, at the scale of the wheel, the bar beside it.
    _wheel_steps(act, 1)
    scale = _scale(act)[0]
    assert scale == pytest.approx(fit_scale * STEP, rel=0.01)
    zoomed = _check_beside(act)
    assert zoomed.width() == pytest.approx(12 * scale, abs=2)
    assert zoomed.width() > 1.3 * fitted.width()
    assert zoomed.height() == pytest.approx(fitted.height(), abs=2)  # cut at the top and bottom

    # Zoomed in beyond the room: the map fills the room, the bar at its edge.
    _wheel_steps(act, 2)
    assert _scale(act)[0] == pytest.approx(fit_scale * STEP**3, rel=0.01)
    full = _check_beside(act)
    assert full.width() >= room - 3

    # Zooming out goes back step by step (no jump) to the fitted square.
    _wheel_steps(act, -2)
    assert _scale(act)[0] == pytest.approx(scale, rel=0.01)
    assert _check_beside(act).width() == pytest.approx(zoomed.width(), abs=2)
    _wheel_steps(act, -1)
    assert _scale(act)[0] == pytest.approx(fit_scale, rel=0.01)
    assert _check_beside(act).width() == pytest.approx(fitted.width(), abs=2)

    # A double click fits the map again from any zoom.
    _wheel_steps(act, 4)
    qtbot.mouseDClick(act.viewport(), Qt.MouseButton.LeftButton)
    process_events()
    assert _scale(act)[0] == pytest.approx(fit_scale, rel=0.01)
    assert _check_beside(act).width() == pytest.approx(fitted.width(), abs=2)

    # Zoomed in, the window narrower and wide again: the map keeps to the room, its bar
    # beside it (no blank shown beside a map cut on its other side).
    _wheel_steps(act, 3)
    for width in (1200, 1600):
        win.resize(width, 720)
        process_events()
        drawn = _check_beside(act)
        assert drawn.width() == pytest.approx(
            min(act.image_area_width(), 12 * _scale(act)[0]), abs=3
        )
    # (Left zoomed in when the window closes: the teardown clears a zoomed scene.)


def test_maps_one_above_the_other_zoom_together_across_the_room(qtbot, actviz_window, resnet):
    """A tall view puts the activation above its gradient: two canvases wider than their
    square maps. A zoom in one widens both alike (the same scale, the same region), each bar
    beside its map."""
    win = actviz_window(resnet, noise_picture(), ["layer2"], size=(1400, 1400))
    window = win.window
    win.run_and_wait()
    assert window.display.open_channel("layer2", 3)
    qtbot.waitUntil(lambda: window.centre.channel_box.isVisible(), timeout=10_000)
    win.settle()
    view = window.centre.channel_view
    act, grad = view.activation_canvas, view.gradient_canvas
    assert view.is_stacked() and view.gradient is not None
    room = act.image_area_width()
    fitted = _check_beside(act).width()
    assert _check_beside(grad).width() == pytest.approx(fitted, abs=2)
    assert fitted < room - 30
    fit_scale = _scale(act)[0]
    _wheel_steps(grad, 1)  # the gradient this time: the activation follows
    for canvas in (act, grad):
        assert _scale(canvas)[0] == pytest.approx(fit_scale * STEP, rel=0.01)
        drawn = _check_beside(canvas).width()
        assert drawn == pytest.approx(min(room, fitted * STEP), abs=3)
    assert view.linked()
