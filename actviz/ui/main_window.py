"""The explorer window: a thin Qt layer over a :class:`~actviz.ui.session.Session` and workers.

Widgets change the session (model, input, ticks, target); the session's events schedule a
debounced run; the capture :class:`~actviz.ui.worker.Worker` runs
:func:`~actviz.ui.session.run_job` off the GUI thread and the finished
:class:`~actviz.ui.session.RunResult` (numpy only) is pushed into passive panels. Models and
inputs open on loader workers and "export everything" on an export worker, so the window never
waits on a file or the network. Nothing here blocks on a modal dialog in a path the tests
drive: errors and warnings go to the banner, and the untrusted-pickle question is injectable.

The window is composed of:

* :mod:`~actviz.ui.window_actions` - actions, toolbar, menus;
* :mod:`~actviz.ui.window_layout` - banner, Layers and Overview tabs, status bar, size;
* :mod:`~actviz.ui.model_dock` - module tree, module details, input preview;
* :mod:`~actviz.ui.file_opening` - opening models / inputs in the background, drops, recents;
* :mod:`~actviz.ui.export_actions` - export everything (background), PNG, .npy;
* :mod:`~actviz.ui.result_display` - a result into the panels, layer selection, channels.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import QMainWindow, QMenu, QWidget

from actviz.ui.banner import MessageBanner
from actviz.ui.export_actions import ExportActions, ExportRequest
from actviz.ui.file_opening import (
    IMAGE_FILTER,
    MODEL_SUFFIXES,
    TENSOR_FILTER,
    FileOpening,
    ask_untrusted,
)
from actviz.ui.loaders import (
    InputLoader,
    InputRequest,
    ModelLoader,
    ModelRequest,
    describe_error,
    load_input_source,
    load_model_source,
    short_source,
)
from actviz.ui.model_dock import ModelDock
from actviz.ui.module_details import ModuleDetails
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.pin_actions import PinActions
from actviz.ui.result_display import MAPS_PANEL_MIN_HEIGHT, ResultDisplay
from actviz.ui.session import (
    RunRequest,
    RunResult,
    Session,
    prepare_result,
    run_job,
    target_choices,
)
from actviz.ui.settings import AppSettings
from actviz.ui.tree_model import format_count
from actviz.ui.window_actions import build_actions, build_menus, build_toolbar
from actviz.ui.window_layout import build_centre, build_status_bar, default_window_size
from actviz.ui.worker import Worker, favour_gui_thread, release_gui_thread

log = logging.getLogger(__name__)

MODEL_FILTER = "Models (*.pt *.pth *.ckpt *.pt2 *.safetensors *.ts *.torchscript *.bin)"
DEFAULT_DEBOUNCE_MS = 300

#: ``confirm_untrusted(parent, path, message) -> bool``: may the file be unpickled?
ConfirmUntrusted = Callable[[QWidget, str, str], bool]


class MainWindow(FileOpening, ExportActions, PinActions, ResultDisplay, QMainWindow):
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
        What the loader threads run (see :mod:`actviz.ui.loaders`); tests inject slow or
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
        self.layer_panels: dict[str, LayerPanel] = {}
        self.last_export: list[Path] = []
        self._selected_layer: str | None = None
        self._open_channel: tuple[str, int] | None = None
        self._last_request: RunRequest | None = None
        self._model_request: ModelRequest | None = None
        self._input_request: InputRequest | None = None
        self._export_request: ExportRequest | None = None
        self._run_kind = "run"
        self._run_due = False
        self._closed = False
        self._samples: list[Path] = []
        self.setWindowTitle("actviz")
        self.setAcceptDrops(True)
        screen = self.screen() or QGuiApplication.primaryScreen()
        self.resize(default_window_size(screen.availableSize() if screen else None))

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(debounce_ms)
        self._debounce.timeout.connect(self._on_debounce_timeout)

        build_actions(self)
        build_toolbar(self)
        build_menus(self)
        build_centre(self)
        self.model_dock = ModelDock(self.session, self)
        self.model_dock.module_selected.connect(self._on_dock_module_selected)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.model_dock)
        # The dock's parts under the names the window has always had.
        self.filter_edit = self.model_dock.filter_edit
        self.tree_model = self.model_dock.tree_model
        self.tree_proxy = self.model_dock.tree_proxy
        self.tree_view = self.model_dock.tree_view
        self.details = self.model_dock.details
        self.input_preview = self.model_dock.input_preview
        build_status_bar(self)
        self._apply_view_settings()

        for worker, slots in (
            (self.worker, (self._on_worker_finished, self._on_worker_errored,
                           self._on_worker_cancelled, self._on_worker_progress)),
            (self.model_loads, (self._on_model_load_finished, self._on_model_load_errored,
                                self._on_model_load_cancelled, self._on_load_progress)),
            (self.input_loads, (self._on_input_load_finished, self._on_input_load_errored,
                                self._on_input_load_cancelled, self._on_load_progress)),
            (self.export_worker, (self._on_export_finished, self._on_export_errored,
                                  self._on_export_cancelled, self._on_export_progress)),
        ):  # fmt: skip
            finished, errored, cancelled, progress = slots
            worker.signals.finished.connect(finished)
            worker.signals.errored.connect(errored)
            worker.signals.cancelled.connect(cancelled)
            worker.signals.progress.connect(progress)
        self.worker.signals.started.connect(self._on_worker_started)

        self.session.model_changed.connect(self._on_session_model_changed)
        self.session.input_changed.connect(self._on_session_input_changed)
        self.session.ticks_changed.connect(self._on_session_ticks_changed)
        self.session.target_changed.connect(self._on_session_target_changed)
        self.session.pins_changed.connect(self._on_session_pins_changed)

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

    def _apply_view_settings(self) -> None:
        s = self.settings
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(True)
        if self.colormap_combo.findText(s.colormap) >= 0:
            self.colormap_combo.setCurrentText(s.colormap)
        self.normalize_combo.setCurrentIndex(max(0, self.normalize_combo.findData(s.normalize)))
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(False)
        self.gradients_action.blockSignals(True)
        self.gradients_action.setChecked(s.show_gradients)
        self.gradients_action.blockSignals(False)
        current = self._colormap_actions.get(self.colormap_combo.currentText())
        if current is not None:
            current.setChecked(True)

    # ========================================================================== public API
    @property
    def colormap(self) -> str:
        """The colour map of the feature maps."""
        return self.colormap_combo.currentText()

    @property
    def gradients_visible(self) -> bool:
        """Whether gradient magnitudes are shown beside activations."""
        return self.gradients_action.isChecked()

    @property
    def result(self) -> RunResult | None:
        """The result the panels show (None before the first run)."""
        return self.session.result

    @property
    def selected_layer(self) -> str | None:
        """The layer the histogram and the single-layer exports are about."""
        return self._selected_layer

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
        self._stop_current_run()
        self._drop_model_load("Opening the model was replaced by an in-memory model.")
        self.banner.clear()
        self.session.set_model(model, name=name, categories=categories, ticks=layers)
        pending = self._input_request
        if pending is not None and pending.generation == 0:
            self._start_input_load(pending)  # it waited for a model: this is the one

    def set_input(
        self, value: Any, *, image: np.ndarray | None = None, description: str = ""
    ) -> None:
        """Use an in-memory tensor (or tuple/dict of tensors) as the input."""
        self._drop_input_load()
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
        self._refresh_busy("Running…")
        self.run_started.emit()
        return gen

    def cancel(self) -> None:
        """Cancel the running capture, model / input load or export (Esc).

        The panels keep the previous result and a cancelled load keeps the previous model.
        """
        self._debounce.stop()
        cancelled = self.worker.cancel()
        cancelled = self.export_worker.cancel() or cancelled
        if self._model_request is not None:
            self._drop_model_load()
            cancelled = True
        if self._input_request is not None:
            source = short_source(self._input_request.source)
            self._drop_input_load(f"Opening {source} was cancelled; the input stays.")
            self._run_if_due()
            cancelled = True
        if cancelled and self.worker.has_current_job():
            self.status_label.setText("Cancelling…")

    def schedule_run(self) -> None:
        """Re-run after the debounce delay (restarted by every further change).

        While an input is being opened the run waits for it (the old input may not fit).
        """
        if not (self.auto_run and not self._closed and self.session.can_run()):
            return
        if self._input_request is not None:
            self._run_due = True
            return
        self._debounce.start()

    def is_busy(self) -> bool:
        """True while a capture, a load or an export is running (stale jobs aside)."""
        return any(w.has_current_job() for w in self._workers()) or self.is_loading()

    # ========================================================================== session events
    def _on_session_model_changed(self) -> None:
        s = self.session
        self.setWindowTitle(f"actviz — {s.model_name}" if s.model_name else "actviz")
        self._clear_panels()
        self.model_dock.show_model()
        self._sync_target_combo(rebuild=True)
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
        if self._input_request is not None:
            self._run_due = True  # the input being opened will start it
            return
        if self.auto_run and self.session.can_run():
            self.run()

    def _run_if_due(self) -> None:
        if self._run_due and self._input_request is None:
            self._run_due = False
            self.schedule_run()

    def _on_worker_started(self, gen: int) -> None:
        self._refresh_busy("Running…")

    def _on_worker_progress(self, gen: int, message: str) -> None:
        self.status_label.setText(message)

    def _on_load_progress(self, gen: int, message: str) -> None:
        self.status_label.setText(message)

    def _on_worker_finished(self, gen: int, result: RunResult) -> None:
        self._refresh_busy()
        try:
            self._apply_result(result)
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display the result")
            self.show_error(f"Could not display the result: {describe_error(exc)}", source="run")
            self.run_failed.emit(str(exc))
            return
        # After the overview's display steps (skipped if a newer result replaces this one).
        self.defer_display(self.run_finished.emit)

    def _on_worker_errored(self, gen: int, error: BaseException) -> None:
        self._refresh_busy()
        log.error("run failed", exc_info=(type(error), error, error.__traceback__))
        what = "Run failed" if self._run_kind == "run" else "Could not update the views"
        text = f"{what}: {describe_error(error)}. The panels still show the previous result."
        self.show_error(text, source="run")
        self.status_label.setText(what)
        self.run_failed.emit(text)

    def _on_worker_cancelled(self, gen: int) -> None:
        self._refresh_busy("Cancelled; the panels show the previous result.")
        self.run_cancelled.emit()

    # ========================================================================== widget slots
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
        if name in self._colormap_actions:
            self._colormap_actions[name].setChecked(True)
        for panel in self.layer_panels.values():
            panel.set_colormap(name)
        if hasattr(self.channel_view, "set_colormap"):
            self.channel_view.set_colormap(name)

    def _on_normalize_changed(self, _index: int) -> None:
        mode = self.normalize_combo.currentData()
        self.settings.normalize = mode
        self.session.normalize = mode
        result, request = self.session.result, self._last_request
        if self.worker.is_busy() and self._run_kind == "run":
            self.run()  # a newer capture is on its way: redo it with the new setting
            return
        if result is None or result.capture is None or request is None:
            return
        # Re-prepare the mosaics from the stored capture: no new forward pass needed.
        request = dataclasses.replace(
            request, normalize=mode, channel_pages=dict(self.session.channel_pages)
        )
        self._last_request = request
        self._run_kind = "prepare"
        cap = result.capture
        self.worker.submit(
            lambda stop, progress: prepare_result(cap, request, should_stop=stop, progress=progress)
        )
        self._refresh_busy("Updating views…")

    def _on_gradients_toggled(self, visible: bool) -> None:
        self.settings.show_gradients = visible
        for panel in self.layer_panels.values():
            panel.set_gradients_visible(visible)

    def _on_auto_run_toggled(self, on: bool) -> None:
        self.auto_run = on

    # ========================================================================== helpers
    def _workers(self) -> tuple[Worker, ...]:
        return (self.worker, self.model_loads, self.input_loads, self.export_worker)

    def _refresh_busy(self, text: str = "") -> None:
        """Show the busy bar (and enable Cancel) while anything current runs; set the status."""
        busy = self.is_busy()
        self.progress_bar.setVisible(busy)
        self.cancel_action.setEnabled(busy)
        if text:
            self.status_label.setText(text)

    def _set_busy(self, busy: bool, text: str = "") -> None:
        # Kept for callers of the earlier name; busy is now read from the workers themselves.
        self._refresh_busy(text)

    def _update_enabled(self) -> None:
        self.run_action.setEnabled(self.session.can_run())
        self.cancel_action.setEnabled(self.is_busy())

    def _stop_current_run(self) -> None:
        self._debounce.stop()
        self.worker.cancel()

    def _wait_until(self, done: Callable[[], bool], poll_ms: int = 5) -> None:
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

    def _sync_target_combo(self, rebuild: bool = False) -> None:
        combo = self.target_combo
        combo.blockSignals(True)
        if rebuild:
            combo.clear()
            combo.addItems(target_choices(self.session.categories))
        target = self.session.target
        if target is None:
            combo.setCurrentIndex(0)
        elif self.session.categories and 0 <= target < len(self.session.categories):
            combo.setCurrentIndex(target + 1)
        else:
            combo.setEditText(str(target))
        combo.blockSignals(False)

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
        release_gui_thread()  # the process gets its switch interval back with the last window
        for worker in (self.model_loads, self.input_loads, self.export_worker):
            worker.shutdown(timeout_ms=0)
        for request in (self._model_request, self._input_request, self._export_request):
            if request is not None and request.succeeded is None:
                request.succeeded = False
        self._model_request = self._input_request = self._export_request = None
        try:
            self.settings.geometry = self.saveGeometry()
            self.settings.window_state = self.saveState()
            self.settings.sync()
        except Exception:  # noqa: BLE001 - settings must never block closing
            log.exception("could not save settings")
        for event, slot in (
            (self.session.model_changed, self._on_session_model_changed),
            (self.session.input_changed, self._on_session_input_changed),
            (self.session.ticks_changed, self._on_session_ticks_changed),
            (self.session.target_changed, self._on_session_target_changed),
            (self.session.pins_changed, self._on_session_pins_changed),
        ):
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
