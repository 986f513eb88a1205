"""The one way a feature plugs into the explorer window: the :class:`Host` (``WindowHost``).

A feature is built with the host alone and never imports ``actviz.ui.window`` or another
feature, so each is added, removed and tested alone. The host is made before the window's parts.
Its docks (:class:`Docks`) go where a saved layout put them, are listed in the View menu, are as
wide as their content, and are tabbed rather than make the window taller."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import shiboken6
from PySide6.QtCore import QByteArray, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu, QToolBar, QWidget, QWidgetItem

from actviz.ui.feature_job import FeatureJob, StepsAndLine, refill_combo, show_line
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.private_model import ModelCopyService

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult
    from actviz.ui.panels.channel_view import ChannelView
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.private_model import PrivateModel
    from actviz.ui.worker import Job, Worker
    from actviz.workspace.session_state import Session

__all__ = [
    "HOST_SIGNALS", "Feature", "FeatureBase", "FeatureJob", "Host", "StepsAndLine", "WindowHost",
    "channels_text", "refill_combo", "show_line",
]  # fmt: skip

#: The window's signals a feature may connect to: the host re-exposes them (plugins' guarded).
HOST_SIGNALS = tuple(
    "run_started run_finished run_failed run_cancelled model_loaded model_load_failed input_loaded "
    "input_load_failed pinned_shown panel_created panel_shown tab_changed closed".split()
)

#: The most of the window's width a dock takes when it is shown (its minimum permitting).
DOCK_MAX_SHARE = 0.3
_SIDES = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)


def _window_attr(path: str, *, settable: bool = False) -> Any:
    """A property reading (``settable``: and writing) the window's ``path`` ("runs.run")."""
    *parts, name = path.split(".")

    def owner(host: Host) -> Any:
        return functools.reduce(getattr, parts, host._w)

    write = (lambda host, value: setattr(owner(host), name, value)) if settable else None
    return property(lambda host: getattr(owner(host), name), write)


