"""The window's public surface: what a script (``actviz.explore()``) and a test driver call.

:class:`WindowAPI` is mixed into :class:`~actviz.ui.window.main_window.MainWindow`. Everything
here is a short call into the part that does the work; the widgets themselves are reached
through the parts (``window.commands``, ``window.centre``, ``window.status``,
``window.model_dock``) and the features through ``window.features[name]`` (tests and scripts;
window code reaches a feature's part through what it offers the host, e.g. ``session_store``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QMenu, QWidget

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult
    from actviz.ui.host import Feature
    from actviz.ui.tree.dock import ModelDock
    from actviz.ui.window.actions import WindowActions
    from actviz.ui.window.central import Centre, StatusWidgets
    from actviz.ui.window.export_actions import ExportActions
    from actviz.ui.window.file_opening import FileOpening
    from actviz.ui.window.pin_actions import PinActions
    from actviz.ui.window.result_display import ResultDisplay
    from actviz.ui.window.runs import RunControl
    from actviz.ui.worker import Job, Worker
    from actviz.workspace.pins import Pin
    from actviz.workspace.session_state import Session

__all__ = ["WindowAPI"]


class WindowAPI:
    """Runs, models, inputs, exports and pins of the window (a mixin; see the module docs)."""

    session: Session
    runs: RunControl
    display: ResultDisplay
    files: FileOpening
    exports: ExportActions
    pins_ui: PinActions
    commands: WindowActions
    centre: Centre
    status: StatusWidgets
    model_dock: ModelDock
    features: dict[str, Feature]
    worker: Worker
    model_loads: Worker
    input_loads: Worker
    export_worker: Worker
    _closed: bool

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

    @property
    def colormap(self) -> str:
        """The colour map of the feature maps."""
        return self.commands.colormap

    @property
    def gradients_visible(self) -> bool:
        """Whether gradient magnitudes are shown beside activations."""
        return self.display.gradients_visible

    @property
    def selected_layer(self) -> str | None:
        """The layer the histogram and the single-layer exports are about."""
        return self.display.selected_layer

    def run(self) -> Job | None:
        """Start a run now (Ctrl+R); returns its job, or None when it cannot run."""
        return self.runs.run()

    def show_run(self, job: Job, *, streamed: bool = False) -> None:
        """Show ``job``'s end as a run's (a live frame): its result in the panels, its error
        in the banner; ``streamed``: a stream's frame, quiet in the status bar."""
        self.runs.watch(job, kind="frame", streamed=streamed)

    def schedule_run(self) -> None:
        """Re-run after the debounce delay (restarted by every further change)."""
        self.runs.schedule_run()

    def run_if_due(self) -> None:
        """Schedule the run that waited for an input being opened, once none is."""
        self.runs.run_if_due()

    def stop_current_run(self) -> None:
        """Stop the pending automatic run and cancel the running capture."""
        self.runs.stop()

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
            self.show_status("Cancelling…")  # type: ignore[attr-defined]

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
            or any(f.is_busy() for f in self.features.values())
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
        self.status.progress_bar.setVisible(busy and not self._only_streaming())
        # (Twice a live frame: the workers are asked once.)
        self.commands.cancel_action.setEnabled(self._cancellable(busy))
        self.display.update_placeholder(busy)
        if text:
            self.show_status(text)  # type: ignore[attr-defined]

    def _only_streaming(self) -> bool:
        """Whether the only work under way is a stream's frames on the capture worker."""
        others = (self.model_loads, self.input_loads, self.export_worker)
        if any(w.has_current_job() for w in others) or self.files.is_loading():
            return False
        return self.runs.streaming()

    def _cancellable(self, busy: bool | None = None) -> bool:
        busy = self.is_busy() if busy is None else busy
        return busy or any(f.is_busy() for f in self.features.values())

    def _update_enabled(self) -> None:
        self.display.update_placeholder(self.is_busy())
        self.commands.run_action.setEnabled(self.session.can_run())
        self.commands.cancel_action.setEnabled(self._cancellable())

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
        self.stop_current_run()
        self.files.drop_model_load("Opening the model was replaced by an in-memory model.")
        self.clear_messages()  # type: ignore[attr-defined]
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
            self.show_error(f"Target: {exc}")  # type: ignore[attr-defined]
            self.runs.sync_target_combo()  # the box shows the target in force, not the refused one
            return False
        self.clear_messages("action")  # type: ignore[attr-defined]
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

    def tree_context_menu(self, name: str | None) -> QMenu:
        """The module tree's context menu for row ``name`` (built, not shown)."""
        return self.model_dock.tree_context_menu(name)

    def open_model_source(
        self,
        source: str,
        *,
        arch: str | None = None,
        weights: str | None = "DEFAULT",
        trust: bool = False,
        wait: bool = False,
    ) -> bool:
        """Open a model from ``source`` in the background (see :class:`FileOpening`)."""
        return self.files.open_model_source(
            source, arch=arch, weights=weights, trust=trust, wait=wait
        )

    def open_input_source(self, source: str, *, remember: bool = True, wait: bool = False) -> bool:
        """Open an input (image, tensor file, ``text:...``) in the background."""
        return self.files.open_input_source(source, remember=remember, wait=wait)

    def load_demo(self, sample: str | None = None) -> bool:
        """Open the bundled demo model and one of its sample images."""
        return self.files.load_demo(sample)

    def open_default_input(self) -> bool:
        """Open the model's natural default input (a sample image, a prompt)."""
        return self.files.open_default_input()

    def open_dropped(self, path: str | Path) -> bool:
        """Open a dropped file: a model or an input, by its kind."""
        return self.files.open_dropped(path)

    # ------------------------------------------------------------------ the panels
    def select_layer(self, name: str | None, *, reveal: bool = True) -> None:
        """Make ``name`` the selected layer (histogram, single-layer exports)."""
        self.display.select_layer(name, reveal=reveal)

    def open_channel(self, name: str, channel: int) -> bool:
        """Show one channel of a layer, large, in the channel view."""
        return self.display.open_channel(name, channel)

    def turn_page(self, name: str, step: int) -> bool:
        """Turn a layer's mosaic ``step`` pages on."""
        return self.display.turn_page(name, step)

    def defer_display(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        """Run ``step`` after the display steps of the result being shown."""
        self.display.defer_display(step, stale_ok=stale_ok)

    def display_pending(self) -> bool:
        """True while display steps of a result wait to run."""
        return self.display.display_pending()

    def panel_updates_pending(self) -> bool:
        """True while layer panels still show an older result (filled a few per pass)."""
        return self.display.panel_updates_pending()

    def flush_panel_updates(self) -> None:
        """Put the latest result on every layer panel now."""
        self.display.flush_panel_updates()

    # ------------------------------------------------------------------ exports and pins
    @property
    def last_export(self) -> list[Path]:
        """Files written by the last finished "export everything"."""
        return self.exports.last_export

    def export_all(self, out_dir: str | Path, *, wait: bool = False) -> bool:
        """Write every panel, array and ``reproduce.py`` to ``out_dir`` in the background."""
        return self.exports.export_all(out_dir, wait=wait)

    def export_panel_png(self, path: str | Path, panel: QWidget | None = None) -> Path | None:
        """Save one panel (default: the selected layer's) as a PNG."""
        return self.exports.export_panel_png(path, panel)

    def export_layer_npy(self, out_dir: str | Path, name: str | None = None) -> list[Path]:
        """Save one layer's activation and gradient as ``.npy`` files."""
        return self.exports.export_layer_npy(out_dir, name)

    def pin_result(self) -> Pin | None:
        """Keep the result shown beside the latest one (Pinned results menu)."""
        return self.pins_ui.pin_result()

    def show_pinned(self, pin: Pin) -> bool:
        """Show a pinned result in the panels (live mode pauses)."""
        return self.pins_ui.show_pinned(pin)

    def unpin_shown(self) -> bool:
        """Unpin the result shown."""
        return self.pins_ui.unpin_shown()

    def unpin_all(self) -> None:
        """Unpin every result."""
        self.pins_ui.unpin_all()

    def compare_with_pin(self, pin: Any) -> bool:
        """Show the Compare tab comparing the latest run with ``pin`` (Pinned results menu)."""
        compare = self.pins_ui.compare_with  # offered by the Compare feature, if built
        return compare is not None and bool(compare(pin))

    # ------------------------------------------------------------------ sessions
    def adopt_model(
        self,
        loaded: Any,
        *,
        ticks: Sequence[str] | None = None,
        gradcam_layer: str | None = None,
        open_args: dict[str, Any] | None = None,
    ) -> None:
        """Show a model already opened (a session's ``LoadedModel``) with ``ticks`` ticked:
        what opening one ends with, the input left as it is. ``open_args`` are the
        ``open_model`` arch, weights and trust it was opened with (reproduce.py)."""
        self.stop_current_run()
        self.files.drop_model_load("Opening the model was replaced by a session's model.")
        self.files.inputs.drop()
        self.clear_messages()  # type: ignore[attr-defined]
        self.session.set_loaded_model(loaded, ticks=ticks, gradcam_layer=gradcam_layer)
        self.session.model_open_args = dict(open_args or {})

    def set_view_settings(
        self, *, colormap: str | None = None, normalize: str | None = None
    ) -> None:
        """Choose the colour map and the normalisation as the toolbar does (None: unchanged)."""
        a = self.commands
        if colormap is not None and a.colormap_combo.findText(colormap) >= 0:
            a.colormap_combo.setCurrentText(colormap)
        if normalize is not None and a.normalize_combo.findData(normalize) >= 0:
            a.normalize_combo.setCurrentIndex(a.normalize_combo.findData(normalize))

    def show_result(self, result: RunResult, request: Any = None) -> None:
        """Show a result prepared elsewhere (a session's saved run) instead of running;
        ``request`` (its ``RunRequest``) lets view changes re-prepare it."""
        self.runs.halt()
        if request is not None:
            self.runs.last_request = request
        self.display.apply_result(result)
        self.refresh_busy()
        self.display.after_panels(self.run_finished.emit)  # type: ignore[attr-defined]
