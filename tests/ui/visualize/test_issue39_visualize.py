"""Issue 39, defect 10: "What channels want" says its steps and an estimate of the time left
from the first step; the channel view drops its "Cancelled." once the page has made the
picture of the channel it shows (with the same settings)."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt

from tests.ui.conftest import frame

LEFT = Qt.MouseButton.LeftButton
#: Steps of the pictures: enough to cancel one on its way, few enough for a page in seconds.
STEPS = 300


def test_the_page_says_its_steps_and_time_left(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    win.visualize.configure(size=16, steps=4096)
    page = feature.page
    win.open_dock("What channels want")
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: page.job.progress[0] >= 2, timeout=60_000)
    win.qtbot.waitUntil(lambda: "left" in page.dock.message.text(), timeout=10_000)
    text = page.dock.message.text()
    assert text.startswith("Synthesising what 6 channels want…"), text
    m = re.search(r"Step (\d+) of (\d+), about (\d+(\.\d)?) (s|min|h) left", text)
    assert m is not None, text
    assert int(m.group(2)) == 2 * 4096  # 6 channels: two chunks of 4096 steps
    win.qtbot.mouseClick(page.dock.cancel_button, LEFT)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    from actviz.ui.feature_job import step_message

    assert step_message("Doing…", 10, 40, 5.0) == "Doing… Step 10 of 40, about 15 s left."
    assert step_message("Doing…", 40, 40, 5.0) == "Doing… Step 40 of 40."


def test_the_channel_view_shows_the_picture_the_page_made(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    page = feature.page
    section = win.visualize.configure(size=16, steps=STEPS)
    assert win.window.display.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    win.qtbot.mouseClick(section.button, LEFT)
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 1, timeout=60_000)
    win.qtbot.mouseClick(section.cancel_button, LEFT)
    win.qtbot.waitUntil(lambda: not feature.job.running, timeout=60_000)
    assert "Cancelled" in section.message.text()
    # The page of conv2, with the same settings, makes ch 1's picture.
    win.open_dock("What channels want")
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert 1 in page.dock.mosaic.filled()
    win.qtbot.waitUntil(lambda: feature.shown is not None, timeout=10_000)
    assert "Cancelled" not in section.message.text()
    assert section.message.text().startswith("What ch 1 wants"), section.message.text()
    assert section.image is not None
