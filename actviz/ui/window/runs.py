"""The window's runs: a debounced run on session changes, Ctrl+R at once; errors to the banner
(traceback to the log); view settings re-prepare without a forward pass where they can. And
Run > Pin this result and Run > Pinned results (:class:`PinActions`; the pins: ``session.pins``)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSignalBlocker, QTimer
from PySide6.QtWidgets import QMenu

from actviz.core.capture import format_bytes
from actviz.core.targets import detections, target_choices
from actviz.display.repage import renormalised
from actviz.ui.background_loads import describe_error, error_details
from actviz.workspace.pins import Pin, PinRefused
from actviz.workspace.session_state import RunRequest, RunResult, run_job

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.worker import Job

log = logging.getLogger(__name__)


class RunControl:
    """Starts the window's runs and routes their results (see the module docstring)."""

    def __init__(self, window: Any, *, debounce_ms: int, auto_run: bool) -> None:
        self.window = window  # the MainWindow (not imported: it imports this)
        self.session, self.worker, self.auto_run = window.session, window.worker, auto_run
        # The latest job started on the worker is a frame of a stream (live mode playing).
        self._stream_started = False
        #: The busy state on screen is a stream's (live frames): its next frames change none of it.
        self._stream_shown = False
        #: The request of the latest run or view update (re-prepared by view settings).
        self.last_request: RunRequest | None = None
        #: What the window's latest job is: "run" (a capture) or "prepare" (new views).
        self._job_kind = ""
        #: Whether the target list shows a detector's detections (rebuilt with each result).
        self._detection_targets = False
        self._run_due = False
        self._debounce = QTimer(window, singleShot=True, interval=debounce_ms)
        self._debounce.timeout.connect(self._on_debounce_timeout)
        a = window.commands
        a.run_action.triggered.connect(lambda: self.run())
        a.cancel_action.triggered.connect(window.cancel)
        a.input_list_action.toggled.connect(self._on_input_list_toggled)
        a.auto_run_action.toggled.connect(lambda on: setattr(self, "auto_run", on))
        combo, set_target = a.target_combo, window.host.set_target_text
        combo.activated.connect(lambda i: set_target(combo.itemText(i)))
        combo.lineEdit().returnPressed.connect(lambda: set_target(combo.currentText()))
        a.colormap_combo.currentTextChanged.connect(self._on_colormap_changed)
        a.normalize_combo.currentIndexChanged.connect(self._on_normalize_changed)
        a.gradients_action.toggled.connect(self._on_gradients_toggled)

    def run(self, *, input_grads: bool | None = None) -> Job | None:
        """Start a run now (None when it cannot); ``input_grads``: back to the input regardless."""
        w, s = self.window, self.session
        self._debounce.stop()
        self._run_due = False
        if w.is_closed():
            return None
        if not s.can_run():
            problem = f"Open {'a model' if s.model is None else 'an input'} first, then press Run."
        else:  # one line here rather than torch's words from inside the model's forward
            problem = s.input_problem() if s.input is not None else ""
        if problem:
            w.host.show_warning(problem, source="run")
            return None
        request = s.make_request()
        if input_grads is not None:
            request = dataclasses.replace(request, input_grads=input_grads)
        self.last_request = request
        job = self.worker.submit(lambda stop, progress: run_job(request, stop, progress))
        self.watch(job, kind="run")
        w.refresh_busy("Running…")
        w.run_started.emit()
        return job

    def watch(self, job: Job, *, kind: str = "run", streamed: bool = False) -> None:
        """Show ``job``'s end as a run's (``kind``: run, prepare or frame; ``streamed``: quiet)."""
        if kind != "frame":
            self._job_kind = kind
        job.on(
            started=lambda: self._on_started(streamed),
            progress=self.window.host.show_status,
            finished=self._on_finished,
            failed=lambda error: self._on_failed(error, kind),
            cancelled=self._on_cancelled,
        )

    def schedule_run(self) -> None:
        """Re-run after the debounce delay; while an input is being opened, after it."""
        w = self.window
        if not (self.auto_run and not w.is_closed() and self.session.can_run()):
            return
        if w.files.inputs.request is not None:
            self._run_due = True
            return
        self._debounce.start()

    def run_if_due(self) -> None:
        """Schedule the run that waited for an input being opened, once none is."""
        if self._run_due and self.window.files.inputs.request is None:
            self._run_due = False
            self.schedule_run()

    def forget_due(self) -> None:
        """The input a run waited for was replaced (a session opened, a script's input)."""
        self._run_due = False

    def stop(self) -> None:
        """Stop the pending automatic run and cancel the running capture."""
        self._debounce.stop()
        self.worker.cancel()

    def is_due(self) -> bool:
        """True while an automatic run waits (its delay, or an input being opened)."""
        return self._debounce.isActive() or self._run_due

    def halt(self) -> None:
        """Stop the debounce timer only (closing, cancelling)."""
        self._debounce.stop()

    def _on_debounce_timeout(self) -> None:
        if self.window.files.inputs.request is not None:
            self._run_due = True  # the input being opened will start it
        elif self.auto_run and self.session.can_run():
            self.run()

    def _on_input_list_toggled(self, as_list: bool) -> None:
        try:
            self.session.set_input_as_list(as_list)
        except ValueError as exc:
            action = self.window.commands.input_list_action
            with QSignalBlocker(action):
                action.setChecked(self.session.input_as_list)
            self.window.host.show_error(f"Not fed as a list: {exc}.")

    def streaming(self) -> bool:
        """Whether the latest job started is a stream's frame and the worker is still busy."""
        return self._stream_started and self.worker.is_busy()

    def _on_started(self, streamed: bool) -> None:
        self._stream_started = streamed
        if streamed and self._stream_shown:
            return  # a stream's next frame: the busy state shown still holds
        self.window.refresh_busy("" if streamed else "Running…")  # a stream has its own read-out
        self._stream_shown = streamed

    def _on_finished(self, result: RunResult) -> None:
        w = self.window
        if not (self._stream_shown and self.streaming()):  # kept while its next frame runs
            self._stream_shown = False
            w.refresh_busy()
        try:
            w.display.apply_result(result)
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display the result")
            w.host.show_error(f"Could not display the result: {describe_error(exc)}", source="run")
            w.run_failed.emit(str(exc))
            return
        # A detector's target list names its detections, which change with every result.
        output = result.capture.output if result.capture is not None else None
        found = detections(output) is not None
        if found or self._detection_targets:
            self._detection_targets = found
            self.sync_target_combo(rebuild=True, output=output)
        # After the overview's display steps (skipped if a newer result replaces this one).
        w.display.after_panels(w.run_finished.emit)

    def _on_failed(self, error: BaseException, kind: str) -> None:
        w = self.window
        self._stream_shown = False
        w.refresh_busy()
        log.error("run failed", exc_info=(type(error), error, error.__traceback__))
        # The label names the failing job's kind, not the window's last one.
        what = "Could not update the views" if kind == "prepare" else "Run failed"
        text = f"{what}: {describe_error(error)}. The panels still show the previous result."
        w.host.show_error(text, source="run", details=error_details(error))
        w.host.show_status(what)
        w.run_failed.emit(text)

    def _on_cancelled(self) -> None:
        self._stream_shown = False
        self.window.refresh_busy("Cancelled; the panels show the previous result.")
        self.window.run_cancelled.emit()

    def apply_view_settings(self) -> None:
        """Put the persistent view settings on the toolbar and into the session."""
        s, a = self.window.settings, self.window.commands
        with QSignalBlocker(a.colormap_combo), QSignalBlocker(a.normalize_combo):
            self.set_view_settings(colormap=s.colormap, normalize=s.normalize)
        with QSignalBlocker(a.gradients_action):
            a.gradients_action.setChecked(s.show_gradients)
        self.session.set_view(colormap=a.colormap, normalize=a.normalize_combo.currentData())
        if (current := a.colormap_actions.get(a.colormap)) is not None:
            current.setChecked(True)

    def on_session_view_changed(self, what: str) -> None:
        """The toolbar follows the Session's view settings (a script's ``session.set_view``)."""
        if what in ("colormap", "normalize"):
            self.set_view_settings(**{what: getattr(self.session, what)})

    def set_view_settings(
        self, *, colormap: str | None = None, normalize: str | None = None
    ) -> None:
        """Choose the colour map and the normalisation on the toolbar (None, unknown: unchanged);
        its slots put them into the session and the settings."""
        a = self.window.commands
        if colormap is not None and a.colormap_combo.findText(colormap) >= 0:
            a.colormap_combo.setCurrentText(colormap)  # -> _on_colormap_changed
        index = a.normalize_combo.findData(normalize) if normalize is not None else -1
        if index >= 0:
            a.normalize_combo.setCurrentIndex(index)  # -> _on_normalize_changed

    def _on_colormap_changed(self, name: str) -> None:
        w = self.window
        w.settings.colormap = name
        if name in w.commands.colormap_actions:
            w.commands.colormap_actions[name].setChecked(True)
        self.session.set_view(colormap=name)
        w.display.set_colormap(name)

    def _on_gradients_toggled(self, visible: bool) -> None:
        self.window.settings.show_gradients = visible
        self.window.display.set_gradients_visible(visible)

    def _on_normalize_changed(self, _index: int) -> None:
        w = self.window
        mode = w.commands.normalize_combo.currentData()
        w.settings.normalize = mode
        self.session.set_view(normalize=mode)
        result, request = self.session.result, self.last_request
        if self.worker.is_busy() and self._job_kind == "run":
            self.run()  # a newer capture is on its way: redo it with the new setting
            return
        if result is None or request is None:
            return
        # From the result's views: no forward pass, the result shown (maybe pinned) unchanged.
        pages = dict(self.session.channel_pages)
        sizes, cmap = dict(self.session.page_channels), self.session.colormap
        spec = dataclasses.replace(
            request.spec, normalize=mode, channel_pages=pages, page_channels=sizes, colormap=cmap
        )
        self.last_request = dataclasses.replace(request, spec=spec)
        job = self.worker.submit(
            lambda *_: renormalised(result, mode, pages, page_channels=sizes, colormap=cmap)
        )
        self.watch(job, kind="prepare")
        w.refresh_busy("Updating views…")

    def on_saliency_shown(self, shown: bool) -> None:
        """Runs stop the backward early without a saliency view; showing one re-runs."""
        self.session.set_saliency_wanted(shown)
        result, request = self.session.result, self.last_request
        cap = result.capture if result is not None else None
        stopped_early = cap is not None and cap.input_grads is None
        if shown and stopped_early and request is not None and not request.input_grads:
            if self.auto_run:
                self.window.centre.saliency_panel.set_message("Computing saliency…")
                self.schedule_run()
            else:  # nothing runs by itself: say what makes the map
                self.window.centre.saliency_panel.set_message(
                    "The last run did not differentiate back to the input: press Run to "
                    "compute the saliency (the input gradient)."
                )

    def sync_target_combo(self, rebuild: bool = False, output: object = None) -> None:
        """Show the session's target in the toolbar (``rebuild``: list the model's classes)."""
        combo = self.window.commands.target_combo
        with QSignalBlocker(combo):
            if rebuild:
                combo.clear()
                # Entry k + 1 is class k, or detection k of a detector (core.targets' one list).
                combo.addItems(target_choices(self.session.categories, output))
            if (target := self.session.target) is None:
                combo.setCurrentIndex(0)
            elif 0 <= target < combo.count() - 1:
                combo.setCurrentIndex(target + 1)
            else:
                combo.setEditText(str(target))


