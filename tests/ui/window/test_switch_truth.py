"""After another model is opened, nothing in the main window speaks of the previous one: the
status bar's line about the last run and the Layers tab's scroll position (also when the
switch happens on another tab) start over."""

from __future__ import annotations

from tests.helpers import frame
from tests.ui.tiny_models import seeded_tiny_cnn


def test_the_status_line_forgets_the_previous_models_run(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(1), ["conv1", "conv2", "fc"])
    result = win.run_and_wait()
    assert win.status_text() == f"3 layer(s) · target {result.target_text}"
    win.set_model(seeded_tiny_cnn(1), layers=["conv1"])  # no run yet: nothing to say about one
    assert "layer(s) · target" not in win.status_text()
    assert win.window.status.timing_label.text() == ""
    result = win.run_and_wait()
    assert win.status_text() == f"1 layer(s) · target {result.target_text}"


def test_the_layers_tab_starts_at_the_top_for_another_model(actviz_window):
    names = ["conv1", "relu", "conv2", "pool", "flatten", "fc"]
    win = actviz_window(seeded_tiny_cnn(), frame(1), names, size=(1280, 720))
    win.run_and_wait()
    bar = win.window.centre.layers_scroll.verticalScrollBar()
    win.reveal("fc")
    win.qtbot.waitUntil(lambda: bar.value() > 0, timeout=30_000)
    tabs = win.window.centre.tabs
    tabs.setCurrentWidget(win.window.centre.overview_tab)  # the switch made on another tab
    win.settle()
    win.set_model(seeded_tiny_cnn(1), layers=names)
    win.run_and_wait()
    tabs.setCurrentWidget(win.window.centre.layers_splitter)
    win.settle()
    assert bar.value() == 0
    assert not win.panel("conv1").visibleRegion().isEmpty()
