"""The channel view's "What it wants": the picture is the engine's, a reopened channel shows
it at once from the cache, a long synthesis cancels and the window stays usable."""

from __future__ import annotations

import numpy as np
from PySide6 import QtGui

from actviz.analysis.visualize import visualize
from tests.ui.conftest import frame

LAYERS = ["conv1", "conv2"]
SETTINGS = {"objective": "channel", "steps": 6, "size": 24}


def _opened(actviz_window, tiny_cnn, channel=2):
    win = actviz_window(tiny_cnn, frame(3), LAYERS)
    win.run_and_wait()
    feature = win.feature("visualize")
    section = feature.section
    section.objective_box.setCurrentText(SETTINGS["objective"])
    section.steps_spin.setValue(SETTINGS["steps"])
    section.size_spin.setValue(SETTINGS["size"])
    assert win.window.open_channel("conv2", channel)
    assert section.isVisible()
    _looked_up(win, feature)
    return win, feature, section


def _looked_up(win, feature):
    """Wait for the cache's answer for the channel shown (asked off the GUI thread)."""
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)


def _pixels(section) -> np.ndarray:
    image = section.picture.pixmap().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB888)
    h, w = image.height(), image.width()
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(h, image.bytesPerLine())
    return rows[:, : 3 * w].reshape(h, w, 3).copy()


def _wait_done(win, feature):
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)


def test_what_it_wants_shows_the_engines_picture_and_reopens_from_the_cache(
    actviz_window, tiny_cnn
):
    win, feature, section = _opened(actviz_window, tiny_cnn)
    assert feature.shown is None and not section.picture.isVisible()  # nothing cached yet
    section.button.click()
    assert feature.is_busy() and section.cancel_button.isVisible()
    _wait_done(win, feature)
    want = visualize(tiny_cnn, "conv2", [2], **SETTINGS)
    vis = feature.shown
    assert vis is not None and vis.channels == (2,) and vis.from_cache == (False,)
    np.testing.assert_array_equal(vis.images, want.images)
    np.testing.assert_array_equal(section.image, want.image_uint8(0))
    # The label draws those pixels, each enlarged by a whole factor.
    shown = _pixels(section)
    factor = shown.shape[0] // SETTINGS["size"]
    assert factor >= 1 and shown.shape[:2] == (24 * factor, 24 * factor)
    np.testing.assert_array_equal(shown[::factor, ::factor], want.image_uint8(0))
    assert want.image_uint8(0).std() > 0

    # Another channel: nothing cached for it; back to channel 2: shown at once, from the cache.
    assert win.window.open_channel("conv2", 3)
    _looked_up(win, feature)
    assert feature.shown is None and not section.picture.isVisible()
    assert win.window.open_channel("conv2", 2)
    assert feature.shown is None  # until the cache answered
    _looked_up(win, feature)
    vis = feature.shown
    assert vis is not None and vis.from_cache == (True,) and not feature.is_busy()
    np.testing.assert_array_equal(section.image, want.image_uint8(0))
    assert "(saved)" in section.message.text()
    # Other settings are another picture (not cached).
    section.steps_spin.setValue(SETTINGS["steps"] + 1)
    _looked_up(win, feature)
    assert feature.shown is None and not section.picture.isVisible()
    section.steps_spin.setValue(SETTINGS["steps"])
    _looked_up(win, feature)
    assert feature.shown is not None and feature.shown.from_cache == (True,)


def test_a_long_synthesis_cancels_and_the_window_stays_usable(actviz_window, tiny_cnn):
    win, feature, section = _opened(actviz_window, tiny_cnn, channel=1)
    section.steps_spin.setValue(100_000 if section.steps_spin.maximum() >= 100_000 else 4096)
    section.button.click()
    win.qtbot.waitUntil(lambda: feature._progress[0] >= 2, timeout=60_000)
    win.window.cancel()  # Esc
    _wait_done(win, feature)
    assert feature.shown is None and "Cancelled" in section.message.text()
    assert section.button.isEnabled() and not section.cancel_button.isVisible()
    # The window still runs, and another synthesis works.
    win.run_and_wait()
    section.steps_spin.setValue(3)
    section.button.click()
    _wait_done(win, feature)
    assert feature.shown is not None and feature.shown.settings["steps"] == 3


def test_the_report_holds_what_the_channel_wants(actviz_window, tiny_cnn):
    win, feature, section = _opened(actviz_window, tiny_cnn)
    assert "figures" not in win.window.report_parts()  # nothing shown yet
    section.button.click()
    _wait_done(win, feature)
    ((caption, picture),) = win.window.report_parts()["figures"]()
    assert caption.startswith("What conv2 ch 2 wants")
    np.testing.assert_array_equal(picture, feature.shown.image_uint8(0))
