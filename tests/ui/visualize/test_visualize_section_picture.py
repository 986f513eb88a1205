"""The channel view's What it wants picture keeps to a size that leaves the channel's maps
their room: a large synthesised image (size 400) took 353 px of a 608 px channel view, was
cut off at the bottom and squeezed the activation map to a thumbnail."""

from __future__ import annotations

import numpy as np

from actviz.ui.visualize.section import MAX_SHOWN, MIN_SHOWN, WantsSection


def test_a_large_picture_is_drawn_smaller_and_a_small_one_enlarged(qtbot):
    section = WantsSection()
    qtbot.addWidget(section)
    big = np.random.default_rng(0).integers(0, 255, (400, 400, 3), dtype=np.uint8)
    section.show_image(big)
    shown = section.picture.pixmap()
    assert max(shown.width(), shown.height()) <= MAX_SHOWN < 400
    assert shown.width() == shown.height()  # the aspect kept
    assert "400" in section.picture.toolTip()  # it says it is drawn smaller
    np.testing.assert_array_equal(section.image, big)  # the picture itself is whole
    small = np.zeros((24, 24, 3), np.uint8)
    section.show_image(small)
    assert section.picture.pixmap().width() >= MIN_SHOWN
    assert section.picture.toolTip() == ""
