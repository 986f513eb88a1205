"""Issue 39, defect 8: a first start on a 1024x640 screen opens the window at the size it is
laid out for (it opened at 921x576: the toolbar folded into a chevron, the module tree cut)."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QScreen
from PySide6.QtWidgets import QToolBar, QToolButton

from actviz.ui.window.central import MINIMUM_SIZE, default_window_size


def test_a_first_start_on_a_small_screen_opens_at_the_minimum(actviz_window, monkeypatch):
    monkeypatch.setattr(QScreen, "availableSize", lambda _self: QSize(1024, 640))
    win = actviz_window(size=None)
    window = win.window
    win.settle()
    assert (window.width(), window.height()) == (1024, 640)
    assert window.width() >= MINIMUM_SIZE.width() and window.height() >= MINIMUM_SIZE.height()
    # Every toolbar shows all its entries: no overflow chevron.
    for bar in window.findChildren(QToolBar):
        if not bar.isVisible():
            continue
        chevrons = [
            b
            for b in bar.findChildren(QToolButton)
            if b.objectName() == "qt_toolbar_ext_button" and b.isVisible()
        ]
        assert not chevrons, bar.windowTitle()
    # The module tree's columns are on screen.
    tree = window.model_dock.tree_view
    assert tree.viewport().width() >= tree.header().sectionSize(0)
    # Larger screens keep 90 % of theirs; a screen smaller than the minimum is filled.
    assert default_window_size(QSize(1280, 720)) == QSize(1152, 648)
    assert default_window_size(QSize(1000, 600)) == QSize(1000, 600)
