"""After another model is opened, nothing in the main window speaks of the previous one: the
status bar's line about the last run and the Layers tab's scroll position (also when the
switch happens on another tab) start over."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def _tiny(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return TinyCNN().eval()


def _x() -> torch.Tensor:
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def test_the_status_line_forgets_the_previous_models_run(actviz_window):
    win = actviz_window(_tiny(), _x(), ["conv1", "conv2", "fc"])
    result = win.run_and_wait()
    assert win.status_text() == f"3 layer(s) · target {result.target_text}"
    win.set_model(_tiny(1), layers=["conv1"])  # no run yet: nothing to say about one
    assert "layer(s) · target" not in win.status_text()
    assert win.window.status.timing_label.text() == ""
    result = win.run_and_wait()
    assert win.status_text() == f"1 layer(s) · target {result.target_text}"


def test_the_layers_tab_starts_at_the_top_for_another_model(actviz_window):
    names = ["conv1", "relu", "conv2", "pool", "flatten", "fc"]
    win = actviz_window(_tiny(), _x(), names, size=(1280, 720))
    win.run_and_wait()
    bar = win.window.centre.layers_scroll.verticalScrollBar()
    win.reveal("fc")
    win.qtbot.waitUntil(lambda: bar.value() > 0, timeout=5000)
    tabs = win.window.centre.tabs
    tabs.setCurrentWidget(win.window.centre.overview_tab)  # the switch made on another tab
    win.settle()
    win.set_model(_tiny(1), layers=names)
    win.run_and_wait()
    tabs.setCurrentWidget(win.window.centre.layers_splitter)
    win.settle()
    assert bar.value() == 0
    assert not win.panel("conv1").visibleRegion().isEmpty()
