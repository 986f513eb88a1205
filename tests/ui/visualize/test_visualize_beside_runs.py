"""What it wants synthesises on a copy of the model on a thread of its own: the window's runs
(and live frames, which are runs) go on meanwhile and no longer replace it."""

from __future__ import annotations

import numpy as np

from actviz.analysis.visualize.feature_vis import visualize
from tests.ui.conftest import frame


def test_a_run_during_what_it_wants_leaves_it_running_and_it_finishes(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    section = win.visualize.configure(size=16, steps=4096)
    assert win.window.display.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    section.button.click()
    assert feature.is_busy() and section.cancel_button.isVisible()
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 1, timeout=60_000)
    # Runs meanwhile (a changed input, a live frame): they finish and the synthesis goes on
    # (it said "A new run replaced the synthesis: press What it wants again").
    win.run_and_wait()
    win.run_and_wait()
    assert feature.job.running, section.message.text()
    assert "replaced" not in section.message.text()
    done = feature.job.progress[0]
    win.qtbot.waitUntil(lambda: feature.job.progress[0] > done, timeout=60_000)
    section.cancel_button.click()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert "Cancelled" in section.message.text()

    # A short one with a run asked for at once: the picture is the engine's, bit for bit
    # (the copy has the model's weights), and the window's model has no hooks left.
    section.steps_spin.setValue(5)
    section.button.click()
    win.window.runs.run()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    want = visualize(tiny_cnn, "conv2", [1], objective="channel", steps=5, size=16)
    assert feature.shown is not None, section.message.text()
    np.testing.assert_array_equal(feature.shown.images, want.images)
    win.wait_idle()
    assert not tiny_cnn.conv2._forward_hooks
    assert all(p.grad is None and p.requires_grad for p in tiny_cnn.parameters())


def test_a_channel_without_a_picture_says_what_the_button_does_with_which_settings(
    actviz_window, tiny_cnn
):
    # The row was a bare button under the maps: nothing said what it makes or how.
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    section = win.visualize.configure(size=16, steps=40)
    assert win.window.display.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    text = section.message.text()
    assert section.message.isVisible()
    assert "ch 1" in text and "40 steps, 16 px" in text and "channel objective" in text, text
    section.steps_spin.setValue(3)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    assert "3 steps, 16 px" in section.message.text()
    section.button.click()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert section.message.text().startswith("What ch 1 wants: activation")
