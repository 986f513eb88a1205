"""Small pictures skip pyqtgraph's rescaling render and come out the same."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from actviz.ui.panels.canvas import ClickableImageItem, ImageCanvas
from tests.ui.qt_helpers import rgba_array


def test_a_small_picture_renders_the_pixels_pyqtgraph_would(qtbot):
    rng = np.random.default_rng(3)
    for channels in (3, 4):
        picture = rng.integers(0, 256, (37, 53, channels), dtype=np.uint8)
        if channels == 4:
            picture[..., 3] = 255  # opaque: premultiplying changes nothing to compare
        item = ClickableImageItem(axisOrder="row-major")
        item.setImage(picture, autoLevels=False, levels=(0.0, 255.0))
        item.lut = np.zeros((256, 4), np.uint8)  # a 2-D image's table: ignored for pictures
        assert item._render_rgb()  # noqa: SLF001
        fast = rgba_array(item.qimage)
        pg.ImageItem.render(item)  # pyqtgraph's own path, on the same item
        np.testing.assert_array_equal(fast, rgba_array(item.qimage))
        np.testing.assert_array_equal(fast[..., :3], picture[..., :3])


def test_other_levels_or_large_pictures_keep_pyqtgraphs_path(qtbot):
    item = ClickableImageItem(axisOrder="row-major")
    item.setImage(np.zeros((8, 8, 3), np.uint8), autoLevels=False, levels=(0.0, 128.0))
    assert not item._render_rgb()  # noqa: SLF001
    item.setImage(np.zeros((1024, 1024, 3), np.uint8), autoLevels=False, levels=(0.0, 255.0))
    assert not item._render_rgb()  # noqa: SLF001 - downsampled to the screen by pyqtgraph


def test_the_input_preview_shows_a_live_sized_frame_exactly(qtbot):
    canvas = ImageCanvas(passive=False, colorbar=False)
    qtbot.addWidget(canvas)
    canvas.resize(200, 200)
    canvas.show()
    frame = np.random.default_rng(5).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    canvas.set_image(frame, (0.0, 255.0))
    canvas.grab()  # paint: renders the item
    np.testing.assert_array_equal(rgba_array(canvas.image.qimage)[..., :3], frame)
