"""The What channels want dock while the model is busy: a page asked for while What it wants
synthesises on the capture worker waits for it (its copy of the model is made there between
two jobs), and the dock says so instead of "Synthesising…" over grey tiles that do not move."""

from __future__ import annotations

from tests.ui.conftest import frame


def test_a_page_asked_for_during_what_it_wants_says_it_waits_then_synthesises(
    actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.feature("visualize")
    section = feature.section
    section.size_spin.setValue(16)
    section.steps_spin.setValue(4096)
    assert win.window.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    section.button.click()
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 1, timeout=60_000)
    dock = feature.page.dock
    assert feature.visualise_page("conv2", 0)
    text = dock.message.text()
    assert "Waiting" in text and "What it wants" in text and "Synthesising" not in text, text
    assert dock.cancel_button.isVisible()  # the wait can be cancelled as the work can
    # What it wants stops: the page gets its copy and synthesises, saying so.
    section.cancel_button.click()
    win.qtbot.waitUntil(lambda: feature.page.job.running, timeout=60_000)
    assert dock.message.text().startswith("Synthesising what"), dock.message.text()
    win.window.cancel()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)


def test_what_it_wants_cancel_button_leaves_the_page_running(actviz_window, tiny_cnn):
    # The channel view's Cancel stopped the What channels want page too (Esc stops both).
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.feature("visualize")
    section, page = feature.section, feature.page
    section.size_spin.setValue(16)
    section.steps_spin.setValue(4096)
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: page.job.progress[0] >= 1, timeout=60_000)
    assert win.window.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    section.button.click()
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 1, timeout=60_000)
    section.cancel_button.click()
    win.qtbot.waitUntil(lambda: not feature.job.running, timeout=60_000)
    assert "Cancelled" in section.message.text()
    assert page.is_busy() and page.dock.cancel_button.isVisible()
    assert "Cancelled" not in page.dock.message.text()
    page.dock.cancel_button.click()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert "Cancelled" in page.dock.message.text()
