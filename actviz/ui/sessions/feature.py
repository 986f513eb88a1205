"""File > Save session / Open session / Recent sessions, with reports and autosave.

A session opens into the same view without running the model, on the feature's own worker;
its questions are attributes (``ask_restore``, ...) so tests and scripts can answer them."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox, QWidget

from actviz.io.errors import UntrustedFileError
from actviz.ui.background_loads import describe_error, short_source
from actviz.ui.file_dialogs import open_file
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.sessions import saving
from actviz.ui.sessions.saving import BANNER_SOURCE, ReportExport
from actviz.ui.worker import CAPTURE_NICE, Job, Worker
from actviz.workspace import session_file
from actviz.workspace.session_file import ModelCheck, PinState, SessionState, verify_model_source

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.prepared import RunResult
    from actviz.workspace.session_state import RunRequest, Session

log = logging.getLogger(__name__)


def _yes(parent: QWidget, text: str, title: str) -> bool:
    return QMessageBox.question(parent, title, text) == QMessageBox.StandardButton.Yes


def _choose(parent: QWidget, icon: Any, title: str, text: str, *buttons: tuple[str, Any]) -> int:
    """``text`` in a box with ``buttons`` (label, role; the first the default) and Cancel; the
    index of the button clicked, -1 for Cancel."""
    box = QMessageBox(icon, title, text, QMessageBox.StandardButton.Cancel, parent)
    made = [box.addButton(label, role) for label, role in buttons]
    box.setDefaultButton(made[0])
    box.exec()
    return made.index(box.clickedButton()) if box.clickedButton() in made else -1


def ask_restore(parent: QWidget, text: str) -> bool:
    """Default question at start: restore the session kept on quit?"""
    return _yes(parent, text, "Restore the last session")


def confirm_changed(parent: QWidget, text: str) -> bool:
    """Default question: open a session whose checkpoint changed anyway?"""
    return _yes(parent, f"{text}\n\nOpen the session with this checkpoint anyway?", "Checkpoint")


def locate_checkpoint(parent: QWidget, text: str) -> str | None:
    """Default: say the checkpoint is gone and let the user pick where it is now."""
    locate = ("Locate…", QMessageBox.ButtonRole.AcceptRole)
    text = f"{text}.\n\nLocate it to open the session."
    if _choose(parent, QMessageBox.Icon.Warning, "Checkpoint not found", text, locate) != 0:
        return None
    return open_file(parent, "Locate the checkpoint", "") or None


def ask_pin_captures(parent: QWidget, text: str) -> bool | None:
    """Default question before saving pins that hold captures: keep them, leave them out."""
    role = QMessageBox.ButtonRole
    keep, drop = ("Keep the captures", role.AcceptRole), ("Leave them out", role.DestructiveRole)
    answer = _choose(parent, QMessageBox.Icon.Question, "Save session", text, keep, drop)
    return None if answer < 0 else answer == 0


@dataclass
class _Opening:
    """A session being opened, step by step (read, checked, model opened, prepared)."""

    path: Path
    state: SessionState | None = None
    model_path: str | None = None
    trust: bool = False
    notes: list[str] = field(default_factory=list)
    done: bool | None = None  # True: opened; False: not
    layout: bytes | None = None  # the window layout still to put back


class SessionsFeature(FeatureBase, QObject):
    """Session files and reports of one window: ``session_saved(path)``,
    ``session_opened(path)``, ``session_failed(message)``, ``report_written(path)``."""

    session_saved = Signal(str)
    session_opened = Signal(str)
    session_failed = Signal(str)

    name = "sessions"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        #: The file Save session (Ctrl+S) writes; None until saved or opened once.
        self.path: Path | None = None
        #: The questions, ``(parent, text) -> answer`` (tests and scripts answer them).
        self.ask_restore, self.confirm_changed = ask_restore, confirm_changed
        self.ask_pin_captures, self.locate_checkpoint = ask_pin_captures, locate_checkpoint
        #: Reads, writes, hashes, model opening and preparation (never a capture).
        self.worker = Worker(self, nice=CAPTURE_NICE)
        self._jobs: dict[Job, _Opening | None] = {}  # a save's: None
        self._opening: _Opening | None = None
        self.kept = saving.Autosave(host, paused=lambda: self._opening is not None)
        self.reports = ReportExport(host, lambda: self.path)
        self.saver = saving.SessionSaver(self)
        #: ``report_written(str)``: File > Export report wrote that file.
        self.report_written = self.reports.report_written
        keys, before = QKeySequence.StandardKey, "Export everything…"
        add = functools.partial(host.add_action, "File", before=before)
        self.open_action = add("Open session…", self.open_session_dialog)
        self.recent_menu = QMenu("Recent sessions", host.menu("File"))
        host.add_menu_action("File", self.recent_menu.menuAction(), before=before, shortcut=False)
        self.save_action = add("Save session", self.save_session, keys=keys.Save)
        self.save_as_action = add("Save session as…", self.save_session_as, keys=keys.SaveAs)
        self.report_action = add("Export report…", self.reports.dialog)
        host.menu("File").insertSeparator(self.report_action)
        self.refresh_recent_menu()
        host.offer_session_store(self)

    def refresh_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        for entry in self.host.settings.recent_sessions():
            menu.addAction(entry, lambda p=entry: self.open_session(p))
        menu.setEnabled(not menu.isEmpty())

    def session_state(self) -> SessionState:
        """What the window shows, as a :class:`SessionState` (``actviz.session.save``)."""
        return saving.gather_state(self.host)

    def is_busy(self) -> bool:
        return self.reports.is_busy() or bool(self._jobs) or self._opening is not None

    def cancel(self) -> bool:
        if not self._jobs and self._opening is None:
            return False
        self.worker.cancel()
        self._jobs.clear()
        if self._opening is not None:
            self._fail_open(self._opening, "Opening the session was cancelled; nothing changed.")
        return True

    def submit(
        self,
        job: Callable[..., Any],
        finished: Callable[[Any], Any],
        failed: Callable[[BaseException], Any],
        opening: _Opening | None = None,
    ) -> Job:
        """Run ``job`` on the worker, then ``finished(value)`` or ``failed(error)``: not once
        cancelled, nor for a step of an ``opening`` no longer current."""
        handle = self.worker.submit(job, supersede=False)
        self._jobs[handle] = opening

        def ended() -> bool:
            known = handle in self._jobs
            self._jobs.pop(handle, None)
            self.host.refresh_busy()
            return known and (opening is None or opening is self._opening)

        handle.on(
            finished=lambda value: ended() and finished(value),
            failed=lambda error: ended() and failed(error),
            cancelled=ended,
            progress=self.host.show_status,
        )
        self.host.refresh_busy()
        return handle

    def _step(
        self,
        opening: _Opening,
        job: Callable[..., Any],
        then: Callable[[Any], None],
        failed: Callable[[_Opening, BaseException], None] | None = None,
    ) -> None:
        """Run one step of ``opening`` on the worker, ``then(value)`` while still current."""
        self.submit(
            job,
            lambda value: self._step_done(opening, then, value),
            lambda error: (failed or self._open_failed)(opening, error),
            opening,
        )

    def _step_done(self, opening: _Opening, then: Callable[[Any], None], value: Any) -> None:
        try:
            then(value)
        except Exception as exc:  # noqa: BLE001 - a bug must not take the window down
            log.exception("opening the session failed")
            self._open_failed(opening, exc)

    def _later(self, opening: _Opening, step: Callable[[], object]) -> None:
        """Run ``step`` of ``opening``, if still current, on a display pass after this turn's."""

        def run() -> None:
            if self._opening is opening:
                self._step_done(opening, lambda _v: step(), None)

        QTimer.singleShot(0, self, lambda: self.host.defer_display(run, stale_ok=True))

    def _open_failed(self, opening: _Opening, error: BaseException) -> None:
        said = self.saver.failure_text(error, "opening the session")
        self._fail_open(opening, f"Could not open the session: {said}", level="error")

    def save_session(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save to ``path``, else the file last used, else ask; True if started (``wait``: done)."""
        return False if self._closed else self.saver.save(path, wait=wait)

    def save_session_as(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save the session to a file chosen in a dialog (or ``path``)."""
        return False if self._closed else self.saver.save_as(path, wait=wait)

    def saved(self, path: Path) -> None:
        """``path`` was written or opened: Ctrl+S writes it again; it heads Recent sessions."""
        self.path = path
        self.host.settings.add_recent_session(str(path))
        self.refresh_recent_menu()

    def open_session_dialog(self) -> bool:
        """File > Open session…: pick a session file and open it."""
        start = (self.host.settings.recent_sessions() or [None])[0]
        filters = ";;".join([saving.SESSION_FILTER, "All files (*)"])
        path = open_file(self.host.dialog_parent(), "Open session", filters, start)
        return self.open_session(path) if path else False

    def open_session(self, path: str | Path, *, wait: bool = False) -> bool:
        """Open session file ``path`` in the background; True if started (``wait``: shown)."""
        if self._closed:
            return False
        if self._opening is not None:
            self._fail_open(self._opening, "")
        opening = self._opening = _Opening(Path(path))
        self.host.show_status(f"Opening the session {short_source(str(path))}…")

        def read(_stop: Any, _progress: Any) -> tuple[SessionState, ModelCheck]:
            state = session_file.load_state(opening.path)
            return state, verify_model_source(state)

        self._step(opening, read, lambda value: self._read(opening, *value))
        if wait:
            self.host.wait_until(lambda: opening.done is not None)
        return bool(opening.done) if wait else True

    def _read(self, opening: _Opening, state: SessionState, check: ModelCheck) -> None:
        opening.state = state
        opening.notes.extend(state.warnings)
        parent = self.host.dialog_parent()
        if check.status == "missing":
            if not (where := self.locate_checkpoint(parent, check.message)):
                self._fail_open(opening, f"Not opened: {check.message}", level="error")
                return
            opening.model_path = str(where)

            def verify(_stop: Any, _progress: Any) -> tuple[SessionState, ModelCheck]:
                return state, verify_model_source(state, where)

            self._step(opening, verify, lambda value: self._read(opening, *value))
            return
        if check.status == "changed":
            if not self.confirm_changed(parent, check.message):
                self._fail_open(opening, f"Not opened: {check.message}", level="warning")
                return
            opening.notes.append(check.message)
        self._open_model(opening)

    def _open_model(self, opening: _Opening) -> None:
        state = opening.state
        assert state is not None
        if state.model is None:
            if self.session.model is None:
                why = "(it was given in memory): show the model first, then open the session"
                text = f"Not opened: {opening.path.name} names no model to open {why}"
                self._fail_open(opening, text, level="error")
                return
            opening.notes.append("the session's model was given in memory: the model shown is used")
            self._adopt(opening, None)
            return
        where, trust = opening.model_path, opening.trust
        self.host.show_status(f"Opening {short_source(state.model.source)}…")

        def job(_stop: Any, _progress: Any) -> Any:
            return session_file.open_model_source(state, where, trust=trust)

        self._step(opening, job, lambda loaded: self._adopt(opening, loaded), self._model_failed)

    def _model_failed(self, opening: _Opening, error: BaseException) -> None:
        if isinstance(error, UntrustedFileError) and not opening.trust:
            if self.host.confirm_untrusted(self.host.dialog_parent(), error.path, str(error)):
                opening.trust = True
                self._open_model(opening)
                return
            self._fail_open(opening, f"Not opened: {error.path} was not trusted.", "warning")
            return
        assert opening.state is not None and opening.state.model is not None
        source = opening.state.model.source
        text = f"Could not open the session's model {source!r}: {describe_error(error)}"
        self._fail_open(opening, text, level="error")

    def _adopt(self, opening: _Opening, loaded: Any) -> None:
        """Put the session on the window (GUI thread), then prepare its saved runs."""
        state = opening.state
        assert state is not None
        host, s = self.host, self.session
        model = loaded.model if loaded is not None else s.model
        names = {name for name, _ in model.named_modules()}  # a moved checkpoint may differ
        ticks = [t for t in state.ticked if t in names]
        if missing := [t for t in state.ticked if t not in names]:
            opening.notes.append(f"layers not in the model, not ticked: {', '.join(missing)}")
        if loaded is not None:
            src = state.model
            assert src is not None
            args = {"arch": src.arch, "weights": src.weights, "trust": opening.trust}
            host.adopt_model(loaded, ticks=ticks, gradcam_layer=state.gradcam_layer, open_args=args)
        else:
            host.stop_current_run()
            s.pins.clear()
            s.edits.clear()
            s.replace_ticked(ticks)
        opening.notes.extend(apply_view(host, state))
        if state.layout:  # on a turn of its own: its resizes and the new tree's are two blocks
            opening.layout = state.layout
            self._later(opening, lambda: self._put_layout(opening))
        host.stop_current_run()  # The saved run is shown as it was: no automatic run replaces it.
        if state.capture is None and not any(p.capture is not None for p in state.pins):
            self._later(opening, lambda: self._opened(opening, None, []))
            return
        request = s.make_request()

        def job(_stop: Any, progress: Callable[[str], None]) -> Any:
            progress("Preparing the saved run…")
            return prepare_saved(state, request)

        self._step(opening, job, lambda value: self._opened(opening, *value, request))

    def _put_layout(self, opening: _Opening) -> None:
        if (layout := opening.layout) is not None:
            opening.layout = None
            self.host.restore_layout_state(layout)

    def _opened(self, opening: _Opening, result: Any, pins: list, request: Any = None) -> None:
        if opening.layout is not None:  # the saved run came before the layout's turn: the
            self._put_layout(opening)  # layout now, the run on a turn of its own
            self._later(opening, lambda: self._opened(opening, result, pins, request))
            return
        state = opening.state
        assert state is not None
        notes = opening.notes + restore_pins(self.session, pins, self.session.memory_budget)
        lost = [p.label for p in state.pins if p.capture is None]
        notes += [f"pin {label!r} was saved without its capture: not restored" for label in lost]
        if result is not None:
            self.host.show_result(result, request)
        elif self.session.can_run():
            self.host.run()  # no saved run (only pins): run it as it was set up
        # The rest on a turn of its own, after the result's: each is a block on its own.
        self._later(opening, lambda: self._restore_parts(opening, result, notes))

    def _restore_parts(self, opening: _Opening, result: Any, notes: list[str]) -> None:
        state, host = opening.state, self.host
        assert state is not None
        # After the pins: a comparison set-up names its run B by a pin's label.
        parts = {**state.settings, "comparison": state.comparison, "scan_key": state.scan_key}
        host.restore_session_parts(parts)
        view = state.channel_view
        if view and result is not None and view.get("layer") in result.layers:
            layer, channel = str(view["layer"]), int(view.get("channel", 0))
            host.defer_display(lambda: host.open_channel(layer, channel))
        self._opening, opening.done = None, True
        kept = opening.path == self.kept.path
        if not kept:  # Ctrl+S never writes over the session kept on quit
            self.saved(opening.path)
        host.clear_messages(BANNER_SOURCE)
        if notes:
            host.show_warning("Session opened; " + "; ".join(notes), BANNER_SOURCE)
        done = "Restored the last session" if kept else f"Opened the session {opening.path}"
        host.refresh_busy(done)
        self.session_opened.emit(str(opening.path))

    def _fail_open(self, opening: _Opening, text: str, level: str | None = None) -> None:
        if self._opening is opening:
            self._opening = None
        opening.done = False
        if level is not None:  # "error" or "warning"
            getattr(self.host, f"show_{level}")(text, BANNER_SOURCE)
        # The banner holds the whole sentence; the one-line status bar would cut it.
        status = f"The session {opening.path.name} was not opened: see the message above"
        self.host.refresh_busy(text if level is None else status)
        self.session_failed.emit(text)

    def export_report(self, path: str | Path, *, wait: bool = False) -> bool:
        """Write the result shown as one HTML report (:meth:`ReportExport.export`)."""
        return self.reports.export(path, wait=wait)

    @property
    def autosave(self) -> bool:
        """Whether the session is kept in :meth:`autosave_file` (the app turns it on)."""
        return self.kept.on

    @autosave.setter
    def autosave(self, on: bool) -> None:
        self.kept.switch(on)

    def can_offer_restore(self) -> bool:
        """Whether a session was kept on quit and the setting lets a start offer it."""
        return self.kept.can_offer()

    def offer_restore(self) -> bool:
        """At start, offer the session kept on quit; True when it is being opened."""
        return self.kept.offer(self.ask_restore, self.open_session)

    def stop(self) -> None:
        self.reports.close()
        self.kept.close()
        self.worker.shutdown(timeout_ms=10_000)
        self._jobs.clear()


def prepare_saved(
    state: SessionState, request: RunRequest
) -> tuple[RunResult | None, list[tuple[PinState, RunResult]]]:
    """The saved and pinned runs' arrays prepared as ``request`` shows them (worker thread)."""
    from actviz.display.prepare import prepare

    spec = request.display_spec()
    result = None if state.capture is None else prepare(state.capture, spec, model=request.model)
    kept = [pin for pin in state.pins if pin.capture is not None]
    return result, [(pin, prepare(pin.capture, spec, model=request.model)) for pin in kept]


def apply_view(host: WindowHost, state: SessionState) -> list[str]:
    """Put ``state``'s input, target, views, pages and edits on the window; lines not restored."""
    s = host.session
    notes: list[str] = []
    if (inp := state.input) is not None:  # its fields are set_input's arguments
        s.set_input(**{f.name: getattr(inp, f.name) for f in fields(inp)})
    try:
        s.set_input_as_list(bool(state.input_as_list))
    except ValueError as exc:  # the input cannot be fed that way to this model
        notes.append(f"input layout not restored: {exc}")
    host.set_view_settings(colormap=state.colormap, normalize=state.normalize)
    if state.gradcam_layer is None or (s.tree is not None and state.gradcam_layer in s.tree):
        s.set_view(gradcam_layer=state.gradcam_layer)
    host.set_target_text("auto" if state.target is None else str(state.target))
    tree = s.tree
    for saved, put in ((state.channel_pages, s.set_channel_page),
                       (state.page_channels, s.set_page_channels)):  # fmt: skip
        for layer, n in saved.items():
            if tree is None or layer in tree:
                put(layer, int(n))
    labels = {id(p.capture): p.label for p in state.pins if p.capture is not None}
    with s.edits.batch():  # the dock and the run follow once, not once per edit
        for layer, edits in state.edits.items():
            if tree is not None and layer not in tree:
                notes.append(f"edit on {layer} not restored: the model has no such layer")
                continue
            for edit in edits:
                source = id(getattr(edit, "source", None))  # labels holds no id(None)
                s.edits.add(layer, edit, f"pin {labels[source]}" if source in labels else "")
    return notes


def restore_pins(
    session: Session, pins: Sequence[tuple[PinState, RunResult]], budget: int | None = None
) -> list[str]:
    """Pin the prepared pinned runs again, with their saved labels and times."""
    notes = []
    for state, result in pins:
        try:
            pin = session.pins.pin(result, state.label, budget=budget)
        except ValueError as exc:  # PinRefused: over the memory budget
            notes.append(f"pin {state.label!r} not restored: {exc}")
            continue
        pin.pinned_at = state.pinned_at
    return notes