def channels_text(channels: Sequence[int]) -> str:
    """``ch 3`` / ``ch 3, 5, 7`` / ``12 channels``: the channels of a tile menu, named."""
    channels = list(channels)
    if len(channels) <= 4:
        return "ch " + ", ".join(str(c) for c in channels)
    return f"{len(channels)} channels"


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
        if not dock.objectName():
            dock.setObjectName(dock.windowTitle().replace(" ", "") + "Dock")
        if not self._w.restoreDockWidget(dock):
            self.dock_back(dock, area, width=width)
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
        if (width := max(self._wanted_width(d) for d in stacked)) != dock.width():
            self.resize_dock(dock, width)
        self._fit_heights(stacked)

    def _fit_heights(self, stacked: list[QDockWidget]) -> None:
        """In a column of docks, one whose content does not grow tall (the Edits list) gets its
        hint's height and those that grow (Live, Channels that matter) the rest."""
        main = self._w
        column = [d for d in stacked if not main.tabifiedDockWidgets(d) and d.widget()]
        grows = [bool(QWidgetItem(d.widget()).expandingDirections() & Qt.Orientation.Vertical)
                 for d in column]  # fmt: skip
        if any(grows) and not all(grows):
            # Every dock of the column named: Qt spreads what a partial list leaves over all.
            total = sum(d.height() for d in column)
            # The content's hint (the dock's own follows a turn later) and the title bar.
            wanted = {d: d.widget().sizeHint().height() + d.height() - d.widget().height()
                      for d, g in zip(column, grows, strict=True) if not g}  # fmt: skip
            fixed = {d: min(h, total // 2) for d, h in wanted.items()}
            rest = (total - sum(fixed.values())) // (len(column) - len(fixed))
            main.resizeDocks(column, [fixed.get(d, rest) for d in column], Qt.Orientation.Vertical)

    def _docked(self, area: Qt.DockWidgetArea) -> list[QDockWidget]:
        """The docks shown, not floating, in ``area``."""
        main = self._w
        # Docks are the window's own children: a recursive search asks every widget of it.
        docks = main.findChildren(QDockWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        shown = [d for d in docks if d.isVisible() and not d.isFloating()]
        return [d for d in shown if main.dockWidgetArea(d) == area]

    def _wanted_width(self, dock: QDockWidget) -> int:
        """``dock``'s size hint's width, at most the width asked and the window's share."""
        width = dock.sizeHint().width()
        if (asked := int(dock.property("actviz_width") or 0)) > 0:
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


class Host(Docks):
    """What a feature may use of the window (docks: the :class:`Docks` calls).

    Signals (:data:`HOST_SIGNALS`, the window's): ``run_started``, ``run_finished``,
    ``run_failed(str)``, ``run_cancelled`` (the window's own runs: a result reached the panels,
    or did not); ``model_loaded(str)``, ``input_loaded(str)``, ``input_load_failed(str)``
    (opening a model or an input from a source finished); ``pinned_shown`` (a pinned result is
    about to replace the panels' result); ``panel_created(str, LayerPanel)`` (a layer panel was
    made); ``panel_shown(str, LayerPanel, PreparedLayer)`` (a panel now shows that layer);
    ``tab_changed(QWidget)`` (the central tab shown); ``closed`` (features shut down)."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        #: The features hosted, by name (the window's ``features``; plugins add theirs).
        self.features: dict[str, Feature] = {}
        for name in HOST_SIGNALS:
            setattr(self, name, getattr(window, name))
        #: A feature's ``() -> bool``: whether its frames replace the window's runs now.
        self.runs_replaced: Callable[[], bool] = lambda: False
        self.model_copies: ModelCopyService | None = None  # the one; at a first private_model()

    session: Session = _window_attr("session")
    #: The window's AppSettings: recent files, persistent view settings.
    settings: Any = _window_attr("settings")
    worker: Worker = _window_attr("worker")
    #: What the window's loader threads run (a feature opening a second model uses them too).
    model_loader: Callable[..., Any] = _window_attr("model_loader", settable=True)
    input_loader: Callable[..., Any] = _window_attr("input_loader", settable=True)
    #: ``(parent, path, message) -> bool``: may this full pickle be unpickled?
    confirm_untrusted: Callable[[QWidget, str, str], bool] = _window_attr("confirm_untrusted")
    #: The result shown and the selected layer; the layer panels (by name, in execution order)
    #: and the large view of one channel beside them.
    result: RunResult | None = _window_attr("session.result")
    selected_layer: str | None = _window_attr("display.selected_layer")
    layer_panels: Mapping[str, LayerPanel] = _window_attr("display.layer_panels")
    panel = _window_attr("display.layer_panels.get")  # (layer) -> its panel, or None
    channel_view: ChannelView = _window_attr("centre.channel_view")
    # The window's calls, as its parts have them (their docstrings say what they do).
    run = _window_attr("runs.run")
    schedule_run = _window_attr("runs.schedule_run")
    set_view_settings = _window_attr("runs.set_view_settings")
    stop_current_run = _window_attr("runs.stop")
    refresh_busy = _window_attr("refresh_busy")
    is_closed = _window_attr("is_closed")
    wait_until = _window_attr("wait_until")
    defer_display = _window_attr("display.defer_display")
    display_pending = _window_attr("display.display_pending")
    select_layer = _window_attr("display.select_layer")
    open_channel = _window_attr("display.open_channel")
    refresh_panel = _window_attr("display.grid.refresh")
    page_channels = _window_attr("display.page_size")
    open_input_source = _window_attr("files.open_input_source")
    ask_input_file = _window_attr("files.menus.ask_input_file")  # (title) -> path, "": cancelled
    load_model = _window_attr("files.load_model")  # a second model (Compare's model B)
    model_dialog = _window_attr("files.menus.new_model_dialog")
    current_tab = _window_attr("centre.tabs.currentWidget")
    add_prediction_widget = _window_attr("centre.prediction_panel.add_row")
    set_prediction_bars_visible = _window_attr("centre.prediction_panel.set_bars_visible")
    show_input_image = _window_attr("model_dock.input_preview.set_image")
    clear_messages = _window_attr("centre.banner.clear")
    show_status = _window_attr("status.status_label.setText")  # the status bar's text
    add_tab = _window_attr("centre.tabs.addTab")  # after the Layers and Overview tabs
    remove_dock = _window_attr("removeDockWidget")  # a disabled plugin's view
    #: ``(fill)``: ``fill(menu, layer, channels)`` adds a feature's entries to each tile menu.
    add_tile_menu_entries = _window_attr("display.tile_menu_fillers.append")

    def private_model(
        self, owner: Any, *, to_eval: bool = False, keep: bool = False
    ) -> PrivateModel:
        """``owner``'s private copy of the model, for work beside the window's captures.
        ``to_eval``: eval mode; ``keep``: kept between jobs (not shared or trimmed). Edits are
        never in a copy: a job passes them to its run."""
        if self.model_copies is None:  # the window's session and worker exist by now
            self.model_copies = ModelCopyService(self._w)
        return self.model_copies.private_model(owner, to_eval=to_eval, keep=keep)

    def features_busy(self) -> bool:
        """Whether a feature runs something the user can cancel."""
        return any(f.is_busy() for f in self.features.values())

    def offer_run_override(self, engaged: Callable[[], bool]) -> None:
        """A feature whose frames replace the window's runs while ``engaged()`` (live mode)."""
        self.runs_replaced = engaged

    def offer_export_writers(self, writers: Any) -> None:
        """Extra per-layer writers for File > Export everything (plugins)."""
        self._w.exports.layer_writers = writers

    def offer_input_filters(self, filters: list[str]) -> None:
        """Extra name filters of the Open input dialog (plugins' input formats)."""
        self._w.files.menus.extra_input_filters = list(filters)

    def show_run(self, job: Job, *, streamed: bool = False) -> None:
        """Show ``job``'s end as a run's (a live frame; ``streamed``: quiet in the status bar)."""
        self._w.runs.watch(job, kind="frame", streamed=streamed)

    def set_target_text(self, text: str) -> bool:
        """Set the target from text like the selector's ("auto", "3", "3: star", "star")."""
        try:
            self._w.session.set_target_text(text)
        except ValueError as exc:
            self.show_error(f"Target: {exc}")
            self._w.runs.sync_target_combo()  # back to the target in force
            return False
        self.clear_messages("action")
        self._w.runs.sync_target_combo()
        return True

    def adopt_model(
        self,
        loaded: Any,
        *,
        ticks: Sequence[str] | None = None,
        gradcam_layer: str | None = None,
        open_args: dict[str, Any] | None = None,
    ) -> None:
        """Show an opened model with ``ticks`` ticked, keeping the input; ``open_args``: the
        ``open_model`` arguments (reproduce.py)."""
        w = self._w
        w.runs.stop()
        w.files.drop_model_load("Opening the model was replaced by a session's model.")
        w.files.inputs.drop()
        self.clear_messages()
        w.session.set_loaded_model(loaded, ticks=ticks, gradcam_layer=gradcam_layer)
        w.session.set_model_open_args(open_args or {})

    def show_result(self, result: RunResult, request: Any = None) -> None:
        """Show a result prepared elsewhere (a saved run); ``request`` lets it be re-prepared."""
        w = self._w
        w.runs.halt()
        if request is not None:
            w.runs.last_request = request
        w.display.apply_result(result)
        w.refresh_busy()
        w.display.after_panels(w.run_finished.emit)

    def set_tab_visible(self, widget: QWidget, visible: bool) -> None:
        """Show or hide the tab of ``widget`` (a tab with nothing to show is hidden)."""
        tabs = self._w.centre.tabs
        if not visible and tabs.currentWidget() is widget:
            tabs.setCurrentIndex(0)  # Layers, not Qt's next visible tab
        tabs.setTabVisible(tabs.indexOf(widget), visible)

    def show_tab(self, widget: QWidget | None = None) -> None:
        """Bring a tab to the front (None: the Layers tab)."""
        tabs = self._w.centre.tabs
        tabs.setCurrentWidget(widget) if widget is not None else tabs.setCurrentIndex(0)

    def menu(self, title: str) -> QMenu:
        """The menu-bar menu titled ``title`` ("File", "View", ...), made when missing."""
        main = self._w
        for action in main.menuBar().actions():
            if (menu := action.menu()) is not None and action.text().replace("&", "") == title:
                return menu
        return main.menuBar().addMenu(f"&{title}")

    def add_menu_action(
        self, menu: str, action: QAction, *, before: str | None = None, shortcut: bool = True
    ) -> None:
        """Put ``action`` in ``menu`` (before entry ``before``); ``shortcut``: window-wide."""
        target = self.menu(menu)
        entries = {a.text().replace("&", ""): a for a in target.actions()}
        target.insertAction(entries.get(before), action)  # (None: at the end)
        if shortcut:
            self._w.addAction(action)

    def add_action(
        self,
        menu: str,
        text: str,
        slot: Callable[[], object],
        tip: str = "",
        *,
        before: str | None = None,
        keys: Any = "",
    ) -> QAction:
        """A new entry ``text`` of ``menu`` (before ``before``) calling ``slot()``: ``tip`` its
        tooltip, ``keys`` its window-wide shortcut."""
        action = QAction(text, self._w, toolTip=tip, shortcut=QKeySequence(keys))
        action.triggered.connect(lambda _=False: slot())
        self.add_menu_action(menu, action, before=before, shortcut=bool(keys))
        return action

    def add_toolbar(self, toolbar: QToolBar, *, new_row: bool = False) -> None:
        """Add a toolbar (``new_row``: below the existing ones)."""
        if new_row:
            self._w.addToolBarBreak()
        self._w.addToolBar(toolbar)

    def offer_pin_comparison(self, compare: Callable[[Any], object]) -> None:
        """Run > Pinned results offers "Compare with the latest run": ``compare(pin)``."""
        pins_ui = self._w.pins_ui
        pins_ui.compare_with = compare
        pins_ui.refresh_pins_menu()

    def offer_session_store(self, store: Any) -> None:
        """The part that saves and opens session files (``window.session_store``)."""
        self._w.session_store = store

    def add_status_widget(self, widget: QWidget) -> None:
        """A permanent widget at the right of the status bar."""
        self._w.statusBar().addPermanentWidget(widget)

    def add_overview_widget(self, widget: QWidget, *, row: str = "top") -> None:
        """An extra panel in the Overview's ``row``: "top", "bottom" or "new"."""
        rows, top, bottom = self._w.centre.overview_splitters
        {"top": top, "bottom": bottom, "new": rows}[row].addWidget(widget)

    def reveal_panel(self, layer: str) -> None:
        """Scroll the Layers tab so ``layer``'s panel is in view."""
        if (panel := self.panel(layer)) is not None:
            self._w.centre.layers_scroll.ensureWidgetVisible(panel)

    def fill_tile_menu(self, menu: QMenu, layer: str, channels: Sequence[int]) -> None:
        """Add every feature's tile-menu entries for ``channels`` of ``layer`` to ``menu``."""
        chosen = tuple(int(c) for c in channels)
        for fill in list(self._w.display.tile_menu_fillers):
            fill(menu, layer, chosen)

    def dialog_parent(self) -> QWidget:
        """The parent of a feature's dialogs and menus (the window)."""
        return self._w

    def sample_inputs(self) -> list[str]:
        """The bundled sample inputs of the model shown (for choosers)."""
        return [str(p) for p in self._w.files.menus.samples]

    def layout_state(self) -> bytes:
        """The window layout (docks, toolbars) as Qt's ``saveState()`` bytes."""
        return bytes(self._w.saveState().data())

    def restore_layout_state(self, data: bytes) -> bool:
        """Put back a layout of :meth:`layout_state`; False when Qt refuses the bytes."""
        return bool(self._w.restoreState(QByteArray(bytes(data))))

    def session_parts(self) -> dict[str, object]:
        """What the features keep in a session file (each ``session_part()``'s dict)."""
        return {k: v for part in self._offered("session_part") for k, v in (part() or {}).items()}

    def _offered(self, method: str) -> list[Callable[..., Any]]:
        """The features' ``method``s, for those that have one (an optional part of a feature)."""
        found = (getattr(feature, method, None) for feature in self.features.values())
        return [bound for bound in found if callable(bound)]

    def report_parts(self) -> dict[str, object]:
        """The ``write_report`` arguments of the features' ``report_part()``, figures merged."""
        parts: dict[str, object] = {}
        figures: list[object] = []
        for part in self._offered("report_part"):
            given = dict(part() or {})
            if "figures" in given:
                figures.append(given.pop("figures"))
            parts.update(given)
        if figures:
            parts["figures"] = lambda should_stop=_never, progress=None: [
                f for given in figures for f in report_value(given, should_stop, progress)
            ]
        return parts

    def restore_session_parts(self, parts: Mapping[str, object]) -> None:
        """Give each feature with a ``restore_session_part(parts)`` the parts it saved."""
        for restore in self._offered("restore_session_part"):
            restore(parts)

    def show_error(self, text: str, source: str = "action", *, details: str = "") -> None:
        """Show ``text`` as an error in the banner (``details`` behind its Details button)."""
        self._w.centre.banner.set_messages(source, [("error", text)], details=details)

    def show_warning(self, text: str, source: str = "action") -> None:
        """Show ``text`` as a warning in the banner."""
        self._w.centre.banner.set_messages(source, [("warning", text)])


WindowHost = Host  #: The name features and plugins know the host by.


class Feature(Protocol):
    """What the window asks of every feature it hosts."""

    #: Key of the feature in ``window.features`` ("live", "whatif", ...).
    name: str

    def cancel(self) -> bool: ...
    def is_busy(self) -> bool: ...
    def reset_layout(self) -> None: ...
    def shutdown(self) -> None: ...


class FeatureBase:
    """Defaults for :class:`Feature`: nothing to cancel, never busy; what :meth:`listen`
    connected is let go of, and :meth:`stop` called, once, at :meth:`shutdown`."""

    name = ""
    _closed = False

    def __init__(self, host: Host) -> None:
        """Keep ``host`` and its session; a QObject feature is a child of the window."""
        if isinstance(self, QObject):
            QObject.__init__(self, host.dialog_parent())
        self.host, self.session = host, host.session

    def listen(self, signal: Any, slot: Callable[..., Any]) -> None:
        """Connect ``slot`` to ``signal`` (the session's, the host's) until :meth:`shutdown`."""
        signal.connect(slot)
        self.__dict__.setdefault("_listening", []).append((signal, slot))

    def cancel(self) -> bool:
        """Cancel what the feature runs (Esc); True when something was cancelled."""
        return False

    def is_busy(self) -> bool:
        """True while the feature runs something the user can cancel."""
        return False

    def reset_layout(self) -> None:
        """Put the feature's docks where a first start puts them: by default its ``dock``, if it
        has one, back on the right at the width it was added with, closed."""
        if (dock := getattr(self, "dock", None)) is not None:
            width = dock.property("actviz_width") or None
            self.host.dock_back(dock, Qt.DockWidgetArea.RightDockWidgetArea, width=width)
            dock.hide()

    def pop_up(self, menu: QMenu, pos: Any) -> QMenu:
        """Show ``menu`` at ``pos`` as the feature's one menu; the one before is deleted, or its
        closures would hold what it offered (a model, pins) for the window's life."""
        old, self.menu = getattr(self, "menu", None), menu
        if old is not None and shiboken6.isValid(old):
            old.deleteLater()
        menu.popup(pos)
        return menu

    def shutdown(self) -> None:
        """Let go of the window: disconnect what :meth:`listen` connected, then :meth:`stop`;
        once, however often it is called (the window's close, a test's)."""
        if self._closed:
            return
        self._closed = True
        for signal, slot in self.__dict__.pop("_listening", ()):
            signal.disconnect(slot)
        self.stop()

    def stop(self) -> None:
        """Stop what the feature runs (its workers, dialogs) when the window closes."""


def _never() -> bool:
    return False


def report_value(
    value: object,
    should_stop: Callable[[], bool] = _never,
    progress: Callable[[str], None] | None = None,
) -> Any:
    """A ``report_part()`` value as written: a callable is called then, given ``should_stop``
    and ``progress(text)`` if it takes them (Esc stops it between its steps, which show in the
    status bar); CaptureCancelled if ``should_stop()`` now."""
    if not callable(value):
        return value
    if should_stop():
        from actviz.core.records import CaptureCancelled

        raise CaptureCancelled("the report was cancelled")
    try:
        takes = inspect.signature(value).parameters
    except (TypeError, ValueError):  # builtins may have no signature
        takes = {}
    given = {"should_stop": should_stop, "progress": progress or (lambda _text: None)}
    return value(**{k: v for k, v in given.items() if k in takes})
