"""A canvas repaints new pixels of the same image without its scene, and they come out as
the scene paints them: image, tile gaps, channel numbers, marked tiles (LightPaint)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.tile_grid import LABEL_MIN_TILE_PX
from tests.ui.qt_helpers import process_events, rgba_array


def _mosaic(seed: int, rows: int = 2, cols: int = 3, tile: int = 8, pad: int = 1) -> np.ndarray:
    """uint8 indices of a ``rows x cols`` mosaic with 255 (transparent) in its gaps."""
    rng = np.random.default_rng(seed)
    out = np.full((rows * (tile + pad) - pad, cols * (tile + pad) - pad), 255, np.uint8)
    for r in range(rows):
        for c in range(cols):
            y, x = r * (tile + pad), c * (tile + pad)
            out[y : y + tile, x : x + tile] = rng.integers(0, 255, (tile, tile), dtype=np.uint8)
    return out


def _canvas(qtbot, size: tuple[int, int] = (420, 300)) -> ImageCanvas:
    canvas = ImageCanvas(passive=True, colorbar=True)
    qtbot.addWidget(canvas)
    canvas.resize(*size)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.set_image(_mosaic(0), (0.0, 1.0))
    canvas.grid.set_tiles(2, 3, 8, 8, 1, 6, 10)
    canvas.set_marks([QtCore.QRectF(9, 0, 8, 8)])
    process_events()
    canvas.grab()
    return canvas


def test_new_pixels_are_painted_without_the_scene_as_the_scene_paints_them(qtbot):
    canvas = _canvas(qtbot)
    assert canvas.grid.tile_screen_px() >= LABEL_MIN_TILE_PX
    light = canvas._light  # noqa: SLF001
    before = light.painted
    canvas.set_image(_mosaic(1), (0.0, 1.0))
    pending = light.pending
    assert pending is not None and not pending.isEmpty()
    qtbot.waitUntil(lambda: light.painted > before, timeout=10_000)
    # What the light path paints, on an image of the viewport ...
    viewport = canvas.viewport()
    mine = QtGui.QImage(viewport.size(), QtGui.QImage.Format.Format_ARGB32_Premultiplied)
    mine.fill(QtGui.QColor(1, 2, 3))
    painter = QtGui.QPainter(mine)
    assert light.paint(painter)
    painter.end()
    # ... is what the scene paints there (the whole viewport through the scene).
    scene = viewport.grab().toImage()
    x0, y0, w, h = pending.x(), pending.y(), pending.width(), pending.height()
    a = rgba_array(mine)[y0 : y0 + h, x0 : x0 + w]
    b = rgba_array(scene)[y0 : y0 + h, x0 : x0 + w]
    np.testing.assert_array_equal(a, b)
    # The new frame's pixels, its gaps, a mark and the channel numbers are in it.
    assert len({tuple(p) for p in a.reshape(-1, 4)}) > 50
    assert not canvas.grid.label_item.pixmap().isNull()


def test_the_channel_numbers_of_large_tiles_are_drawn(qtbot):
    canvas = _canvas(qtbot)
    assert [c for c, _ in canvas.grid.labels()] == list(range(10, 16))
    # Drawn into the pixmap the scene shows (the view's own visible region is empty: its
    # viewport covers it, so the numbers were left "stale" for ever).
    qtbot.waitUntil(lambda: not canvas.grid.label_item.pixmap().isNull(), timeout=10_000)
    assert not canvas.grid.labels_stale


def test_a_new_shape_or_a_hidden_canvas_goes_through_the_scene(qtbot):
    canvas = _canvas(qtbot)
    light = canvas._light  # noqa: SLF001
    canvas.set_image(_mosaic(2, rows=3), (0.0, 1.0))  # reshaped: the view is fitted again
    assert light.pending is None
    canvas.hide()
    canvas.set_image(_mosaic(3, rows=3), (0.0, 1.0))
    assert light.pending is None and canvas.image._renderRequired  # noqa: SLF001
    canvas.show()
    qtbot.waitExposed(canvas)
    grabbed = rgba_array(canvas.grab().toImage())
    assert grabbed.shape[0] > 0 and not canvas.image._renderRequired  # noqa: SLF001


def test_a_view_moved_before_the_paint_is_painted_by_the_scene(qtbot):
    canvas = _canvas(qtbot)
    light = canvas._light  # noqa: SLF001
    before = light.painted
    canvas.set_image(_mosaic(4), (0.0, 1.0))
    assert light.pending is not None
    canvas.view.scaleBy((0.5, 0.5))  # zoomed in before the new pixels were painted
    process_events()
    assert light.painted == before  # the scene painted the frame and the zoom together
    # A new frame in the moved view is painted light again, where the scene paints it.
    canvas.set_image(_mosaic(5), (0.0, 1.0))
    qtbot.waitUntil(lambda: light.painted > before, timeout=10_000)
    screen = QtWidgets.QApplication.primaryScreen().grabWindow(canvas.winId()).toImage()
    viewport = canvas.viewport()
    shown = rgba_array(screen.copy(viewport.geometry()))
    np.testing.assert_array_equal(shown, rgba_array(viewport.grab().toImage()))


def test_frames_of_a_plain_image_reuse_one_indexed_image_and_paint_as_the_scene(qtbot):
    # No tiles, numbers or marks: the light path skips those items; each frame's indices go
    # into the one indexed image the canvas keeps, and still come out as the scene paints them.
    canvas = ImageCanvas(passive=True, colorbar=True)
    qtbot.addWidget(canvas)
    canvas.resize(420, 300)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.set_image(_mosaic(6), (0.0, 1.0))
    process_events()
    canvas.grab()
    assert not canvas.grid.has_lines and not canvas.grid.has_labels and not canvas.marked()
    light = canvas._light  # noqa: SLF001
    kept = canvas.image._indexed[1]  # noqa: SLF001 - the indexed image made for this shape
    for seed in (7, 8):
        before = light.painted
        pixels = _mosaic(seed)
        canvas.set_image(pixels, (0.0, 1.0))
        qtbot.waitUntil(lambda before=before: light.painted > before, timeout=10_000)
        assert canvas.image._indexed[1] is kept  # noqa: SLF001
        # The kept image holds this frame's indices, not the first frame's.
        assert kept.pixelIndex(1, 2) == pixels[2, 1]
        viewport = canvas.viewport()
        screen = QtWidgets.QApplication.primaryScreen().grabWindow(canvas.winId()).toImage()
        shown = rgba_array(screen.copy(viewport.geometry()))
        np.testing.assert_array_equal(shown, rgba_array(viewport.grab().toImage()))


def test_channel_numbers_move_with_the_image_without_being_drawn_again(qtbot):
    canvas = _canvas(qtbot)
    grid = canvas.grid
    qtbot.waitUntil(lambda: not grid.label_item.pixmap().isNull(), timeout=10_000)

    def placed() -> tuple[float, float, float]:
        """Where the numbers' pixmap sits from its first tile's corner, and the tile scale."""
        origin = grid._device_transform().map(QtCore.QPointF(0.0, 0.0))  # noqa: SLF001
        corner = origin + grid.label_item.offset() - grid.labels()[0][1]
        return corner.x(), corner.y(), grid.tile_screen_px()

    drawn, before = grid.label_item.pixmap().cacheKey(), placed()
    top = canvas.image_to_widget(0, 0).y()
    canvas.resize(420, 380)  # taller only: the image moves down, at the same scale
    qtbot.waitUntil(lambda: canvas.image_to_widget(0, 0).y() > top + 20, timeout=10_000)
    process_events()
    assert placed() == pytest.approx(before, abs=0.01)
    assert grid.label_item.pixmap().cacheKey() == drawn
