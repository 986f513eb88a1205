"""The one way a feature plugs into the explorer window: the :class:`WindowHost` protocol.

A feature (live mode, what-if edits, the Compare tab, dataset scans, token views, and those to
come) is one class constructed with the host and nothing else. It reads and changes the state
of the investigation through ``host.session`` (:class:`~actviz.workspace.session.Session`, whose
events it listens to), runs its jobs on ``host.worker`` (one capture at a time per model), adds
its widgets through ``add_tab`` / ``add_dock`` / ``add_menu_action`` / ``add_toolbar`` /
``add_status_widget`` and the panel slots, and tells the user things with ``show_error`` /
``show_warning`` / ``show_status``. It never imports ``actviz.ui.window`` nor another feature's
package, so features can be added, removed and tested one at a time.

The window calls each feature back through :class:`Feature`: Esc cancels, busy state, jobs it
owns on the shared worker, "Reset window layout" and shutdown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog, QDockWidget, QMenu, QToolBar, QWidget

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from actviz.display.result import RunResult
    from actviz.ui.panels.channel_view import ChannelView
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.worker import Worker
    from actviz.workspace.session import Session

__all__ = ["Feature", "FeatureBase", "WindowHost"]


@runtime_checkable
class WindowHost(Protocol):
    """What a feature may use of the window (:class:`~actviz.ui.window.main_window.MainWindow`).

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

    # ------------------------------------------------------------------ runs and results
    @property
    def result(self) -> RunResult | None: ...
    @property
    def selected_layer(self) -> str | None: ...
    @property
    def layer_panels(self) -> Mapping[str, LayerPanel]: ...
    def panel(self, layer: str) -> LayerPanel | None: ...
    def run(self) -> int | None: ...
    def schedule_run(self) -> None: ...
    def refresh_busy(self, text: str = "") -> None: ...
    def is_closed(self) -> bool: ...
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

    # ------------------------------------------------------------------ where features attach
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
    def add_menu_action(
        self, menu: str, action: QAction, *, before: str | None = None, shortcut: bool = True
    ) -> None: ...
    def menu(self, title: str) -> QMenu: ...
    def add_toolbar(self, toolbar: QToolBar, *, new_row: bool = False) -> None: ...
    def add_status_widget(self, widget: QWidget) -> None: ...
    def add_prediction_widget(self, widget: QWidget) -> None: ...
    def set_prediction_bars_visible(self, visible: bool) -> None: ...
    def add_overview_widget(self, widget: QWidget, *, row: str = "top") -> None: ...
    @property
    def channel_view(self) -> ChannelView: ...
    def show_input_image(self, image: np.ndarray | None, caption: str) -> None: ...
    def model_dialog(self, *, keep_open: bool = False) -> QDialog: ...
    def sample_inputs(self) -> list[str]: ...
    def dialog_parent(self) -> QWidget: ...

    # ------------------------------------------------------------------ sessions
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

    # ------------------------------------------------------------------ messages
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
    def owns_job(self, generation: int) -> bool: ...
    def reset_layout(self) -> None: ...
    def shutdown(self) -> None: ...


class FeatureBase:
    """Defaults for :class:`Feature`: nothing to cancel, never busy, owns no job."""

    name = ""

    def cancel(self) -> bool:
        """Cancel what the feature runs (Esc); True when something was cancelled."""
        return False

    def is_busy(self) -> bool:
        """True while the feature runs something the user can cancel."""
        return False

    def owns_job(self, generation: int) -> bool:
        """True when ``generation`` is a job this feature put on the shared worker."""
        return False

    def reset_layout(self) -> None:
        """Put the feature's docks where a first start puts them."""

    def shutdown(self) -> None:
        """Stop what runs and let go of the window (called once, when it closes)."""
