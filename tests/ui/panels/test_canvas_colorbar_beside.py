"""ImageCanvas keeps its colour bar next to its image: a wide canvas (the channel view's maps
one above the other) centres the image and its bar together instead of leaving a band between
them; resizing and zooming keep the canvas whole."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QRectF

from actviz.testing.layout_check import layout_problems
from actviz.ui.panels.canvas import ImageCanvas
from tests.ui.qt_helpers import process_events


def _sides(canvas: ImageCanvas) -> tuple[float, float, float]:
    """(band left of the image, band between image and bar, band right of the bar) in
    widget pixels."""
    image = canvas.image_rect_on_screen()
    bar = QRectF(canvas.mapFromScene(canvas.colorbar.sceneBoundingRect()).boundingRect())
    return image.left(), bar.left() - image.right(), canvas.width() - bar.right()


@pytest.mark.parametrize(("size", "stacked"), [((560, 900), True), ((1000, 560), False)])
def test_the_channel_views_bars_sit_beside_their_maps(qtbot, size, stacked):
    from actviz.ui.panels.channel_view import ChannelView

    view = ChannelView()
    qtbot.addWidget(view)
    rng = np.random.default_rng(0)
    data = rng.random((32, 32), dtype=np.float32)
    view.set_channel("features.block2", 3, data, rng.random((32, 32), dtype=np.float32))
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    process_events(8)
    assert view.is_stacked() == stacked
    for canvas in (view.activation_canvas, view.gradient_canvas):
        left, between, right = _sides(canvas)
        image = canvas.image_rect_on_screen()
        assert abs(image.width() - image.height()) <= 2  # square pixels kept
        assert -1 <= between <= 4, (left, between, right)
        assert abs(left - right) <= 3, (left, between, right)
        if stacked:
            # The room left over goes to both sides (it was a ~70 px band before the bar).
            assert left > 40
    assert not [p for p in layout_problems(view) if "ChannelView" in p.widget]


def test_resizing_and_zooming_keep_the_bar_beside_a_whole_image(qtbot):
    canvas = ImageCanvas(passive=False)
    qtbot.addWidget(canvas)
    canvas.set_image(np.linspace(0, 1, 20 * 30, dtype=np.float32).reshape(20, 30), (0.0, 1.0))
    canvas.resize(700, 200)
    canvas.show()
    qtbot.waitExposed(canvas)
    process_events(8)
    left, between, right = _sides(canvas)
    assert left > 100 and -1 <= between <= 4 and abs(left - right) <= 3
    # A zoom draws the image as wide as the room allows (twice as wide here, not cut to its
    # fitted width): the bar moves out with it, still beside it; a fit puts it back.
    bar_before = canvas.colorbar.sceneBoundingRect()
    width_before = canvas.image_rect_on_screen().width()
    canvas.view.scaleBy((0.5, 0.5))
    process_events(8)
    left, between, right = _sides(canvas)
    assert canvas.image_rect_on_screen().width() == pytest.approx(2 * width_before, abs=3)
    assert -1 <= between <= 4 and abs(left - right) <= 3
    canvas.reset_view()
    process_events(8)
    assert canvas.colorbar.sceneBoundingRect() == bar_before
    # Narrower than the image's room: no margins left, the image fills the width beside its
    # bar and nothing is cut (margins fitted to the wider canvas would hold the scene wide).
    canvas.resize(260, 200)
    process_events(8)
    left, between, right = _sides(canvas)
    assert left <= 2 and right <= 2 and -1 <= between <= 4
    assert canvas.image_rect_on_screen().width() >= canvas.image_area_width() - 2
    assert not layout_problems(canvas)
    # A heatmap (aspect not kept) fills its canvas: no margins either.
    canvas.resize(700, 200)
    canvas.set_image(np.zeros((5, 50), np.float32), (0.0, 1.0), lock_aspect=False)
    process_events(8)
    assert canvas._side == 0
    assert canvas.image_rect_on_screen().width() >= canvas.image_area_width() - 2
    assert not layout_problems(canvas)
