"""The explorer window: a thin Qt layer over a :class:`~actviz.workspace.session.Session` and workers.

Widgets change the session (model, input, ticks, target); the session's events schedule a
debounced run; the capture :class:`~actviz.ui.worker.Worker` runs
:func:`~actviz.workspace.session.run_job` off the GUI thread and the finished
:class:`~actviz.workspace.session.RunResult` (numpy only) is pushed into passive panels. Models and
inputs open on loader workers and "export everything" on an export worker, so the window never
waits on a file or the network. Nothing here blocks on a modal dialog in a path the tests
drive: errors and warnings go to the banner, and the untrusted-pickle question is injectable.

The window is composed of plain objects, each built in its constructor from what it drives:

* ``actions`` (:mod:`~actviz.ui.window.actions`) - actions, toolbar, menus;
* ``centre``, ``status`` (:mod:`~actviz.ui.window.layout`) - banner, Layers and Overview tabs,
  status bar;
* ``model_dock`` (:mod:`~actviz.ui.tree.dock`) - module tree, module details, input preview;
* ``display`` (:mod:`~actviz.ui.window.result_display`) - a result into the panels, layer selection;
* ``files`` (:mod:`~actviz.ui.window.file_opening`) - opening models / inputs in the background;
* ``exports`` (:mod:`~actviz.ui.window.export_actions`) - export everything (background), PNG, .npy;
* ``pins_ui`` (:mod:`~actviz.ui.window.pin_actions`) - pin, show and unpin results.

The widgets keep the names the window has always had (``window.banner``, ``window.run_action``,
``window.prediction_panel``, ...): they are the same objects as the parts' fields.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import QLabel, QMainWindow, QMenu, QWidget

from actviz.core.targets import detections, target_choices
from actviz.display.prepare import renormalised
from actviz.ui.compare.controller import install_compare
from actviz.ui.dataset.scan_ui import DatasetScanUI
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.tokens.views import TokenViews
from actviz.ui.tree.details import ModuleDetails
from actviz.ui.tree.dock import PREFERRED_WIDTH as MODEL_DOCK_WIDTH
from actviz.ui.tree.dock import ModelDock
from actviz.ui.tree.model import format_count
from actviz.ui.whatif.controller import WhatIfController
from actviz.ui.window.actions import build_actions
from actviz.ui.window.banner import MessageBanner
from actviz.ui.window.export_actions import ExportActions
from actviz.ui.window.file_opening import (
    IMAGE_FILTER,
    MODEL_SUFFIXES,
    TENSOR_FILTER,
    ConfirmUntrusted,
    FileOpening,
    ask_untrusted,
)
from actviz.ui.window.layout import build_centre, build_status_bar, default_window_size
from actviz.ui.window.loaders import (
    InputLoader,
    ModelLoader,
    describe_error,
    load_input_source,
    load_model_source,
    local_files,
)
from actviz.ui.window.pin_actions import PinActions
from actviz.ui.window.result_display import MAPS_PANEL_MIN_HEIGHT, ResultDisplay
from actviz.ui.window.settings import AppSettings
from actviz.ui.worker import Worker, favour_gui_thread, release_gui_thread
from actviz.workspace.pins import Pin
from actviz.workspace.session import (
    RunRequest,
    RunResult,
    Session,
    run_job,
)

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.live.controller import LiveController
    from actviz.ui.live.dock import LiveControls

log = logging.getLogger(__name__)

MODEL_FILTER = "Models (*.pt *.pth *.ckpt *.pt2 *.safetensors *.ts *.torchscript *.bin)"
DEFAULT_DEBOUNCE_MS = 300


class MainWindow(QMainWindow):
    """The actviz explorer.

    Parameters
    ----------
    session
        State to show; a new empty :class:`Session` when None.
    settings
        Persistent settings: an :class:`AppSettings`, a ``QSettings`` (tests point one at a
        temporary file) or None for the user's settings.
    confirm_untrusted
        ``(parent, path, message) -> bool`` asked (on the GUI thread) before a full pickle is
        unpickled; the default shows a Yes/No question (No by default).
    debounce_ms
        Delay between the last change (input, ticks, target) and the automatic re-run.
    auto_run
        Re-run automatically after changes.
    model_loader, input_loader
        What the loader threads run (see :mod:`actviz.ui.window.loaders`); tests inject slow or
        failing ones. Also settable later as attributes of the same names.

    Signals
    -------
    run_started()
        A capture was submitted to the worker.
    run_finished()
        A result reached the panels: the overview is shown; layer panels off screen, and
        some on screen, follow on later passes (:meth:`flush_panel_updates` shows them now).
        Not emitted for a result that a newer one replaced before it was shown.
    run_failed(str)
        A run raised; the message is also in the banner and the previous panels stay.
    run_cancelled()
        The current run was cancelled.
    model_loaded(str)
        The model opened from that source is now the session's model.
    model_load_failed(str)
        Opening a model failed, was not trusted, or was cancelled (the message); the previous
        model stays.
    input_loaded(str)
        The input opened from that source is now the session's input.
    input_load_failed(str)
        Opening an input failed (the message); the previous input stays.
    export_finished(list)
        "Export everything" wrote these paths.
    export_failed(str)
        "Export everything" failed or was cancelled (the message).
    pinned_shown()
        A pinned result is about to replace the panels' result (live mode pauses).
    closed()
        The window closed and released its worker.
    """

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
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.session = session or Session()
        if not isinstance(settings, AppSettings):
            settings = AppSettings(settings)
        self.settings = settings
        self.confirm_untrusted: ConfirmUntrusted = confirm_untrusted or ask_untrusted
        self.model_loader: ModelLoader = model_loader or load_model_source
        self.input_loader: InputLoader = input_loader or load_input_source
        self.auto_run = auto_run
        self.session.normalize = settings.normalize
        # One capture at a time on the model; loads build objects nobody else holds yet, so a
        # new model load need not wait for a stale one; exports only read finished captures.
        favour_gui_thread()  # the workers below run Python beside the GUI thread
        self.worker = Worker(self)
        self.model_loads = Worker(self, max_threads=2)
        self.input_loads = Worker(self, max_threads=2)
        self.export_worker = Worker(self)
        self._last_request: RunRequest | None = None
        self._run_kind = "run"
        #: Whether the target list shows a detector's detections (rebuilt with each result).
        self._detection_targets = False
        self._run_due = False
        self._closed = False
        self.setWindowTitle("actviz")
        self.setAcceptDrops(True)
        screen = self.screen() or QGuiApplication.primaryScreen()
        self.resize(default_window_size(screen.availableSize() if screen else None))

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(debounce_ms)
        self._debounce.timeout.connect(self._on_debounce_timeout)

        # The parts, each given what it drives; each connects its own actions and workers.
        self.commands = build_actions(self, auto_run=auto_run)
        self.centre = build_centre(self)
        self.model_dock = ModelDock(self.session, self)
        # Docks close, float, tab together and come back from the View menu.
        self.setDockOptions(
            QMainWindow.DockOption.AnimatedDocks
            | QMainWindow.DockOption.AllowNestedDocks
            | QMainWindow.DockOption.AllowTabbedDocks
        )
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.model_dock)
        self.commands.view_menu.addAction(self.model_dock.toggleViewAction())
        self.status = build_status_bar(self)
        self.display = ResultDisplay(
            self.session, self.centre, self.status, self.commands, self.model_dock,
            self.show_error, self,
        )  # fmt: skip
        self.files = FileOpening(
            self, self.model_loads, self.input_loads, self.commands, self.centre.banner,
            self.status.status_label,
        )  # fmt: skip
        self.exports = ExportActions(
            self, self.export_worker, self.commands, self.centre, self.status, self.display
        )
        self.pins_ui = PinActions(
            self.session, self.display, self.commands, self.centre.banner,
            self.status.status_label, self.show_warning, self.pinned_shown,
        )  # fmt: skip
        #: Data > Scan a dataset…: the Dataset dock and the channel view's top-k images.
        self.dataset = DatasetScanUI(self)
        #: Text box, Attention tab, rollout (issue 15: token sequences and attention).
        self.tokens = TokenViews(self)
        #: Live mode, once :func:`~actviz.ui.live.dock.install_live_mode` attached it.
        self.live: LiveController | None = None
        self.live_dock: LiveControls | None = None
        self.live_status_label: QLabel | None = None

        # The widgets under the names the window has always had (the same objects).
        a, c, st, dock = self.commands, self.centre, self.status, self.model_dock
        self.open_model_action = a.open_model_action
        self.open_input_action = a.open_input_action
        self.run_action = a.run_action
        self.cancel_action = a.cancel_action
        self.export_all_action = a.export_all_action
        self.export_png_action = a.export_png_action
        self.export_npy_action = a.export_npy_action
        self.quit_action = a.quit_action
        self.pin_action = a.pin_action
        self.unpin_action = a.unpin_action
        self.unpin_all_action = a.unpin_all_action
        self.gradients_action = a.gradients_action
        self.auto_run_action = a.auto_run_action
        self.sample_combo = a.sample_combo
        self.target_combo = a.target_combo
        self.colormap_combo = a.colormap_combo
        self.normalize_combo = a.normalize_combo
        self.export_button = a.export_button
        self.recent_models_menu = a.recent_models_menu
        self.recent_inputs_menu = a.recent_inputs_menu
        self.pins_menu = a.pins_menu
        self.banner = c.banner
        self.tabs = c.tabs
        self.layers_splitter = c.layers_splitter
        self.layers_scroll = c.layers_scroll
        self.layers_container = c.layers_container
        self.layers_grid = c.layers_grid
        self.layers_placeholder = c.layers_placeholder
        self.channel_box = c.channel_box
        self.channel_view = c.channel_view
        self.overview_tab = c.overview_tab
        self.prediction_panel = c.prediction_panel
        self.saliency_panel = c.saliency_panel
        self.gradcam_panel = c.gradcam_panel
        self.grad_flow_panel = c.grad_flow_panel
        self.stats_table = c.stats_table
        self.histogram_panel = c.histogram_panel
        self.status_label = st.status_label
        self.progress_bar = st.progress_bar
        self.timing_label = st.timing_label
        self.filter_edit = dock.filter_edit
        self.tree_model = dock.tree_model
        self.tree_proxy = dock.tree_proxy
        self.tree_view = dock.tree_view
        self.details = dock.details
        self.input_preview = dock.input_preview

        #: Edits from the tiles, the Edits dock, before/after (actviz.ui.whatif).
        self.whatif = WhatIfController(self)
        self._connect_commands()
        self._apply_view_settings()
        self.model_dock.module_selected.connect(self._on_dock_module_selected)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.session.saliency_wanted = self._saliency_shown()
        signals = self.worker.signals
        signals.finished.connect(self._on_worker_finished)
        signals.errored.connect(self._on_worker_errored)
        signals.cancelled.connect(self._on_worker_cancelled)
        signals.progress.connect(self._on_worker_progress)
        signals.started.connect(self._on_worker_started)
        for event, slot in self._session_slots():
            event.connect(slot)
        #: The Compare tab (latest run vs a pin, another input or another model).
        self.compare = install_compare(self)
        self.pins_ui.compare_with = self.compare_with_pin
        self.pins_ui.refresh_pins_menu()

        geometry = settings.geometry
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = settings.window_state
        if state is not None:
            self.restoreState(state)
        if self.session.model is not None:
            self._on_session_model_changed()
        if self.session.input is not None:
            self._on_session_input_changed()
        self._update_enabled()

    def _connect_commands(self) -> None:
        a = self.commands
        a.run_action.triggered.connect(self.run)
        a.cancel_action.triggered.connect(self.cancel)
        a.quit_action.triggered.connect(self.close)
        a.reset_layout_action.triggered.connect(self.reset_layout)
        a.input_list_action.toggled.connect(self._on_input_list_toggled)
        a.gradients_action.toggled.connect(self._on_gradients_toggled)
        a.auto_run_action.toggled.connect(self._on_auto_run_toggled)
        a.target_combo.activated.connect(self._on_target_activated)
        a.target_combo.lineEdit().returnPressed.connect(self._on_target_entered)
        a.colormap_combo.currentTextChanged.connect(self._on_colormap_changed)
        a.normalize_combo.currentIndexChanged.connect(self._on_normalize_changed)

    def _session_slots(self) -> list[tuple[Any, Callable[..., None]]]:
        s = self.session
        return [
            (s.model_changed, self._on_session_model_changed),
            (s.input_changed, self._on_session_input_changed),
            (s.ticks_changed, self._on_session_ticks_changed),
            (s.target_changed, self._on_session_target_changed),
            (s.pins_changed, self.pins_ui.on_session_pins_changed),
        ]

    def _apply_view_settings(self) -> None:
        s = self.settings
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(True)
        if self.colormap_combo.findText(s.colormap) >= 0:
            self.colormap_combo.setCurrentText(s.colormap)
        self.normalize_combo.setCurrentIndex(max(0, self.normalize_combo.findData(s.normalize)))
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(False)
        self.session.colormap = self.colormap_combo.currentText()  # "auto" shapes mosaics
        self.gradients_action.blockSignals(True)
        self.gradients_action.setChecked(s.show_gradients)
        self.gradients_action.blockSignals(False)
        current = self.commands.colormap_actions.get(self.colormap_combo.currentText())
        if current is not None:
            current.setChecked(True)

    # ========================================================================== public API
    @property
    def colormap(self) -> str:
        """The colour map of the feature maps."""
        return self.commands.colormap

    @property
    def gradients_visible(self) -> bool:
        """Whether gradient magnitudes are shown beside activations."""
        return self.display.gradients_visible

    @property
    def result(self) -> RunResult | None:
        """The result the panels show (None before the first run)."""
        return self.session.result

    @property
    def selected_layer(self) -> str | None:
        """The layer the histogram and the single-layer exports are about."""
        return self.display.selected_layer

    @property
    def layer_panels(self) -> dict[str, LayerPanel]:
        """The layer panels of the result shown, by layer name, in execution order."""
        return self.display.layer_panels

    @property
    def last_export(self) -> list[Path]:
        """Files written by the last finished "export everything"."""
        return self.exports.last_export

    def show_error(self, text: str, source: str = "action") -> None:
        """Show ``text`` as an error in the banner (never a blocking dialog)."""
        log.warning("%s", text)
        self.banner.set_messages(source, [("error", text)])

    def show_warning(self, text: str, source: str = "action") -> None:
        """Show ``text`` as a warning in the banner."""
        self.banner.set_messages(source, [("warning", text)])

    def set_model(
        self,
        model: Any,
        *,
        name: str | None = None,
        categories: Sequence[str] | None = None,
        layers: Sequence[str] | None = None,
    ) -> None:
        """Show an in-memory ``nn.Module`` (``explore``); ``layers`` are ticked (None: defaults).

        A model still being opened from a file is dropped: this one is the latest choice.
        """
        self.stop_current_run()
        self.files.drop_model_load("Opening the model was replaced by an in-memory model.")
        self.banner.clear()
        self.session.set_model(model, name=name, categories=categories, ticks=layers)
        self.files.read_waiting_input()

    def set_input(
        self, value: Any, *, image: np.ndarray | None = None, description: str = ""
    ) -> None:
        """Use an in-memory tensor (or tuple/dict of tensors) as the input."""
        self.files.drop_input_load()
        self.session.set_input(
            value, source="", kind="tensor", image=image, description=description
        )

    def set_target_text(self, text: str) -> bool:
        """Set the target from text like the selector's ("auto", "3", "3: star", "star")."""
        try:
            self.session.set_target_text(text)
        except ValueError as exc:
            self.show_error(f"Target: {exc}")
            return False
        self.banner.clear("action")
        self._sync_target_combo()
        return True

    def reset_layout(self) -> None:
        """Put the docks where a first start puts them: Model on the left at its default width,
        Live (when installed) on the right and closed."""
        left, right = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.model_dock.setFloating(False)
        self.addDockWidget(left, self.model_dock)  # moves it back from wherever it was
        self.model_dock.show()
        if self.live_dock is not None:
            self.live_dock.setFloating(False)
            self.addDockWidget(right, self.live_dock)
            self.live_dock.hide()
        self.whatif.reset_dock()
        self.resizeDocks([self.model_dock], [MODEL_DOCK_WIDTH], Qt.Orientation.Horizontal)

    def tick(self, names: Sequence[str], ticked: bool = True) -> None:
        """Tick (or untick) layers by name."""
        self.session.set_ticked(names, ticked)

    def tree_context_menu(self, name: str | None) -> QMenu:
        """The module tree's context menu for row ``name`` (built, not shown)."""
        return self.model_dock.tree_context_menu(name)

    def run(self) -> int | None:
        """Start a run now (Ctrl+R); returns its generation, or None when it cannot run."""
        self._debounce.stop()
        self._run_due = False
        if self._closed:
            return None
        if not self.session.can_run():
            what = "a model" if self.session.model is None else "an input"
            self.show_warning(f"Open {what} first, then press Run.", source="run")
            return None
        request = self.session.make_request()
        self._last_request = request
        self._run_kind = "run"
        gen = self.worker.submit(lambda stop, progress: run_job(request, stop, progress))
        self.refresh_busy("Running…")
        self.run_started.emit()
        return gen

    def cancel(self) -> None:
        """Cancel the running capture, model / input load, export or dataset scan (Esc).

        The panels keep the previous result, a cancelled load keeps the previous model and a
        cancelled scan keeps what it scanned (scanning again resumes).
        """
        self._debounce.stop()
        cancelled = self.worker.cancel()
        cancelled = self.export_worker.cancel() or cancelled
        cancelled = self.files.cancel() or cancelled
        cancelled = self.compare.cancel_waiting() or cancelled
        cancelled = self.dataset.cancel() or cancelled
        if cancelled and self.worker.has_current_job():
            self.status_label.setText("Cancelling…")

    def schedule_run(self) -> None:
        """Re-run after the debounce delay (restarted by every further change).

        While an input is being opened the run waits for it (the old input may not fit).
        """
        if not (self.auto_run and not self._closed and self.session.can_run()):
            return
        if self.files.input_loading():
            self._run_due = True
            return
        self._debounce.start()

    def compare_with_pin(self, pin: Any) -> bool:
        """Show the Compare tab comparing the latest run with ``pin`` (Pinned results menu)."""
        self.tabs.setCurrentWidget(self.compare.page)
        return self.compare.compare_with_pin(pin)

    def is_busy(self) -> bool:
        """True while a capture, a load or an export is running (stale jobs aside)."""
        return any(w.has_current_job() for w in self._workers()) or self.is_loading()

    # ========================================================================== the parts' API
    # Short delegations: the window's public methods, as scripts and tests have called them.
    def open_model_source(
        self,
        source: str,
        *,
        arch: str | None = None,
        weights: str | None = "DEFAULT",
        trust: bool = False,
        wait: bool = False,
    ) -> bool:
        """See :meth:`FileOpening.open_model_source`."""
        return self.files.open_model_source(
            source, arch=arch, weights=weights, trust=trust, wait=wait
        )

    def open_input_source(self, source: str, *, remember: bool = True, wait: bool = False) -> bool:
        """See :meth:`FileOpening.open_input_source`."""
        return self.files.open_input_source(source, remember=remember, wait=wait)

    def load_demo(self, sample: str | None = None) -> bool:
        """See :meth:`FileOpening.load_demo`."""
        return self.files.load_demo(sample)

    def open_default_input(self) -> bool:
        """See :meth:`FileOpening.open_default_input`."""
        return self.files.open_default_input()

    def open_dropped(self, path: str | Path) -> bool:
        """See :meth:`FileOpening.open_dropped`."""
        return self.files.open_dropped(path)

    def is_loading(self) -> bool:
        """True while a model or an input is being opened."""
        return self.files.is_loading()

    def export_all(self, out_dir: str | Path, *, wait: bool = False) -> bool:
        """See :meth:`ExportActions.export_all`."""
        return self.exports.export_all(out_dir, wait=wait)

    def export_panel_png(self, path: str | Path, panel: QWidget | None = None) -> Path | None:
        """See :meth:`ExportActions.export_panel_png`."""
        return self.exports.export_panel_png(path, panel)

    def export_layer_npy(self, out_dir: str | Path, name: str | None = None) -> list[Path]:
        """See :meth:`ExportActions.export_layer_npy`."""
        return self.exports.export_layer_npy(out_dir, name)

    def pin_result(self) -> Pin | None:
        """See :meth:`PinActions.pin_result`."""
        return self.pins_ui.pin_result()

    def show_pinned(self, pin: Pin) -> bool:
        """See :meth:`PinActions.show_pinned`."""
        return self.pins_ui.show_pinned(pin)

    def unpin_shown(self) -> bool:
        """See :meth:`PinActions.unpin_shown`."""
        return self.pins_ui.unpin_shown()

    def unpin_all(self) -> None:
        """See :meth:`PinActions.unpin_all`."""
        self.pins_ui.unpin_all()

    def select_layer(self, name: str | None, *, reveal: bool = True) -> None:
        """See :meth:`ResultDisplay.select_layer`."""
        self.display.select_layer(name, reveal=reveal)

    def open_channel(self, name: str, channel: int) -> bool:
        """See :meth:`ResultDisplay.open_channel`."""
        return self.display.open_channel(name, channel)

    def turn_page(self, name: str, step: int) -> bool:
        """See :meth:`ResultDisplay.turn_page`."""
        return self.display.turn_page(name, step)

    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        """See :meth:`ResultDisplay.defer_display`."""
        self.display.defer_display(step, stale_ok=stale_ok)

    def display_pending(self) -> bool:
        """See :meth:`ResultDisplay.display_pending`."""
        return self.display.display_pending()

    def panel_updates_pending(self) -> bool:
        """See :meth:`ResultDisplay.panel_updates_pending`."""
        return self.display.panel_updates_pending()

    def flush_panel_updates(self) -> None:
        """See :meth:`ResultDisplay.flush_panel_updates`."""
        self.display.flush_panel_updates()

    # ========================================================================== session events
    def _on_session_model_changed(self) -> None:
        s = self.session
        self.setWindowTitle(f"actviz — {s.model_name}" if s.model_name else "actviz")
        self.display.clear_panels()
        self.model_dock.show_model()
        self._sync_target_combo(rebuild=True)
        self._detection_targets = False
        action = self.commands.input_list_action
        action.blockSignals(True)  # the session already chose from the model's forward
        action.setChecked(s.input_as_list)
        action.blockSignals(False)
        warnings = [("warning", w) for w in s.model_warnings]
        self.banner.set_messages("model", warnings)
        self.banner.clear("run")
        self._update_enabled()
        self.schedule_run()

    def _on_session_input_changed(self) -> None:
        inp = self.session.input
        if inp is not None:
            caption = inp.description or inp.source
            if inp.source and Path(inp.source).name not in caption:
                caption = f"{Path(inp.source).name} · {caption}"
            self.input_preview.set_image(inp.image, caption)
        self._update_enabled()
        self.schedule_run()

    def _on_session_ticks_changed(self, names: set[str]) -> None:
        self.schedule_run()

    def _on_session_target_changed(self) -> None:
        self.schedule_run()

    # ========================================================================== capture worker
    def _on_debounce_timeout(self) -> None:
        if self.files.input_loading():
            self._run_due = True  # the input being opened will start it
            return
        if self.auto_run and self.session.can_run():
            self.run()

    def run_if_due(self) -> None:
        """Schedule the run that waited for an input being opened, once none is."""
        if self._run_due and not self.files.input_loading():
            self._run_due = False
            self.schedule_run()

    def _on_worker_started(self, gen: int) -> None:
        self.refresh_busy("Comparing…" if self.compare.owns(gen) else "Running…")

    def _on_worker_progress(self, gen: int, message: str) -> None:
        self.status_label.setText(message)

    def _on_worker_finished(self, gen: int, result: RunResult) -> None:
        if self.compare.owns(gen):
            return  # a comparison: the Compare tab shows it
        self.refresh_busy()
        try:
            self.display.apply_result(result)
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display the result")
            self.show_error(f"Could not display the result: {describe_error(exc)}", source="run")
            self.run_failed.emit(str(exc))
            return
        # A detector's target list names its detections, which change with every result.
        output = result.capture.output if result.capture is not None else None
        found = detections(output) is not None
        if found or self._detection_targets:
            self._detection_targets = found
            self._sync_target_combo(rebuild=True, output=output)
        # After the overview's display steps (skipped if a newer result replaces this one).
        self.defer_display(self.run_finished.emit)

    def _on_worker_errored(self, gen: int, error: BaseException) -> None:
        if self.compare.owns(gen):
            return
        self.refresh_busy()
        log.error("run failed", exc_info=(type(error), error, error.__traceback__))
        what = "Run failed" if self._run_kind == "run" else "Could not update the views"
        text = f"{what}: {describe_error(error)}. The panels still show the previous result."
        self.show_error(text, source="run")
        self.status_label.setText(what)
        self.run_failed.emit(text)

    def _on_worker_cancelled(self, gen: int) -> None:
        if self.compare.owns(gen):
            return
        self.refresh_busy("Cancelled; the panels show the previous result.")
        self.run_cancelled.emit()

    # ========================================================================== widget slots
    def _on_input_list_toggled(self, as_list: bool) -> None:
        self.session.set_input_as_list(as_list)

    def _saliency_shown(self) -> bool:
        return self.tabs.currentWidget() is self.overview_tab

    def _on_tab_changed(self, _index: int) -> None:
        # Without a saliency view on screen, runs stop the backward at the first captured layer
        # (capture(input_grads=False)); showing it re-runs a result made that way.
        shown = self._saliency_shown()
        self.session.saliency_wanted = shown
        result = self.session.result
        if (
            shown
            and result is not None
            and result.capture is not None
            and result.capture.input_grads is None
            and self._last_request is not None
            and not self._last_request.input_grads
        ):
            self.saliency_panel.set_message("Computing saliency…")
            if self.auto_run:
                self.schedule_run()

    def _on_dock_module_selected(self, name: str) -> None:
        result = self.session.result
        if result is not None and name in result.layers:
            self.select_layer(name)

    def _on_target_activated(self, index: int) -> None:
        self.set_target_text(self.target_combo.itemText(index))

    def _on_target_entered(self) -> None:
        self.set_target_text(self.target_combo.currentText())

    def _on_colormap_changed(self, name: str) -> None:
        self.settings.colormap = name
        if name in self.commands.colormap_actions:
            self.commands.colormap_actions[name].setChecked(True)
        self.display.set_colormap(name)

    def _on_normalize_changed(self, _index: int) -> None:
        mode = self.normalize_combo.currentData()
        self.settings.normalize = mode
        self.session.normalize = mode
        result, request = self.session.result, self._last_request
        if self.worker.is_busy() and self._run_kind == "run":
            self.run()  # a newer capture is on its way: redo it with the new setting
            return
        if result is None or request is None:
            return
        # New mosaics from the result's views: no new forward pass, and the result shown
        # (maybe pinned) is not changed.
        pages = dict(self.session.channel_pages)
        sizes, cmap = dict(self.session.page_channels), self.session.colormap
        request = dataclasses.replace(
            request, normalize=mode, channel_pages=pages, page_channels=sizes, colormap=cmap
        )
        self._last_request = request
        self._run_kind = "prepare"
        self.worker.submit(
            lambda stop, progress: renormalised(
                result, mode, pages, page_channels=sizes, colormap=cmap
            )
        )
        self.refresh_busy("Updating views…")

    def _on_gradients_toggled(self, visible: bool) -> None:
        self.settings.show_gradients = visible
        self.display.set_gradients_visible(visible)

    def _on_auto_run_toggled(self, on: bool) -> None:
        self.auto_run = on

    # ========================================================================== helpers
    def _workers(self) -> tuple[Worker, ...]:
        return (self.worker, self.model_loads, self.input_loads, self.export_worker)

    def refresh_busy(self, text: str = "") -> None:
        """Show the busy bar (and enable Cancel) while anything current runs; set the status."""
        busy = self.is_busy()
        self.progress_bar.setVisible(busy)
        self.cancel_action.setEnabled(self._cancellable())
        if text:
            self.status_label.setText(text)

    def is_closed(self) -> bool:
        """True once the window closed (its workers are shut down)."""
        return self._closed

    def _update_enabled(self) -> None:
        self.run_action.setEnabled(self.session.can_run())
        self.cancel_action.setEnabled(self._cancellable())

    def _cancellable(self) -> bool:
        # A dataset scan has its own progress in the Dataset dock (not the busy bar), but Esc
        # stops it too.
        dataset = getattr(self, "dataset", None)
        return self.is_busy() or (dataset is not None and dataset.scans.is_scanning())

    def stop_current_run(self) -> None:
        """Stop the pending automatic run and cancel the running capture."""
        self._debounce.stop()
        self.worker.cancel()

    def wait_until(self, done: Callable[[], bool], poll_ms: int = 5) -> None:
        """Run a local event loop until ``done()`` (or the window closes)."""
        if done() or self._closed:
            return
        loop = QEventLoop()
        timer = QTimer()
        timer.setInterval(poll_ms)
        timer.timeout.connect(lambda: (done() or self._closed) and loop.quit())
        timer.start()
        loop.exec()
        timer.stop()

    def _sync_target_combo(self, rebuild: bool = False, output: object = None) -> None:
        combo = self.target_combo
        combo.blockSignals(True)
        if rebuild:
            combo.clear()
            # Entry k + 1 is class k, or detection k of a detector (core.targets' one list).
            combo.addItems(target_choices(self.session.categories, output))
        target = self.session.target
        if target is None:
            combo.setCurrentIndex(0)
        elif 0 <= target < combo.count() - 1:
            combo.setCurrentIndex(target + 1)
        else:
            combo.setEditText(str(target))
        combo.blockSignals(False)

    # ========================================================================== Qt events
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if local_files(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: Any) -> None:  # noqa: N802
        if local_files(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        files = local_files(event.mimeData())
        if not files:
            event.ignore()
            return
        event.acceptProposedAction()
        # Defer: an untrusted pickle asks a question, and the drag source waits for this return.
        QTimer.singleShot(0, lambda: self.open_dropped(files[0]))

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if not self._closed:
            self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop the workers and save settings.

        The capture worker is waited for, so no hook outlives the window; loads and exports
        hold no hooks and are only made stale (their results are dropped).
        """
        if self._closed:
            return
        self._closed = True
        self._debounce.stop()
        self.worker.shutdown()
        self.dataset.shutdown()
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


__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "IMAGE_FILTER",
    "MAPS_PANEL_MIN_HEIGHT",
    "MODEL_FILTER",
    "MODEL_SUFFIXES",
    "TENSOR_FILTER",
    "ConfirmUntrusted",
    "MainWindow",
    "MessageBanner",
    "ModuleDetails",
    "ask_untrusted",
    "format_count",
]
