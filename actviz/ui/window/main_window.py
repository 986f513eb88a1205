"""The explorer window: assembles its parts and hosts the features; widgets change the
:class:`~actviz.workspace.session_state.Session`, whose events schedule a debounced run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QEventLoop, QSettings, QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication, QResizeEvent
from PySide6.QtWidgets import QMainWindow, QWidget

from actviz.ui import background_loads as loads
from actviz.ui.background_loads import InputLoader, ModelLoader, local_files, short_source
from actviz.ui.host import Feature, Host
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.plugins import attach_plugins
from actviz.ui.tree.dock import PREFERRED_WIDTH as MODEL_DOCK_WIDTH
from actviz.ui.tree.dock import ModelDock
from actviz.ui.window.central import Centre, StatusWidgets, WindowActions, default_window_size
from actviz.ui.window.export_actions import ExportActions
from actviz.ui.window.file_opening import ConfirmUntrusted, FileOpening, ask_untrusted
from actviz.ui.window.result_display import ResultDisplay
from actviz.ui.window.runs import PinActions, RunControl
from actviz.ui.window.script import Explorer, moved
from actviz.ui.window.settings import AppSettings
from actviz.ui.worker import CAPTURE_NICE, IdleMemory, Worker, favour_gui_thread, release_gui_thread
from actviz.workspace.session_state import Session

log = logging.getLogger(__name__)

DEFAULT_DEBOUNCE_MS = 300
LEFT = Qt.DockWidgetArea.LeftDockWidgetArea


def default_features() -> tuple[Callable[[Any], Any], ...]:
    """Every default feature class, in the order they attach (where tabs and menus appear)."""
    from actviz.ui.atlas.feature import AtlasFeature
    from actviz.ui.compare.feature import CompareController
    from actviz.ui.concepts import ConceptsFeature
    from actviz.ui.dataset.feature import DatasetScanUI
    from actviz.ui.effects.feature import EffectsFeature
    from actviz.ui.live.feature import LiveMode
    from actviz.ui.sessions.feature import SessionsFeature
    from actviz.ui.tokens.feature import TokenViews
    from actviz.ui.visualize.feature import VisualizeFeature
    from actviz.ui.whatif.feature import WhatIfController

    first = (TokenViews, WhatIfController, CompareController, DatasetScanUI, AtlasFeature)
    return (*first, LiveMode, SessionsFeature, EffectsFeature, VisualizeFeature, ConceptsFeature)


class MainWindow(QMainWindow):
    """The actviz explorer.

    Parameters
    ----------
    session, settings
        State to show (None: a new one); an :class:`AppSettings`, a ``QSettings`` or None.
    confirm_untrusted
        ``(parent, path, message) -> bool`` asked before a full pickle is unpickled.
    debounce_ms, auto_run
        Delay between the last change and the automatic re-run; whether it re-runs at all.
    model_loader, input_loader
        What the loader threads run (:mod:`actviz.ui.background_loads`); tests inject others.
    features
        Feature classes to host, each built with the :class:`Host` (default: all of them).
    plugins
        Plugins to load (:func:`actviz.ui.plugins.build_registry`).

    The signals are :data:`~actviz.ui.host.HOST_SIGNALS` and ``export_finished(list)``,
    ``export_failed(str)``."""

    run_started = Signal()
    pinned_shown = Signal()
    run_finished = Signal()
    run_failed = Signal(str)
    run_cancelled = Signal()
    model_loaded = Signal(str)
    model_load_failed = Signal(str)
    input_loaded = Signal(str)
    input_load_failed = Signal(str)
    export_finished = Signal(list)
    export_failed = Signal(str)
    panel_created = Signal(str, object)
    panel_shown = Signal(str, object, object)
    tab_changed = Signal(object)
    closed = Signal()

    def __init__(
        self,
        session: Session | None = None,
        settings: AppSettings | QSettings | None = None,
        *,
        confirm_untrusted: ConfirmUntrusted | None = None,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        auto_run: bool = True,
        model_loader: ModelLoader | None = None,
        input_loader: InputLoader | None = None,
        features: Sequence[Callable[[Host], Feature]] | None = None,
        plugins: Any = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        #: What the features get: attach points, the session, the worker, the signals.
        self.host = Host(self)
        self.features: dict[str, Feature] = self.host.features
        self.script = Explorer(self)  #: What a script holds (``actviz.explore()`` returns it).
        self.session = session or Session()
        self.settings = settings if isinstance(settings, AppSettings) else AppSettings(settings)
        self.confirm_untrusted: ConfirmUntrusted = confirm_untrusted or ask_untrusted
        self.model_loader: ModelLoader = model_loader or loads.load_model_source
        self.input_loader: InputLoader = input_loader or loads.load_input_source
        self._closed = False
        #: The last height not forced by the docks' minimum heights (0: none yet).
        self.chosen_height = 0
        # One capture at a time on the model; loads build objects nobody else holds yet.
        favour_gui_thread()  # the workers below run Python beside the GUI thread
        self.worker = Worker(self, nice=CAPTURE_NICE)
        self.model_loads = Worker(self, max_threads=2, nice=CAPTURE_NICE)
        self.input_loads = Worker(self, max_threads=2, nice=CAPTURE_NICE)
        self.export_worker = Worker(self, nice=CAPTURE_NICE)
        self.setWindowTitle("actviz")
        self.setAcceptDrops(True)
        screen = self.screen() or QGuiApplication.primaryScreen()
        self.resize(default_window_size(screen.availableSize() if screen else None))
        docks = QMainWindow.DockOption
        self.setDockOptions(docks.AnimatedDocks | docks.AllowNestedDocks | docks.AllowTabbedDocks)

        self.commands = WindowActions(self, auto_run=auto_run)
        self.centre = Centre(self)
        self.model_dock = ModelDock(self.session, self)
        self.addDockWidget(LEFT, self.model_dock)
        self.commands.view_menu.addAction(self.model_dock.toggleViewAction())
        self.status = StatusWidgets(self)
        self.display = ResultDisplay(self)
        self.display.panel_created.append(lambda p: self.panel_created.emit(p.name, p))
        self.display.panel_updated.append(lambda p, layer: self.panel_shown.emit(p.name, p, layer))
        #: Session files' part, offered by a feature (:meth:`offer_session_store`).
        self.session_store: Any = None
        self.runs = RunControl(self, debounce_ms=debounce_ms, auto_run=auto_run)
        self.files = FileOpening(self)
        self.exports = ExportActions(self)
        self.pins_ui = PinActions(self)
        # Before the features: a feature's model copy lets go of it when the window is idle.
        self.memory = IdleMemory(
            self,
            lambda: self.is_busy() or self.display.display_pending(),
            lambda: not self.pending_work(),
        )
        for make in features if features is not None else default_features():
            feature = make(self.host)
            self.features[feature.name] = feature
        self.plugins = attach_plugins(self.host, plugins)  # after the built-ins, as they are built
        self._dropped = ""
        self._open_dropped_soon = DeferredCall(self, lambda: self.files.open_dropped(self._dropped))
        self.pins_ui.refresh_pins_menu()
        self.commands.quit_action.triggered.connect(self.close)
        self.commands.reset_layout_action.triggered.connect(self.reset_layout)
        self.model_dock.module_selected.connect(self._on_dock_module_selected)
        self.centre.tabs.currentChanged.connect(self._on_tab_changed)
        self.runs.apply_view_settings()
        self.session.set_saliency_wanted(self._saliency_shown())
        for event, slot in self._session_slots():
            event.connect(slot)
        if self.settings.geometry is not None:
            self.restoreGeometry(self.settings.geometry)
        if self.settings.window_state is not None:
            self.restoreState(self.settings.window_state)
        if self.session.model is not None:
            self._on_session_model_changed()
        if self.session.input is not None:
            self._on_session_input_changed()
        self._update_enabled()

    def __getattr__(self, name: str) -> Any:
        # Only names not found otherwise: those that moved to a part warn (one release).
        return moved(self, name)

    def cancel(self) -> None:
        """Cancel whatever runs (Esc); what was shown before is kept."""
        self.runs.halt()
        parts = (self.worker, self.export_worker, self.files, *self.features.values())
        if any([part.cancel() for part in parts]) and self.worker.has_current_job():
            self.host.show_status("Cancelling…")

    def is_busy(self) -> bool:
        """True while a capture, a load or an export is running (stale jobs aside)."""
        workers = (self.worker, self.model_loads, self.input_loads, self.export_worker)
        return any(w.has_current_job() for w in workers) or self.files.is_loading()

    def is_closed(self) -> bool:
        """True once the window closed (its workers are shut down)."""
        return self._closed

    def pending_work(self) -> bool:
        """Whether anything runs, a run is due or the panels wait for the latest result."""
        busy = self.is_busy() or self.host.features_busy()
        return busy or self.runs.is_due() or self.display.display_pending()

    def wait_until(self, done: Callable[[], bool], poll_ms: int = 5) -> None:
        """Run a local event loop until ``done()`` (or the window closes)."""
        if done() or self._closed:
            return
        loop, timer = QEventLoop(), QTimer()
        timer.timeout.connect(lambda: (done() or self._closed) and loop.quit())
        timer.start(poll_ms)
        loop.exec()
        timer.stop()

    def refresh_busy(self, text: str = "") -> None:
        """Show the busy bar (and enable Cancel) while anything current runs; set the status."""
        busy = self.is_busy()
        # Live frames have their own rate read-out: no animated bar (it repaints constantly).
        others = (self.model_loads, self.input_loads, self.export_worker)
        loading = any(w.has_current_job() for w in others) or self.files.is_loading()
        self.status.progress_bar.setVisible(busy and (loading or not self.runs.streaming()))
        self.commands.cancel_action.setEnabled(busy or self.host.features_busy())
        opening = self.files.model_request
        self.display.grid.update_placeholder(busy, short_source(opening.source) if opening else "")
        if text:
            self.host.show_status(text)

    def _update_enabled(self) -> None:
        self.refresh_busy()
        self.commands.run_action.setEnabled(self.session.can_run())

    def _session_slots(self) -> list[tuple[Any, Callable[..., None]]]:
        s = self.session
        return [
            (s.model_changed, self._on_session_model_changed),
            (s.input_changed, self._on_session_input_changed),
            (s.ticks_changed, self._on_session_changed),
            (s.target_changed, self.runs.schedule_run),
            (s.result_changed, self.memory.touch),
            (s.pins_changed, self.pins_ui.on_session_pins_changed),
            (s.view_changed, self.runs.on_session_view_changed),
        ]

    def _on_session_model_changed(self) -> None:
        s = self.session
        self.setWindowTitle(f"actviz — {s.model_name}" if s.model_name else "actviz")
        self.display.clear_panels()
        self.runs.last_request = None  # it holds the model before: that would stay in memory
        self.model_dock.show_model()
        self.files.menus.fit_samples()
        self.runs.sync_target_combo(rebuild=True)
        action = self.commands.input_list_action
        with QSignalBlocker(action):  # the session already chose from the model's forward
            action.setChecked(s.input_as_list)
        self.centre.banner.set_messages("model", [("warning", w) for w in s.model_warnings])
        self.host.clear_messages("run")
        self._on_session_changed()

    def _on_session_input_changed(self) -> None:
        if (inp := self.session.input) is not None:
            self.host.show_input_image(inp.image, inp.caption)
        self._on_session_changed()

    def _on_session_changed(self, *_args: object) -> None:
        self._update_enabled()
        self.runs.schedule_run()

    def _saliency_shown(self) -> bool:
        return self.centre.tabs.currentWidget() is self.centre.overview_tab

    def _on_tab_changed(self, _index: int) -> None:
        self.runs.on_saliency_shown(self._saliency_shown())
        self.tab_changed.emit(self.centre.tabs.currentWidget())

    def _on_dock_module_selected(self, name: str) -> None:
        if self.session.result is not None and name in self.session.result.layers:
            self.display.select_layer(name)

    def reset_layout(self) -> None:
        """Put the docks where a first start puts them."""
        self.host.dock_back(self.model_dock, LEFT)
        self.model_dock.show()
        for feature in self.features.values():
            feature.reset_layout()
        self.host.resize_dock(self.model_dock, MODEL_DOCK_WIDTH)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        if event.size().height() > self.minimumSizeHint().height():
            self.chosen_height = event.size().height()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        event.acceptProposedAction() if local_files(event.mimeData()) else event.ignore()

    dragMoveEvent = dragEnterEvent  # noqa: N815

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        if not (files := local_files(event.mimeData())):
            event.ignore()
            return
        event.acceptProposedAction()
        # Deferred: an untrusted pickle asks a question, and the drag source waits for this.
        self._dropped = files[0]
        self._open_dropped_soon.request()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop the workers (waiting for captures: no hook outlives the window) and features."""
        if self._closed:
            return
        self._closed = True
        self.memory.stop()
        self.runs.halt()
        self.worker.shutdown()
        for feature in self.features.values():
            feature.shutdown()
        release_gui_thread()  # the process gets its switch interval back with the last window
        for worker in (self.model_loads, self.input_loads, self.export_worker):
            worker.shutdown(timeout_ms=0)
        self.files.abandon()
        self.exports.abandon()
        try:
            self.settings.geometry = self.saveGeometry()
            self.settings.window_state = self.saveState()
            self.settings.sync()
        except Exception:  # noqa: BLE001 - settings must never block closing
            log.exception("could not save settings")
        for event, slot in self._session_slots():
            event.disconnect(slot)
        self.model_dock.detach()
        self.closed.emit()
