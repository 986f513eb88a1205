"""How features attach to the main window: its side of :class:`~actviz.ui.host.WindowHost`.

:class:`HostSlots` is mixed into :class:`~actviz.ui.window.main_window.MainWindow`: tabs, docks
(each with its View-menu entry), menu actions, toolbars, status-bar widgets, the prediction
panel's and the Overview's extra rows, the channel view, messages. Each is a few lines over the
window's parts, so a feature never touches a widget it did not make.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QResizeEvent
from PySide6.QtWidgets import QDialog, QDockWidget, QMainWindow, QMenu, QToolBar, QWidget

from actviz.ui.panels.deferred import DeferredCall

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.panels.channel_view import ChannelView
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.tree.dock import ModelDock
    from actviz.ui.window.actions import WindowActions
    from actviz.ui.window.central import Centre, StatusWidgets
    from actviz.ui.window.result_display import ResultDisplay

__all__ = ["HostSlots"]

#: The most of the window's width a dock takes when it is shown (its minimum permitting).
DOCK_MAX_SHARE = 0.3


class HostSlots:
    """The attach points of :class:`~actviz.ui.host.WindowHost` (a mixin of a QMainWindow)."""

    commands: WindowActions
    centre: Centre
    status: StatusWidgets
    display: ResultDisplay
    model_dock: ModelDock
    #: The window's last height not forced by its docks' minimum heights (0: none yet).
    _chosen_height: int

    # ------------------------------------------------------------------ tabs and docks
    def add_tab(self, widget: QWidget, title: str) -> None:
        """Add a central tab after the Layers and Overview tabs."""
        self.centre.tabs.addTab(widget, title)

    def set_tab_visible(self, widget: QWidget, visible: bool) -> None:
        """Show or hide the tab of ``widget`` (a tab with nothing to show is hidden)."""
        tabs = self.centre.tabs
        if not visible and tabs.currentWidget() is widget:
            # Qt would move on to the next visible tab (Compare, empty): back to Layers.
            tabs.setCurrentIndex(0)
        tabs.setTabVisible(tabs.indexOf(widget), visible)

    def show_tab(self, widget: QWidget | None = None) -> None:
        """Bring a tab to the front (None: the Layers tab)."""
        tabs = self.centre.tabs
        tabs.setCurrentWidget(widget) if widget is not None else tabs.setCurrentIndex(0)

    def current_tab(self) -> QWidget | None:
        return self.centre.tabs.currentWidget()

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
        main: QMainWindow = self  # type: ignore[assignment]
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
        self.commands.view_menu.addAction(dock.toggleViewAction())
        dock.visibilityChanged.connect(lambda shown, d=dock: shown and self._fit_dock_soon(d))

    def _fit_dock_soon(self, dock: QDockWidget) -> None:
        """Fit ``dock``'s width on the next event-loop turn (once it has its geometry). One
        timer of the window's, not a ``QTimer.singleShot`` per call: PySide keeps a pending
        single shot's function, and the window it closes over, when its context object is
        deleted first (a dock shown just before the window closed kept the whole window)."""
        pending: list[QDockWidget] = self.__dict__.setdefault("_docks_to_fit", [])
        if dock not in pending:
            pending.append(dock)
        fit = self.__dict__.get("_dock_fit_call")
        if fit is None:
            fit = self.__dict__["_dock_fit_call"] = DeferredCall(self, self._fit_pending_docks)  # type: ignore[arg-type]
        fit.request()

    def _fit_pending_docks(self) -> None:
        docks, self.__dict__["_docks_to_fit"] = self.__dict__.get("_docks_to_fit", []), []
        for dock in docks:
            try:
                self._fit_dock(dock)
            except RuntimeError:  # deleted meanwhile
                pass

    def fit_dock_width(self, dock: QDockWidget) -> None:
        """Give ``dock`` the width of its content: its size hint, no more than the width it
        was added with; a dock tabbed with others or floating is left as it is."""
        main: QMainWindow = self  # type: ignore[assignment]
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
        main: QMainWindow = self  # type: ignore[assignment]
        self.fit_dock_width(dock)
        chosen = self._chosen_height
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

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)  # type: ignore[misc]
        main: QMainWindow = self  # type: ignore[assignment]
        if event.size().height() > main.minimumSizeHint().height():
            self._chosen_height = event.size().height()

    def resize_dock(self, dock: QDockWidget, width: int) -> None:
        """Give ``dock`` this width (its area's other docks follow)."""
        main: QMainWindow = self  # type: ignore[assignment]
        main.resizeDocks([dock], [width], Qt.Orientation.Horizontal)

    def dock_back(
        self, dock: QDockWidget, area: Qt.DockWidgetArea, *, width: int | None = None
    ) -> None:
        """Dock ``dock`` again in ``area`` (Reset window layout): not floating, at ``width``."""
        main: QMainWindow = self  # type: ignore[assignment]
        dock.setFloating(False)
        main.addDockWidget(area, dock)  # moves it back from wherever it was
        if width is not None:
            self.resize_dock(dock, width)

    # ------------------------------------------------------------------ menus, toolbars, status
    def menu(self, title: str) -> QMenu:
        """The menu-bar menu titled ``title`` ("File", "View", ...), made when missing."""
        main: QMainWindow = self  # type: ignore[assignment]
        for action in main.menuBar().actions():
            menu = action.menu()
            if menu is not None and action.text().replace("&", "") == title:
                return menu
        return main.menuBar().addMenu(f"&{title}")

    def add_menu_action(
        self, menu: str, action: QAction, *, before: str | None = None, shortcut: bool = True
    ) -> None:
        """Put ``action`` in menu ``menu`` (before the entry whose text is ``before``);
        ``shortcut``: its shortcut works anywhere in the window, even with its dock closed."""
        target = self.menu(menu)
        entries = {a.text().replace("&", ""): a for a in target.actions()}
        if before in entries:
            target.insertAction(entries[before], action)
        else:
            target.addAction(action)
        if shortcut:
            self.addAction(action)  # type: ignore[attr-defined]

    def add_toolbar(self, toolbar: QToolBar, *, new_row: bool = False) -> None:
        """Add a toolbar (``new_row``: below the existing ones)."""
        main: QMainWindow = self  # type: ignore[assignment]
        if new_row:
            main.addToolBarBreak()
        main.addToolBar(toolbar)

    def offer_pin_comparison(self, compare: Callable[[Any], object]) -> None:
        """Run > Pinned results offers "Compare with the latest run": ``compare(pin)``."""
        pins_ui = self.pins_ui  # type: ignore[attr-defined]
        pins_ui.compare_with = compare
        pins_ui.refresh_pins_menu()

    def offer_session_store(self, store: Any) -> None:
        """The part that saves and opens session files (``session_state()``, ``open_session``,
        the autosave and the start's restore offer): what :func:`actviz.session.save` and the
        app reach through ``window.session_store`` (None without one)."""
        self.session_store = store

    def add_status_widget(self, widget: QWidget) -> None:
        """A permanent widget at the right of the status bar."""
        self.statusBar().addPermanentWidget(widget)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ panel slots
    def add_prediction_widget(self, widget: QWidget) -> None:
        """An extra row under the prediction panel's bars (before/after tables)."""
        self.centre.prediction_panel.add_row(widget)

    def set_prediction_bars_visible(self, visible: bool) -> None:
        self.centre.prediction_panel.set_bars_visible(visible)

    def add_overview_widget(self, widget: QWidget, *, row: str = "top") -> None:
        """An extra panel in the Overview's ``row``: "top" (beside Grad-CAM), "bottom"
        (beside the statistics) or "new" (a row of its own)."""
        rows, top, bottom = self.centre.overview_splitters
        {"top": top, "bottom": bottom, "new": rows}[row].addWidget(widget)

    @property
    def channel_view(self) -> ChannelView:
        """The large view of one channel beside the layer panels."""
        return self.centre.channel_view

    @property
    def layer_panels(self) -> Mapping[str, LayerPanel]:
        """The layer panels of the result shown, by layer name, in execution order."""
        return self.display.layer_panels

    def panel(self, layer: str) -> LayerPanel | None:
        """The panel showing ``layer`` (None when it has none)."""
        return self.display.layer_panels.get(layer)

    def reveal_panel(self, layer: str) -> None:
        """Scroll the Layers tab so ``layer``'s panel is in view."""
        panel = self.panel(layer)
        if panel is not None:
            self.centre.layers_scroll.ensureWidgetVisible(panel)

    def refresh_panel(self, layer: str) -> None:
        """Show ``layer`` anew in its panel (a feature changed what it decorates it with)."""
        self.display.refresh_panel(layer)

    def page_channels(self, layer: str) -> int:
        """Channels per mosaic page of ``layer`` in its panel."""
        return self.display.page_size(layer)

    def add_tile_menu_entries(self, fill: Callable[[QMenu, str, tuple[int, ...]], None]) -> None:
        """A feature's entries in a layer panel's tile menu (a right click on tiles):
        ``fill(menu, layer, channels)`` adds them to the menu being built."""
        self.display.tile_menu_fillers.append(fill)

    def fill_tile_menu(self, menu: QMenu, layer: str, channels: Sequence[int]) -> None:
        """Add every feature's tile-menu entries for ``channels`` of ``layer`` to ``menu``
        (called by whatever builds the tile menu)."""
        chosen = tuple(int(c) for c in channels)
        for fill in list(self.display.tile_menu_fillers):
            fill(menu, layer, chosen)

    def show_input_image(self, image: np.ndarray | None, caption: str) -> None:
        """Show a picture of the input in the Model dock's preview."""
        self.model_dock.input_preview.set_image(image, caption)

    def dialog_parent(self) -> QWidget:
        """The parent of a feature's dialogs and menus (the window)."""
        return self  # type: ignore[return-value]

    def model_dialog(self, *, keep_open: bool = False) -> QDialog:
        """A new Open model dialog over the window, listing the recent models (not shown)."""
        from actviz.ui.window.dialogs import OpenModelDialog

        recent = self.settings.recent_models()  # type: ignore[attr-defined]
        return OpenModelDialog(self.dialog_parent(), recent=recent, keep_open=keep_open)

    def sample_inputs(self) -> list[str]:
        """The bundled sample inputs of the model shown (for choosers)."""
        return [str(p) for p in getattr(self.files, "samples", [])]  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ sessions
    def layout_state(self) -> bytes:
        """The window layout (docks, toolbars) as Qt's ``saveState()`` bytes."""
        return bytes(self.saveState().data())  # type: ignore[attr-defined]

    def restore_layout_state(self, data: bytes) -> bool:
        """Put back a layout of :meth:`layout_state`; False when Qt refuses the bytes."""
        from PySide6.QtCore import QByteArray

        return bool(self.restoreState(QByteArray(bytes(data))))  # type: ignore[attr-defined]

    def session_parts(self) -> dict[str, object]:
        """What the features keep in a session file: each feature with a ``session_part()``
        gives a ``{key: JSON-able}`` (the comparison set-up, the scan's cache key, ...)."""
        parts: dict[str, object] = {}
        for feature in getattr(self, "features", {}).values():
            part = getattr(feature, "session_part", None)
            if callable(part):
                parts.update(part() or {})
        return parts

    def report_parts(self) -> dict[str, object]:
        """What the features add to File > Export report: each feature with a
        ``report_part()`` gives ``write_report`` arguments (a comparison, scan sheets); a
        value may be a function, called on the capture worker when the report is written."""
        parts: dict[str, object] = {}
        figures: list[object] = []  # several features add figures: all of them go in
        for feature in getattr(self, "features", {}).values():
            part = getattr(feature, "report_part", None)
            if callable(part):
                given = dict(part() or {})
                if "figures" in given:
                    figures.append(given.pop("figures"))
                parts.update(given)
        if figures:

            def all_figures() -> list[object]:
                return [f for given in figures for f in (given() if callable(given) else given)]

            parts["figures"] = all_figures
        return parts

    def restore_session_parts(self, parts: Mapping[str, object]) -> None:
        """Give each feature with a ``restore_session_part(parts)`` the parts it saved."""
        for feature in getattr(self, "features", {}).values():
            restore = getattr(feature, "restore_session_part", None)
            if callable(restore):
                restore(parts)

    # ------------------------------------------------------------------ messages
    def show_error(self, text: str, source: str = "action", *, details: str = "") -> None:
        """Show ``text`` (one readable sentence) as an error in the banner, never a blocking
        dialog; ``details`` (a traceback) goes behind its Details button."""
        self.centre.banner.set_messages(source, [("error", text)], details=details)

    def show_warning(self, text: str, source: str = "action") -> None:
        """Show ``text`` as a warning in the banner."""
        self.centre.banner.set_messages(source, [("warning", text)])

    def clear_messages(self, source: str | None = None) -> None:
        """Clear the banner's messages from ``source`` (None: all)."""
        self.centre.banner.clear(source) if source is not None else self.centre.banner.clear()

    def show_status(self, text: str) -> None:
        """Set the status bar's text."""
        self.status.status_label.setText(text)
