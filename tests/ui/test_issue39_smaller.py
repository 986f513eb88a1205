"""Issue 39, the smaller defects: what one part changed and another did not follow."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def _window(actviz_window, size=(1024, 640)):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2"], size=size)
    win.run_and_wait()
    return win


def test_a_long_status_message_stops_before_the_run_time(actviz_window):
    win = _window(actviz_window)
    window = win.window
    timing = window.status.timing_label
    assert timing.text().startswith("ran in")
    long = "Opened " + "/very/long/folder/name" * 12 + "/model.pt and its 1000 class names"
    window.show_status(long)
    win.settle()
    label = window.status.status_label
    assert label.text() == long  # the whole message, for tests and the tooltip
    assert label.geometry().right() < timing.geometry().left()
    assert label.shown_text().endswith("…") and label.shown_text() != long
    assert label.minimumSizeHint().width() < window.width() // 4
    assert window.width() == 1024  # the message did not widen the window


def test_a_model_dialog_error_stays_with_its_tab(qtbot):
    from PySide6.QtCore import Qt

    from actviz.ui.window.dialogs import OpenModelDialog

    dialog = OpenModelDialog(names=["resnet18"], keep_open=True)
    qtbot.addWidget(dialog)
    dialog.show()
    bar = dialog.tabs.tabBar()

    def click_tab(i: int) -> None:
        qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(i).center())

    click_tab(1)  # File, nothing chosen: Open says so
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert dialog.message() == "Choose a file first."
    click_tab(0)
    assert dialog.tabs.currentIndex() == 0 and dialog.message() == ""
    click_tab(1)  # back on its tab, the error shows again
    assert dialog.message() == "Choose a file first."
    dialog.close()
