"""The window's public surface: what a script (``actviz.explore()``) and a test driver call.

:class:`WindowAPI` is mixed into :class:`~actviz.ui.window.main_window.MainWindow`: runs,
waiting, the model, the input and the ticks. Everything else is reached through the part that
does it (``window.files``, ``window.exports``, ``window.pins_ui``, ``window.display``,
``window.host``, ...); the names that moved there still work for one release, with a
:class:`MovedWarning`.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QEventLoop, QTimer

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult
    from actviz.ui.host import Feature
    from actviz.ui.panels.feature_map import LayerPanel
    from actviz.ui.window.actions import WindowActions
    from actviz.ui.window.central import StatusWidgets
    from actviz.ui.window.file_opening import FileOpening
    from actviz.ui.window.hosting import Host
    from actviz.ui.window.result_display import ResultDisplay
    from actviz.ui.window.runs import RunControl
    from actviz.ui.worker import Job, Worker
    from actviz.workspace.session_state import Session

__all__ = ["MOVED", "MovedWarning", "WindowAPI"]


class MovedWarning(DeprecationWarning):
    """A window method that moved to one of its parts was called on the window."""


_MOVED_TO = {
    "host": "layer_panels channel_view show_tab set_tab_visible current_tab menu show_error "
    "show_warning clear_messages show_status model_dialog report_parts session_parts "
    "restore_session_parts refresh_panel page_channels show_input_image resize_dock "
    "dock_back add_tab add_dock add_menu_action add_toolbar add_status_widget reveal_panel "
    "fit_dock_width layout_state restore_layout_state sample_inputs dialog_parent "
    "fill_tile_menu add_tile_menu_entries offer_pin_comparison offer_session_store "
    "add_prediction_widget set_prediction_bars_visible add_overview_widget show_run "
    "stop_current_run adopt_model set_view_settings show_result",
    "runs": "schedule_run run_if_due",
    "files": "open_model_source open_input_source load_demo open_default_input open_dropped",
    "display": "selected_layer gradients_visible select_layer open_channel turn_page "
    "defer_display display_pending panel_updates_pending flush_panel_updates",
    "exports": "last_export export_all export_panel_png export_layer_npy",
    "pins_ui": "pin_result show_pinned unpin_shown unpin_all compare_with_pin",
    "commands": "colormap",
    "model_dock": "tree_context_menu",
}
#: Names that moved from the window to a part: ``{name: part}`` (``window.<part>.<name>``).
MOVED: Mapping[str, str] = {n: part for part, names in _MOVED_TO.items() for n in names.split()}


class WindowAPI:
    """Runs, waiting, the model, the input and the ticks (a mixin; see the module docs)."""

    session: Session
    host: Host
    runs: RunControl
    display: ResultDisplay
    files: FileOpening
    commands: WindowActions
    status: StatusWidgets
    features: dict[str, Feature]
    worker: Worker
    model_loads: Worker
    input_loads: Worker
    export_worker: Worker
    _closed: bool

    def __getattr__(self, name: str) -> Any:
        # Only names not found otherwise: the deprecated ones that moved to a part.
        part = MOVED.get(name)
        if part is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        warnings.warn(f"window.{name} moved: use window.{part}.{name}", MovedWarning, stacklevel=2)
        return getattr(getattr(self, part), name)

    # ------------------------------------------------------------------ runs
    @property
    def auto_run(self) -> bool:
        """Whether changes re-run the model automatically."""
        return self.runs.auto_run

    @auto_run.setter
    def auto_run(self, on: bool) -> None:
        self.runs.auto_run = on

    @property
    def result(self) -> RunResult | None:
        """The result the panels show (None before the first run)."""
        return self.session.result

    def panel(self, layer: str) -> LayerPanel | None:
        """The panel showing ``layer`` (None when it has none)."""
        return self.display.layer_panels.get(layer)

    def run(self) -> Job | None:
        """Start a run now (Ctrl+R); returns its job, or None when it cannot run."""
        return self.runs.run()

    def cancel(self) -> None:
        """Cancel the running capture, load, export, comparison or scan (Esc); what was shown or
        scanned before is kept.
        """
        self.runs.halt()
        cancelled = self.worker.cancel()
        cancelled = self.export_worker.cancel() or cancelled
        cancelled = self.files.cancel() or cancelled
        for feature in self.features.values():
            cancelled = feature.cancel() or cancelled
        if cancelled and self.worker.has_current_job():
            self.host.show_status("Cancelling…")

    def is_busy(self) -> bool:
        """True while a capture, a load or an export is running (stale jobs aside)."""
        workers = (self.worker, self.model_loads, self.input_loads, self.export_worker)
        return any(w.has_current_job() for w in workers) or self.files.is_loading()

    def is_loading(self) -> bool:
        """True while a model or an input is being opened."""
        return self.files.is_loading()

    def is_closed(self) -> bool:
        """True once the window closed (its workers are shut down)."""
        return self._closed

    def wait_idle(self, timeout_ms: int = 60_000) -> bool:
        """Process events until nothing runs, no run is due and the panels show the latest
        result; False when ``timeout_ms`` passed first."""
        timer = QTimer()
        timer.setSingleShot(True)
        timer.start(timeout_ms)
        self.wait_until(lambda: not timer.isActive() or not self._pending_work())
        self.display.flush_panel_updates()
        return not self._pending_work()

    def _pending_work(self) -> bool:
        return (
            self.is_busy()
            or self.runs.is_due()
            or self.display.display_pending()
            or self.host.features_busy()
        )

    def wait_until(self, done: Callable[[], bool], poll_ms: int = 5) -> None:
        """Run a local event loop until ``done()`` (or the window closes)."""
        if done() or self._closed:
            return
        loop, timer = QEventLoop(), QTimer()
        timer.setInterval(poll_ms)
        timer.timeout.connect(lambda: (done() or self._closed) and loop.quit())
        timer.start()
        loop.exec()
        timer.stop()

    def refresh_busy(self, text: str = "") -> None:
        """Show the busy bar (and enable Cancel) while anything current runs; set the status."""
        busy = self.is_busy()
        # A stream's frames (live mode) have their own rate read-out; an animated busy bar
        # would repaint the status bar constantly. Anything else busy meanwhile shows it.
        others = (self.model_loads, self.input_loads, self.export_worker)
        only_streaming = (
            not any(w.has_current_job() for w in others)
            and not self.files.is_loading()
            and self.runs.streaming()
        )
        self.status.progress_bar.setVisible(busy and not only_streaming)
        self.commands.cancel_action.setEnabled(busy or self.host.features_busy())
        self.display.update_placeholder(busy)
        if text:
            self.host.show_status(text)

    def _update_enabled(self) -> None:
        busy = self.is_busy()
        self.display.update_placeholder(busy)
        self.commands.run_action.setEnabled(self.session.can_run())
        self.commands.cancel_action.setEnabled(busy or self.host.features_busy())

    # ------------------------------------------------------------------ model, input, target
    def set_model(
        self,
        model: Any,
        *,
        name: str | None = None,
        categories: Sequence[str] | None = None,
        layers: Sequence[str] | None = None,
    ) -> None:
        """Show an in-memory ``nn.Module`` with ``layers`` ticked (None: defaults); a model still
        being opened from a file is dropped.
        """
        self.runs.stop()
        self.files.drop_model_load("Opening the model was replaced by an in-memory model.")
        self.host.clear_messages()
        self.session.set_model(model, name=name, categories=categories, ticks=layers)
        self.files.inputs.start_waiting()

    def set_input(
        self, value: Any, *, image: np.ndarray | None = None, description: str = ""
    ) -> None:
        """Use an in-memory tensor (or tuple/dict of tensors) as the input."""
        self.files.inputs.drop()
        self.session.set_input(
            value, source="", kind="tensor", image=image, description=description
        )

    def set_target_text(self, text: str) -> bool:
        """Set the target from text like the selector's ("auto", "3", "3: star", "star")."""
        try:
            self.session.set_target_text(text)
        except ValueError as exc:
            self.host.show_error(f"Target: {exc}")
            self.runs.sync_target_combo()  # the box shows the target in force, not the refused one
            return False
        self.host.clear_messages("action")
        self.runs.sync_target_combo()
        return True

    def tick(self, *names: str | Sequence[str], ticked: bool = True) -> None:
        """Tick layers by name: ``tick("conv1", "fc")`` (a list of names also does).

        ``ticked=False`` unticks them, as :meth:`untick` does.

        Raises
        ------
        ValueError
            A name the model does not have (close matches suggested), or no model is shown.
        """
        self.session.set_ticked(self._known_layers(names), ticked)

    def untick(self, *names: str | Sequence[str]) -> None:
        """Untick layers by name (as :meth:`tick`)."""
        self.tick(*names, ticked=False)

    def _known_layers(self, names: tuple[str | Sequence[str], ...]) -> list[str]:
        flat: list[str] = []
        for name in names:
            if isinstance(name, str):
                flat.append(name)
            elif isinstance(name, bool) or not isinstance(name, Sequence):
                raise TypeError(
                    f"tick() takes layer names (str, or lists of them), not {name!r}; "
                    "untick with untick() or ticked=False"
                )
            else:
                flat.extend(name)
        tree = self.session.tree
        if tree is None:
            raise ValueError(f"no model is shown, so there are no layers to tick ({flat})")
        known = [node.name for node in tree]
        for name in flat:
            if name not in tree:
                close = difflib.get_close_matches(name, [n for n in known if n], n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ValueError(
                    f"unknown layer {name!r}{hint} (the model has {len(known)} modules)"
                )
        return flat