class PinActions:
    """Pin, show and unpin results in ``window`` (``pinned_shown`` before a pin is shown)."""

    def __init__(self, window: Any) -> None:
        self.session, self.display = window.session, window.display
        self.banner, self.status_label = window.centre.banner, window.status.status_label
        self.show_warning, self.pinned_shown = window.host.show_warning, window.pinned_shown
        actions = window.commands
        self.pins_menu = actions.pins_menu
        #: ``compare_with(pin)``: offered by the Compare feature (the menu then lists it).
        self.compare_with: Callable[[Pin], object] | None = None
        self._compare_menu = QMenu("Compare the latest run with", self.pins_menu)
        self._compare_menu.setToolTipsVisible(True)
        self.unpin_action, self.unpin_all_action = actions.unpin_action, actions.unpin_all_action
        actions.pin_action.triggered.connect(self.pin_result)
        actions.unpin_action.triggered.connect(self.unpin_shown)
        actions.unpin_all_action.triggered.connect(self.unpin_all)
        self.refresh_pins_menu()

    def pin_result(self) -> Pin | None:
        """Keep the result shown now (Ctrl+P); None, with a message, when refused."""
        if (result := self.session.result) is None:
            self.show_warning("Nothing to pin yet: run the model first.", "pins")
            return None
        inp = self.session.input
        source = Path(inp.source).name if inp is not None and inp.source else "input"
        label = f"{time.strftime('%H:%M:%S')} · {source} · {result.target_text}"
        try:
            pin = self.session.pins.pin(result, label, budget=self.session.memory_budget)
        except PinRefused as exc:
            self.show_warning(f"Not pinned: {exc}.", "pins")
            return None
        self.banner.set_messages("pins", [])
        self.status_label.setText(f"Pinned: {pin.label}")
        return pin

    def show_pinned(self, pin: Pin) -> bool:
        """Put ``pin``'s result back on the panels (live mode pauses); False if it is gone."""
        if pin not in list(self.session.pins):
            return False
        self.pinned_shown.emit()
        self.display.apply_result(pin.result)
        self.status_label.setText(f"Showing pinned: {pin.label}")
        return True

    def unpin_shown(self) -> bool:
        """Unpin the result shown now, if it is pinned."""
        if (pin := self.session.pins.find(self.session.result)) is not None:
            self.session.pins.unpin(pin)
        return pin is not None

    def unpin_all(self) -> None:
        """Let every pinned result go."""
        self.session.pins.clear()

    def compare_with_pin(self, pin: Pin) -> bool:
        """Compare the latest run with ``pin``; False when not offered or not started."""
        return self.compare_with is not None and bool(self.compare_with(pin))

    def on_session_pins_changed(self) -> None:
        """The pins changed: refresh the menu and the memory held."""
        self.refresh_pins_menu()
        self.display.refresh_held_text()

    def refresh_pins_menu(self) -> None:
        """Rebuild "Pinned results": one entry per pin, then Unpin this / Unpin all."""
        menu = self.pins_menu
        # Its actions hold the pins: cleared now, so an unpinned capture is freed at once.
        self._compare_menu.clear()
        menu.clear()
        pins = list(self.session.pins)
        for pin in pins:
            label = f"{pin.label} ({format_bytes(pin.nbytes)})"
            menu.addAction(label, lambda p=pin: self.show_pinned(p))
        if pins and self.compare_with is not None:
            menu.addSeparator()
            sub = self._compare_menu
            menu.addMenu(sub)
            for pin in pins:
                act = sub.addAction(pin.label, lambda p=pin: self.compare_with_pin(p))
                act.setToolTip("Layer by layer, in the Compare tab")
        if pins:
            menu.addSeparator()
        menu.addActions([self.unpin_action, self.unpin_all_action])
        self.unpin_all_action.setEnabled(bool(pins))
        self.unpin_action.setEnabled(self.session.pins.find(self.session.result) is not None)
        menu.setTitle(f"Pinned results ({len(pins)})" if pins else "Pinned results")
