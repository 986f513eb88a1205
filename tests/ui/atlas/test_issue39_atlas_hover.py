"""Issue 39, defect 7: the atlas's hover thumbnail stays while the pointer rests on the dot
(it went after ~0.5 s: the plot's own tooltip event hid it), and the side panel forgets the
image once the pointer leaves the dots (it kept the last one)."""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QToolTip

from actviz.ui.atlas.view import HOVER_HINT
from tests.ui.atlas.atlas_windows import scanned_demo


def test_the_hover_thumbnail_stays_while_the_pointer_rests(qtbot, actviz_window, tmp_path):
    win, atlas_ui = scanned_demo(actviz_window, tmp_path)
    window = win.window
    view = atlas_ui.view
    window.host.show_tab(view)
    win.settle()
    row = 3
    pos = view.widget_pos_of(row)
    qtbot.mouseMove(view.plot.viewport(), pos)
    # The picture is decoded off the GUI thread: the tooltip gains it when it is ready.
    qtbot.waitUntil(lambda: "<img" in atlas_ui.hover_text, timeout=30_000)
    qtbot.waitUntil(QToolTip.isVisible, timeout=30_000)
    # The pointer rests: Qt's hover delay passes and the viewport gets its tooltip event.
    qtbot.wait(1500)
    assert QToolTip.isVisible() and "<img" in QToolTip.text()
    name = atlas_ui.source(row).split("/")[-1]
    assert name in view.hover_label.text()
    # Off the dots: the tooltip and the side panel's image go.
    qtbot.mouseMove(view.plot.viewport(), QPoint(2, 2))
    qtbot.waitUntil(lambda: atlas_ui.hover_text == "", timeout=30_000)
    assert view.hover_label.text() == HOVER_HINT
