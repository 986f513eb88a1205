"""The one way a feature plugs into the explorer window: the :class:`WindowHost` protocol.

A feature is one class constructed with the host and nothing else (session, worker, a
private copy of the model through ``private_model``, widgets, messages); it never imports
``actviz.ui.window`` or another feature, so features are added, removed and tested one at a
time. :class:`FeatureJob` keeps a one-job view in step with its job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from PySide6.QtCore import QObject, Qt, SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDockWidget,
    QLabel,
    QMenu,
    QProgressBar,
    QToolBar,
    QWidget,
)

from actviz.ui.background_loads import describe_error

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from actviz.display.prepared import RunResult
    from actviz.ui.panels.channel_view import ChannelView
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.private_model import PrivateModel
    from actviz.ui.worker import Job, Worker
    from actviz.workspace.session_state import Session

__all__ = [
    "HOST_SIGNALS",
    "Feature",
    "FeatureBase",
    "FeatureJob",
    "StepsAndLine",
    "WindowHost",
    "show_line",
    "show_steps",
]


#: The window's signals a feature may connect to: the host re-exposes them (plugins' guarded).
HOST_SIGNALS = (
    "run_started",
    "run_finished",
    "run_failed",
    "run_cancelled",
    "model_loaded",
    "model_load_failed",
    "input_loaded",
    "input_load_failed",
    "pinned_shown",
    "panel_created",
    "panel_shown",
    "tab_changed",
    "closed",
)


@runtime_checkable
class WindowHost(Protocol):
    """What a feature may use of the window: the window's
    :class:`~actviz.ui.window.hosting.Host` implements it.

    Signals
    -------
    run_started, run_finished, run_failed(str), run_cancelled
        The window's own runs (a result reached the panels, or did not).
    model_loaded(str), input_loaded(str), input_load_failed(str)
        Opening a model or an input from a source finished.
    pinned_shown
        A pinned result is about to replace the panels' result.
    panel_created(str, LayerPanel), panel_shown(str, LayerPanel, PreparedLayer)
        A layer panel was made; a panel now shows that prepared layer.
    tab_changed(QWidget)
        The central tab shown.
    closed
        The window closed: features shut down.
    """

    session: Session
    settings: Any  # AppSettings: recent files, persistent view settings
    worker: Worker
    #: What the window's loader threads run (a feature opening a second model uses them too).
    model_loader: Callable[..., Any]
    input_loader: Callable[..., Any]
    #: ``(parent, path, message) -> bool``: may this full pickle be unpickled?
    confirm_untrusted: Callable[[QWidget, str, str], bool]

    run_started: SignalInstance
    run_finished: SignalInstance
    run_failed: SignalInstance
    run_cancelled: SignalInstance
    model_loaded: SignalInstance
    input_loaded: SignalInstance
    input_load_failed: SignalInstance
    pinned_shown: SignalInstance
    panel_created: SignalInstance
    panel_shown: SignalInstance
    tab_changed: SignalInstance
    closed: SignalInstance

    def private_model(
        self, owner: QObject, *, to_eval: bool = False, keep: bool = False
    ) -> PrivateModel:
        """The one way a feature gets a private copy of the session's model for work beside
        the window's captures (hooks are per-module state). The handle, a child of ``owner``,
        hands out a copy made on the capture worker between two jobs (``get(then, failed)``)
        or one to build in a job of the owner's (``unbuilt()``); a copy whose original's
        weights changed is made again, a sibling's copy no job uses is shared, and copies go
        with the model (a switch), the idle window and the window's close. ``to_eval``: copies
        in eval mode; ``keep``: the owner keeps its copy between its jobs (not shared, not
        trimmed). Edits are never in a copy: a job passes them to its run."""
        ...

    @property
    def result(self) -> RunResult | None: ...
    @property
    def selected_layer(self) -> str | None: ...
    @property
    def layer_panels(self) -> Mapping[str, LayerPanel]: ...
    def panel(self, layer: str) -> LayerPanel | None: ...
    def run(self) -> Job | None: ...
    def show_run(self, job: Job, *, streamed: bool = False) -> None: ...
    def schedule_run(self) -> None: ...
    def refresh_busy(self, text: str = "") -> None: ...
    def is_closed(self) -> bool: ...
    def wait_until(self, done: Callable[[], bool], poll_ms: int = 5) -> None: ...
    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None: ...
    def display_pending(self) -> bool: ...
    def refresh_panel(self, layer: str) -> None: ...
    def select_layer(self, name: str | None, *, reveal: bool = True) -> None: ...
    def reveal_panel(self, layer: str) -> None: ...
    def open_channel(self, name: str, channel: int) -> bool: ...
    def open_input_source(self, source: str, *, remember: bool = True) -> bool: ...
    def page_channels(self, layer: str) -> int: ...
    def add_tile_menu_entries(
        self, fill: Callable[[QMenu, str, tuple[int, ...]], None]
    ) -> None: ...
    def fill_tile_menu(self, menu: QMenu, layer: str, channels: Sequence[int]) -> None: ...

    def add_tab(self, widget: QWidget, title: str) -> None: ...
    def set_tab_visible(self, widget: QWidget, visible: bool) -> None: ...
    def show_tab(self, widget: QWidget | None = None) -> None: ...
    def current_tab(self) -> QWidget | None: ...
    def add_dock(
        self,
        dock: QDockWidget,
        area: Qt.DockWidgetArea = Qt.DockWidgetArea.RightDockWidgetArea,
        *,
        width: int | None = None,
        hidden: bool = True,
    ) -> None: ...
    def resize_dock(self, dock: QDockWidget, width: int) -> None: ...
    def remove_dock(self, dock: QDockWidget) -> None: ...
    def dock_back(
        self, dock: QDockWidget, area: Qt.DockWidgetArea, *, width: int | None = None
    ) -> None: ...
    def fit_dock_width(self, dock: QDockWidget) -> None: ...
    def add_menu_action(
        self, menu: str, action: QAction, *, before: str | None = None, shortcut: bool = True
    ) -> None: ...
    def menu(self, title: str) -> QMenu: ...
    def add_toolbar(self, toolbar: QToolBar, *, new_row: bool = False) -> None: ...
    def add_status_widget(self, widget: QWidget) -> None: ...
    def offer_pin_comparison(self, compare: Callable[[Any], object]) -> None: ...
    def offer_session_store(self, store: Any) -> None: ...
    def offer_run_override(self, engaged: Callable[[], bool]) -> None: ...
    def offer_export_writers(self, writers: Any) -> None: ...
    def offer_input_filters(self, filters: list[str]) -> None: ...
    def add_prediction_widget(self, widget: QWidget) -> None: ...
    def set_prediction_bars_visible(self, visible: bool) -> None: ...
    def add_overview_widget(self, widget: QWidget, *, row: str = "top") -> None: ...
    @property
    def channel_view(self) -> ChannelView: ...
    def show_input_image(self, image: np.ndarray | None, caption: str) -> None: ...
    def model_dialog(self, *, keep_open: bool = False) -> QDialog: ...
    def sample_inputs(self) -> list[str]: ...
    def dialog_parent(self) -> QWidget: ...

    def set_target_text(self, text: str) -> bool: ...
    def stop_current_run(self) -> None: ...
    def adopt_model(
        self,
        loaded: Any,
        *,
        ticks: Sequence[str] | None = None,
        gradcam_layer: str | None = None,
        open_args: dict[str, Any] | None = None,
    ) -> None: ...
    def set_view_settings(
        self, *, colormap: str | None = None, normalize: str | None = None
    ) -> None: ...
    def show_result(self, result: RunResult, request: Any = None) -> None: ...
    def layout_state(self) -> bytes: ...
    def restore_layout_state(self, data: bytes) -> bool: ...
    def session_parts(self) -> dict[str, Any]: ...
    def restore_session_parts(self, parts: Mapping[str, Any]) -> None: ...
    def report_parts(self) -> dict[str, Any]: ...

    def show_error(self, text: str, source: str = "action", *, details: str = "") -> None: ...
    def show_warning(self, text: str, source: str = "action") -> None: ...
    def clear_messages(self, source: str | None = None) -> None: ...
    def show_status(self, text: str) -> None: ...


class Feature(Protocol):
    """What the window asks of every feature it hosts."""

    #: Key of the feature in ``window.features`` ("live", "whatif", ...).
    name: str

    def cancel(self) -> bool: ...
    def is_busy(self) -> bool: ...
    def reset_layout(self) -> None: ...
    def shutdown(self) -> None: ...


class FeatureBase:
    """Defaults for :class:`Feature`: nothing to cancel, never busy."""

    name = ""

    def cancel(self) -> bool:
        """Cancel what the feature runs (Esc); True when something was cancelled."""
        return False

    def is_busy(self) -> bool:
        """True while the feature runs something the user can cancel."""
        return False

    def reset_layout(self) -> None:
        """Put the feature's docks where a first start puts them."""

    def shutdown(self) -> None:
        """Stop what runs and let go of the window (called once, when it closes)."""


