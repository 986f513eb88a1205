"""The window's docks: restored where a saved layout put them, listed in the View menu, as wide
as their content, tabbed rather than make the window taller."""

from __future__ import annotations

import contextlib
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget

from actviz.ui.panels.deferred import DeferredCall

#: The most of the window's width a dock takes when it is shown (its minimum permitting).
DOCK_MAX_SHARE = 0.3
_SIDES = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)


class Docks:
    """The :class:`~actviz.ui.host.Host`'s dock calls over ``window``."""

    def __init__(self, window: Any) -> None:
        self._w = window
        self._docks_to_fit: list[QDockWidget] = []
        # A timer of the window's: a pending QTimer.singleShot would keep the window alive.
        self._dock_fit_call = DeferredCall(window, self._fit_pending_docks)

    def add_dock(
        self,
        dock: QDockWidget,
        area: Qt.DockWidgetArea = Qt.DockWidgetArea.RightDockWidgetArea,
        *,
        width: int | None = None,
        hidden: bool = True,
    ) -> None:
        """Add ``dock`` where a saved layout put it (else in ``area``) and list it in View."""
        main = self._w
        if not dock.objectName():
            dock.setObjectName(dock.windowTitle().replace(" ", "") + "Dock")
        if not main.restoreDockWidget(dock):
            main.addDockWidget(area, dock)
            if width is not None:
                self.resize_dock(dock, width)
            dock.setVisible(not hidden)
        # Sized to what it asks for when shown, not to Qt's default share.
        dock.setProperty("actviz_width", width or 0)
        self._w.commands.view_menu.addAction(dock.toggleViewAction())
        dock.visibilityChanged.connect(lambda _shown, d=dock: self._fit_dock_soon(d))

    def _fit_dock_soon(self, dock: QDockWidget) -> None:
        """Fit ``dock``'s width on the next event-loop turn (once it has its geometry)."""
        if dock not in self._docks_to_fit:
            self._docks_to_fit.append(dock)
        self._dock_fit_call.request()

    def _fit_pending_docks(self) -> None:
        docks, self._docks_to_fit = self._docks_to_fit, []
        for dock in docks:
            with contextlib.suppress(RuntimeError):  # deleted meanwhile
                self._fit_dock(dock)

    def fit_dock_width(self, dock: QDockWidget) -> None:
        """Give a docked, untabbed ``dock`` its size hint's width; stacked docks take the
        widest asked (a narrow one never squeezes a wide one), and a closed dock's width goes
        back to the panels, not to the docks left."""
        main = self._w
        area = main.dockWidgetArea(dock)
        if dock.isFloating() or area not in _SIDES:
            return
        stacked = self._docked(area)
        if (dock.isVisible() and main.tabifiedDockWidgets(dock)) or not stacked:
            return
        dock = dock if dock.isVisible() else stacked[0]
        width = max(self._wanted_width(d) for d in stacked)
        if width != dock.width():
            self.resize_dock(dock, width)

    def _docked(self, area: Qt.DockWidgetArea) -> list[QDockWidget]:
        """The docks shown, not floating, in ``area``."""
        main = self._w
        shown = [d for d in main.findChildren(QDockWidget) if d.isVisible() and not d.isFloating()]
        return [d for d in shown if main.dockWidgetArea(d) == area]

    def _wanted_width(self, dock: QDockWidget) -> int:
        """``dock``'s size hint's width, at most the width asked and the window's share."""
        width = dock.sizeHint().width()
        asked = int(dock.property("actviz_width") or 0)
        if asked > 0:
            width = min(width, asked)
        width = min(width, int(self._w.width() * DOCK_MAX_SHARE))
        return max(width, dock.minimumSizeHint().width())

    def _fit_dock(self, dock: QDockWidget) -> None:
        """A dock that makes the window taller than the user made it is tabbed instead."""
        main = self._w
        self.fit_dock_width(dock)
        chosen = self._w.chosen_height
        if not chosen or main.height() <= chosen or dock.isFloating() or not dock.isVisible():
            return
        if main.isMaximized() or main.isFullScreen():
            return
        tabbed = set(main.tabifiedDockWidgets(dock))
        others = [
            d for d in self._docked(main.dockWidgetArea(dock)) if d is not dock and d not in tabbed
        ]
        if not others:
            return
        main.tabifyDockWidget(max(others, key=lambda d: d.minimumSizeHint().height()), dock)
        dock.raise_()
        main.resize(main.width(), chosen)

    def resize_dock(self, dock: QDockWidget, width: int) -> None:
        """Give ``dock`` this width (its area's other docks follow)."""
        self._w.resizeDocks([dock], [width], Qt.Orientation.Horizontal)

    def dock_back(
        self, dock: QDockWidget, area: Qt.DockWidgetArea, *, width: int | None = None
    ) -> None:
        """Dock ``dock`` again in ``area`` (Reset window layout): not floating, at ``width``."""
        dock.setFloating(False)
        self._w.addDockWidget(area, dock)  # moves it back from wherever it was
        if width is not None:
            self.resize_dock(dock, width)
