"""The window's docks: where a feature's dock goes, how wide it is, and its fit to the window.

:class:`Docks` is what the :class:`~actviz.ui.window.hosting.Host` adds docks through: a dock
comes back where a saved layout put it, is listed in the View menu, takes the width of its
content when shown and is tabbed with another rather than make the window taller than the user
made it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget

from actviz.ui.panels.deferred import DeferredCall

__all__ = ["DOCK_MAX_SHARE", "Docks"]

#: The most of the window's width a dock takes when it is shown (its minimum permitting).
DOCK_MAX_SHARE = 0.3


class Docks:
    """The docks of ``window`` (its ``chosen_height`` and View menu are used)."""

    def __init__(self, window: Any) -> None:
        self._w = window
        self._docks_to_fit: list[QDockWidget] = []
        # One timer of the window's, not a ``QTimer.singleShot`` per dock (see _fit_dock_soon).
        self._dock_fit_call = DeferredCall(window, self._fit_pending_docks)

    def add_dock(
        self,
        dock: QDockWidget,
        area: Qt.DockWidgetArea = Qt.DockWidgetArea.RightDockWidgetArea,
        *,
        width: int | None = None,
        hidden: bool = True,
    ) -> None:
        """Add ``dock`` where a saved layout put it (else in ``area``, ``width`` wide, hidden
        unless ``hidden`` is False) and list it in the View menu."""
        main = self._w
        if not dock.objectName():
            dock.setObjectName(dock.windowTitle().replace(" ", "") + "Dock")
        if not main.restoreDockWidget(dock):
            main.addDockWidget(area, dock)
            if width is not None:
                self.resize_dock(dock, width)
            dock.setVisible(not hidden)
        # A hidden dock keeps no width of its own, so it is sized to what it asks for when
        # shown, not to Qt's default share of the window.
        dock.setProperty("actviz_width", width or 0)
        self._w.commands.view_menu.addAction(dock.toggleViewAction())
        dock.visibilityChanged.connect(lambda shown, d=dock: shown and self._fit_dock_soon(d))

    def _fit_dock_soon(self, dock: QDockWidget) -> None:
        """Fit ``dock``'s width on the next event-loop turn (once it has its geometry). One
        timer of the window's, not a ``QTimer.singleShot`` per call: PySide keeps a pending
        single shot's function, and the window it closes over, when its context object is
        deleted first (a dock shown just before the window closed kept the whole window)."""
        if dock not in self._docks_to_fit:
            self._docks_to_fit.append(dock)
        self._dock_fit_call.request()

    def _fit_pending_docks(self) -> None:
        docks, self._docks_to_fit = self._docks_to_fit, []
        for dock in docks:
            try:
                self._fit_dock(dock)
            except RuntimeError:  # deleted meanwhile
                pass

    def fit_dock_width(self, dock: QDockWidget) -> None:
        """Give ``dock`` the width of its content: its size hint, no more than the width it
        was added with; a dock tabbed with others or floating is left as it is."""
        main = self._w
        if dock.isFloating() or not dock.isVisible() or main.tabifiedDockWidgets(dock):
            return
        if main.dockWidgetArea(dock) not in (
            Qt.DockWidgetArea.LeftDockWidgetArea,
            Qt.DockWidgetArea.RightDockWidgetArea,
        ):
            return
        width = dock.sizeHint().width()
        asked = int(dock.property("actviz_width") or 0)
        if asked > 0:
            width = min(width, asked)
        # On a small screen the panels keep most of the width (at 1024 px a 380 px dock left
        # the layer panels a third of the window).
        width = min(width, int(main.width() * DOCK_MAX_SHARE))
        width = max(width, dock.minimumSizeHint().width())
        if width != dock.width():
            self.resize_dock(dock, width)

    def _fit_dock(self, dock: QDockWidget) -> None:
        """A dock shown under others whose minimum heights together make the window taller
        than the user made it (its bottom would leave a laptop's screen) is tabbed with the
        tallest of them instead, in front, and the window gets its height back."""
        main = self._w
        self.fit_dock_width(dock)
        chosen = self._w.chosen_height
        if (
            not chosen
            or main.height() <= chosen
            or dock.isFloating()
            or not dock.isVisible()
            or main.isMaximized()
            or main.isFullScreen()
        ):
            return
        area = main.dockWidgetArea(dock)
        tabbed = set(main.tabifiedDockWidgets(dock))
        others = [
            d
            for d in main.findChildren(QDockWidget)
            if d is not dock
            and d not in tabbed
            and d.isVisible()
            and not d.isFloating()
            and main.dockWidgetArea(d) == area
        ]
        if not others:
            return
        main.tabifyDockWidget(max(others, key=lambda d: d.minimumSizeHint().height()), dock)
        dock.raise_()
        main.resize(main.width(), chosen)

    def resize_dock(self, dock: QDockWidget, width: int) -> None:
        """Give ``dock`` this width (its area's other docks follow)."""
        main = self._w
        main.resizeDocks([dock], [width], Qt.Orientation.Horizontal)

    def dock_back(
        self, dock: QDockWidget, area: Qt.DockWidgetArea, *, width: int | None = None
    ) -> None:
        """Dock ``dock`` again in ``area`` (Reset window layout): not floating, at ``width``."""
        main = self._w
        dock.setFloating(False)
        main.addDockWidget(area, dock)  # moves it back from wherever it was
        if width is not None:
            self.resize_dock(dock, width)
