"""The module tree's right-click menu: a real right click on a row, answered with Esc, leaves
no menu behind (each one made was a child of the dock for as long as the window lived)."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu

from tests.ui.conftest import frame


def test_right_clicks_on_the_tree_leave_no_menu_behind(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), ["conv1"], size=(1280, 720))
    win.settle()
    dock = win.window.model_dock
    view = dock.tree_view
    index = dock.tree_proxy.mapFromSource(dock.tree_model.index_of("conv1"))
    centre = view.visualRect(index).center()
    assert index.isValid() and view.indexAt(centre) == index
    seen: list[list[str]] = []

    def answer() -> None:  # the menu runs its own loop: read it, then Esc as a user would
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            QTimer.singleShot(20, answer)
            return
        seen.append([a.text() for a in menu.actions() if a.text()])
        qtbot.keyClick(menu, Qt.Key.Key_Escape)

    for _ in range(3):
        QTimer.singleShot(20, answer)
        # What a right click's release delivers (QTest's clicks skip the window's synthesis).
        event = QContextMenuEvent(
            QContextMenuEvent.Reason.Mouse, centre, view.viewport().mapToGlobal(centre)
        )
        QApplication.sendEvent(view.viewport(), event)
        qtbot.waitUntil(lambda: QApplication.activePopupWidget() is None, timeout=30_000)
    qtbot.wait(50)  # deferred deletes
    assert len(seen) == 3 and seen[0][0] == "Tick all leaves below conv1"
    assert dock.findChildren(QMenu) == []