def show_steps(bar: QProgressBar, done: int, total: int) -> None:
    """``done`` of ``total`` steps on ``bar`` (a busy bar until a total is known)."""
    if total > 0:
        bar.setRange(0, total)
        bar.setValue(min(done, total))


def show_line(label: QLabel, text: str, *, error: bool = False) -> None:
    """``text`` on a message line, red for an error, hidden when empty."""
    label.setText(text)
    label.setStyleSheet("color: #c0392b;" if error else "")
    label.setVisible(bool(text))


class StepsAndLine:
    """:class:`FeatureJob`'s view calls over a ``progress`` bar and a ``message`` line."""

    progress: QProgressBar
    message: QLabel

    def set_progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` steps."""
        show_steps(self.progress, done, total)

    def set_message(self, text: str, *, error: bool = False) -> None:
        """The message line: ``text``, red for an error, hidden when empty."""
        show_line(self.message, text, error=error)


class FeatureJob(QObject):
    """The one job at a time a feature runs on a worker, and the feature's view kept in step.

    The view has ``set_busy(bool)``, ``set_message(text, *, error=False)`` and (with ``steps``)
    ``set_progress(done, total)``. Finish (``on_finished(value, context)``), failure, cancel and
    supersession (``interrupted``) each free the view and say so in it and the status bar; red
    messages also go to ``on_failed(text)``. ``parent`` (the feature) names the failures' logger.
    """

    def __init__(
        self,
        parent: QObject,
        host: WindowHost,
        view: Any,
        *,
        failed: str,
        failed_status: str,
        cancelled: str | Callable[[], str],
        cancelled_status: str,
        log_as: str,
        on_finished: Callable[[Any, Any], None],
        interrupted: str = "",
        on_failed: Callable[[str], Any] | None = None,
        steps: bool = True,
        worker: Worker | None = None,
    ) -> None:
        super().__init__(parent)
        self.host = host
        self.view = view
        self.worker = worker if worker is not None else host.worker
        #: The job running (None: none).
        self.job: Job | None = None
        #: What :meth:`start` was given to hand to ``on_finished`` (None when none runs).
        self.context: Any = None
        #: ``(done, total)`` steps of the job running (written by its thread).
        self.progress: tuple[int, int] = (0, 0)
        # The failure prefix given at construction, and the running job's.
        self._failed_default = self._failed = failed
        self._failed_status = failed_status
        self._cancelled, self._cancelled_status = cancelled, cancelled_status
        self._interrupted = interrupted
        self._done = ""
        self._log = logging.getLogger(type(parent).__module__)
        self._log_as = log_as
        self._on_finished, self._on_failed = on_finished, on_failed
        self._steps = steps
        # What the view says of the running job, and when it began (steps and an ETA follow).
        self._message = ""
        self._began = 0.0

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the job's end is shown."""
        return self.job is not None

    def start(
        self,
        job: Callable[[Any, Any], Any],
        *,
        message: str,
        status: str,
        done: str,
        failed: str | None = None,
        context: Any = None,
    ) -> Job:
        """Submit ``job(should_stop, report)``: the view says ``message``, the status bar
        ``status`` then ``done`` (``failed``: this job's failure prefix). Returns its handle."""
        self.context = context
        self._failed = failed if failed is not None else self._failed_default
        self._done = done
        self.view.set_busy(True)
        self.view.set_message(message)
        self._message, self._began = message, time.monotonic()
        handle = self.job = self.worker.submit(job, supersede=False)
        # Each slot checks the job is still this one: a later start (or drop) forgets it.
        handle.on(
            finished=lambda value: self._finished(handle, value),
            failed=lambda error: self._errored(handle, error),
            cancelled=lambda: self._was_cancelled(handle),
            superseded=lambda: self._superseded(handle),
        )
        if self.worker is self.host.worker:  # the window's status bar says what it does
            handle.progress.connect(self.host.show_status)
        if self._steps:
            handle.on(
                started=lambda: self._started(handle), progress=lambda _m: self._stepped(handle)
            )
        self.host.refresh_busy(status)
        return handle

    def cancel(self) -> bool:
        """Ask the running job to stop (its end is shown when the worker says so)."""
        if self.job is None:
            return False
        self.job.cancel()
        return True

    def drop(self) -> None:
        """Forget the running job without showing an end (every job on a feature's own
        :attr:`worker` turns stale; the view is left as it is)."""
        self.job = None
        self.context = None
        self.worker.drop()

    def _free(self, status: str) -> Any:
        context = self.context
        self.job = None
        self.context = None
        self.view.set_busy(False)
        self.host.refresh_busy(status)
        return context

    def _fail(self, status: str, text: str) -> None:
        self._free(status)
        self.view.set_message(text, error=True)
        if self._on_failed is not None:
            self._on_failed(text)

    def _started(self, job: Job) -> None:
        if job is self.job:  # it may have waited for a run: the clock starts now
            self._began = time.monotonic()

    def _stepped(self, job: Job) -> None:
        if job is self.job:
            done, total = self.progress
            self.view.set_progress(done, total)
            if total > 0 and done > 0:
                elapsed = time.monotonic() - self._began
                self.view.set_message(step_message(self._message, done, total, elapsed))

    def _superseded(self, job: Job) -> None:
        if job is self.job and self._interrupted:
            # A status of its own: live frames set none, so the job's "…ing" would stay.
            self._fail(
                f"{self._log_as[:1].upper()}{self._log_as[1:]} interrupted", self._interrupted
            )

    def _finished(self, job: Job, value: Any) -> None:
        if job is self.job:
            self._on_finished(value, self._free(self._done))

    def _errored(self, job: Job, error: BaseException) -> None:
        if job is self.job:
            self._log.info("%s failed: %s", self._log_as, error)
            self._fail(self._failed_status, f"{self._failed}: {describe_error(error)}")

    def _was_cancelled(self, job: Job) -> None:
        if job is self.job:
            text = self._cancelled() if callable(self._cancelled) else self._cancelled
            self._fail(self._cancelled_status, text)


def step_message(message: str, done: int, total: int, elapsed_s: float) -> str:
    """``message`` + "Step 40 of 800, about 2 min left." (the estimate from the first step)."""
    text = f"{message} Step {done} of {total}"
    if 0 < done < total and elapsed_s > 0:
        left = elapsed_s / done * (total - done)
        text += f", about {_duration(left)} left"
    return text + "."


def _duration(seconds: float) -> str:
    if seconds < 1.5:
        return "1 s"
    if seconds < 90:
        return f"{round(seconds)} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
