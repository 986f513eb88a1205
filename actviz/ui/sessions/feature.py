"""File > Save session / Open session / Recent sessions / Export report, and the autosave.

:class:`SessionsFeature` saves what the window shows as a session file (``.actviz``,
:mod:`actviz.workspace.session_file`) and opens one again into the same view: the model (its
checkpoint checked against the saved SHA-256, the trust question asked as the window asks
it), the embedded input, ticks, target, view settings, pages, edits, pins with their
captures, the features' parts (comparison set-up, scan), the layout, and the saved run's
arrays shown as they were, without running the model. Reading, writing, hashing, opening the
model and preparing the saved captures run on the feature's own worker; the window stays
usable and the status bar says what happens. A file that cannot be opened (damaged, newer,
a pickle inside) gives one line in the banner and changes nothing.

On quit (when :attr:`SessionsFeature.autosave` is on: the app turns it on) the session is
written to :func:`autosave_path`; the next start offers to restore it
(:meth:`SessionsFeature.offer_restore`) unless the ``sessions/restore_on_start`` setting is
off. The questions are attributes (``ask_restore``, ``ask_pin_captures``,
``confirm_changed``, ``locate_checkpoint``), so tests and scripts answer them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, QStandardPaths, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QWidget

from actviz.ui.background_loads import describe_error, short_source
from actviz.ui.file_dialogs import start_folder, start_path
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.sessions.report_job import ReportJob
from actviz.ui.sessions.state import (
    ModelOpened,
    apply_view,
    gather_state,
    model_part,
    prepare_saved,
    restorable_ticks,
    restore_pins,
)
from actviz.ui.worker import Job, Worker
from actviz.workspace.session_file import (
    SUFFIX,
    ModelCheck,
    SessionFileError,
    SessionState,
    describe_session_file,
    load_state,
    open_model_source,
    pin_capture_bytes,
    save_state,
    verify_model_source,
)

log = logging.getLogger(__name__)

__all__ = ["SessionsFeature", "autosave_path"]

#: The banner's source for session messages.
BANNER_SOURCE = "session"
#: The banner's source for File > Export report's messages (cleared by the next report written,
#: leaving a session's own messages as they are).
REPORT_SOURCE = "report"
#: Settings keys: the recent session files; whether a start offers the autosaved session.
RECENT_KEY = "recent/sessions"
RESTORE_KEY = "sessions/restore_on_start"
MAX_RECENT = 10
AUTOSAVE_NAME = "autosave" + SUFFIX
#: Pinned captures bigger than this together are left out of the session kept on quit
#: (quitting writes it on the GUI thread; their labels are kept).
AUTOSAVE_PIN_LIMIT = 256 * 2**20
#: The session is kept this long after its last change (a burst of changes writes once).
AUTOSAVE_DELAY_MS = 3000
SESSION_FILTER = f"actviz sessions (*{SUFFIX})"
REPORT_FILTER = "HTML reports (*.html)"

#: ``(parent, text) -> bool``: questions answered yes or no.
Ask = Callable[[QWidget, str], bool]
#: ``(parent, text) -> bool | None``: keep the pins' captures (True), leave them out (False)
#: or do not save (None).
AskCaptures = Callable[[QWidget, str], "bool | None"]
#: ``(parent, text) -> str | None``: where the checkpoint is now (None: not located).
Locate = Callable[[QWidget, str], "str | None"]


def autosave_path(store: QSettings) -> Path:
    """Where the session is kept on quit: beside an INI settings file (tests point theirs at
    a temporary folder), else in the user's application data folder."""
    if store.format() == QSettings.Format.IniFormat and store.fileName():
        return Path(store.fileName()).parent / AUTOSAVE_NAME
    # The generic folder plus our own name: the application's name is not always set yet.
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return Path(base or Path.home()) / "actviz" / AUTOSAVE_NAME


def _yes(parent: QWidget, text: str, title: str) -> bool:
    answer = QMessageBox.question(parent, title, text)
    return answer == QMessageBox.StandardButton.Yes


def ask_restore(parent: QWidget, text: str) -> bool:
    """Default question at start: restore the session kept on quit?"""
    return _yes(parent, text, "Restore the last session")


def confirm_changed(parent: QWidget, text: str) -> bool:
    """Default question: open a session whose checkpoint changed anyway?"""
    return _yes(parent, f"{text}\n\nOpen the session with this checkpoint anyway?", "Checkpoint")


def locate_checkpoint(parent: QWidget, text: str) -> str | None:
    """Default: say the checkpoint is gone and let the user pick where it is now."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Checkpoint not found")
    box.setText(f"{text}.\n\nLocate it to open the session.")
    locate = box.addButton("Locate…", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    if box.clickedButton() is not locate:
        return None
    path, _ = QFileDialog.getOpenFileName(parent, "Locate the checkpoint")
    return path or None


def ask_pin_captures(parent: QWidget, text: str) -> bool | None:
    """Default question before saving pins that hold captures: keep them, leave them out."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Save session")
    box.setText(text)
    keep = box.addButton("Keep the captures", QMessageBox.ButtonRole.AcceptRole)
    drop = box.addButton("Leave them out", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(keep)
    box.exec()
    clicked = box.clickedButton()
    return True if clicked is keep else False if clicked is drop else None


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.0f} KiB"


@dataclass
class _Saving:
    """A session being saved: its file and, once the job ended, whether it was written."""

    path: Path
    ok: bool | None = None


@dataclass
class _Opening:
    """A session being opened, step by step (read, checked, model opened, prepared)."""

    path: Path
    state: SessionState | None = None
    model_path: str | None = None
    trust: bool = False
    notes: list[str] = field(default_factory=list)
    step: str = "read"
    done: bool | None = None  # True: opened; False: not


class SessionsFeature(FeatureBase, QObject):
    """Session files and reports of one window (see the module docstring).

    Signals
    -------
    session_saved(str)
        A session file was written (its path).
    session_opened(str)
        A session file was opened and its view is shown.
    session_failed(str)
        Saving or opening failed, or was declined (the message).
    report_written(str)
        File > Export report wrote that file.
    """

    session_saved = Signal(str)
    session_opened = Signal(str)
    session_failed = Signal(str)
    report_written = Signal(str)
    #: A report's job ended (on the worker's thread): see :meth:`_resume_reports`.
    _report_ended = Signal()

    name = "sessions"

    def __init__(self, host: WindowHost) -> None:
        QObject.__init__(self, host.dialog_parent())
        self.host = host
        self.session = host.session
        self._store: QSettings = host.settings.store
        #: Keep the session in :func:`autosave_path`: a few seconds after each change (off
        #: the GUI thread) and when the window closes, so a crash loses only the last job.
        self._autosave = False
        self._autosave_timer = QTimer(self)
        self._autosave_timer.setSingleShot(True)
        self._autosave_timer.setInterval(AUTOSAVE_DELAY_MS)
        self._autosave_timer.timeout.connect(self._autosave_now)
        self._autosave_thread: threading.Thread | None = None
        self.autosaves = 0  # background autosaves written (tests read it)
        #: The file Save session (Ctrl+S) writes; None until saved or opened once.
        self.path: Path | None = None
        self.ask_restore: Ask = ask_restore
        self.ask_pin_captures: AskCaptures = ask_pin_captures
        self.confirm_changed: Ask = confirm_changed
        self.locate_checkpoint: Locate = locate_checkpoint
        #: Reads, writes, hashes, model opening and preparation (no capture: the window's
        #: worker keeps its model's hooks to itself).
        self.worker = Worker(self)
        self._jobs: dict[Job, tuple[str, Any]] = {}
        self._opening: _Opening | None = None
        self._closed = False
        #: Reports are written on the window's capture worker (one model, one worker: scan
        #: sheets measure receptive fields on the model, a transformer's attention is
        #: recorded on it). A run submitted after a report supersedes it, and the worker
        #: then reports nothing more of it: see :meth:`_resume_reports`.
        self._reports: dict[ReportJob, None] = {}  # in order
        self._report_ended.connect(self._resume_reports)
        self._build_menu()

    # ========================================================================== menus
    def _action(self, text: str, slot: Callable[[], Any], shortcut: Any = None) -> QAction:
        act = QAction(text, self.host.dialog_parent())
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.triggered.connect(lambda _=False: slot())
        return act

    def _build_menu(self) -> None:
        before = "Export everything…"
        self.open_action = self._action("Open session…", self.open_session_dialog)
        self.recent_menu = QMenu("Recent sessions", self.host.menu("File"))
        self.save_action = self._action(
            "Save session", self.save_session, QKeySequence.StandardKey.Save
        )
        self.save_as_action = self._action(
            "Save session as…", self.save_session_as, QKeySequence.StandardKey.SaveAs
        )
        self.report_action = self._action("Export report…", self.export_report_dialog)
        sep = QAction(self.host.dialog_parent())
        sep.setSeparator(True)
        for act in (self.open_action, self.recent_menu.menuAction(), self.save_action,
                    self.save_as_action, sep, self.report_action):  # fmt: skip
            shortcut = act in (self.save_action, self.save_as_action)
            self.host.add_menu_action("File", act, before=before, shortcut=shortcut)
        self.refresh_recent_menu()

    def recent_sessions(self) -> list[str]:
        """The session files opened or saved lately, most recent first."""
        value = self._store.value(RECENT_KEY, [])
        if isinstance(value, str):  # QSettings makes a one-element list a string (INI)
            value = [value] if value else []
        return [str(v) for v in value or [] if v]

    def _remember(self, path: Path) -> None:
        items = [str(path)] + [p for p in self.recent_sessions() if p != str(path)]
        self._store.setValue(RECENT_KEY, items[:MAX_RECENT])
        self.refresh_recent_menu()

    def refresh_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        for entry in self.recent_sessions():
            menu.addAction(entry, lambda p=entry: self.open_session(p))
        menu.setEnabled(not menu.isEmpty())

    @property
    def restore_on_start(self) -> bool:
        """Whether a start offers the session kept on quit (the setting, default on)."""
        value = self._store.value(RESTORE_KEY, True)
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)

    @restore_on_start.setter
    def restore_on_start(self, on: bool) -> None:
        self._store.setValue(RESTORE_KEY, bool(on))

    # ========================================================================== state
    def session_state(self) -> SessionState:
        """What the window shows, as a :class:`SessionState` (``actviz.session.save``)."""
        return gather_state(self.host)

    def is_busy(self) -> bool:
        self._resume_reports()
        return bool(self._jobs) or bool(self._reports) or self._opening is not None

    def cancel(self) -> bool:
        if not self._jobs and self._opening is None:
            return False
        self.worker.cancel()
        self._jobs.clear()
        if self._opening is not None:
            self._fail_open(self._opening, "Opening the session was cancelled; nothing changed.")
        return True

    def _submit(self, kind: str, job: Callable[..., Any], data: Any = None) -> Job:
        handle = self.worker.submit(job, supersede=False)
        handle.on(
            finished=lambda value: self._on_job_finished(handle, value),
            failed=lambda error: self._on_job_errored(handle, error),
            cancelled=lambda: self._on_job_cancelled(handle),
            progress=self.host.show_status,
        )
        self._jobs[handle] = (kind, data)
        self.host.refresh_busy()
        return handle

    def _wait(self, done: Callable[[], bool]) -> None:
        wait_until = getattr(self.host, "wait_until", None)
        if wait_until is not None:
            wait_until(done)

    # ========================================================================== saving
    def save_session(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save the session (Ctrl+S): to ``path``, else to the file last saved or opened,
        else ask where (Save session as). True when saving started (``wait``: when the file
        was written; False when it could not be, the banner saying why)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            return self.save_session_as(wait=wait)
        return self._save(target, wait=wait)

    def save_session_as(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save the session to a file chosen in a dialog (or ``path``)."""
        if path is None:
            start = str(self.path) if self.path else (self.recent_sessions() or [""])[0]
            chosen, _ = QFileDialog.getSaveFileName(
                self.host.dialog_parent(),
                "Save session",
                str(start) if start else start_path("session" + SUFFIX),
                SESSION_FILTER,
            )
            if not chosen:
                return False
            path = chosen if chosen.endswith(SUFFIX) else chosen + SUFFIX
        return self._save(Path(path), wait=wait)

    def _save(self, path: Path, *, wait: bool, pin_captures: bool | None = None) -> bool:
        if self._closed:
            return False
        try:
            return self._start_save(path, wait=wait, pin_captures=pin_captures)
        except Exception as exc:  # noqa: BLE001 - a failed save is said, never raised into Qt
            log.warning("saving the session to %s failed", path, exc_info=True)
            self._on_step_error("save", _Saving(path), exc)
            return False

    def _start_save(self, path: Path, *, wait: bool, pin_captures: bool | None) -> bool:
        state = gather_state(self.host, with_model=False)
        if pin_captures is None:
            pin_captures = True
            if any(p.capture is not None for p in state.pins):
                extra = pin_capture_bytes(state)
                answer = self.ask_pin_captures(
                    self.host.dialog_parent(),
                    f"The pinned results hold their captures: {_mib(extra)} more in the "
                    "session file. Keep them (the pins can be shown and compared again) or "
                    "leave them out (only their labels are kept)?",
                )
                if answer is None:
                    return False
                pin_captures = bool(answer)
        opened = ModelOpened.of(self.session)
        self.host.show_status(f"Saving the session to {path.name}…")

        def job(_stop: Any, progress: Callable[[str], None]) -> tuple[Path, list[str]]:
            full = model_part(state, opened)
            return path, save_state(full, path, pin_captures=pin_captures)

        saving = _Saving(path)
        handle = self._submit("save", job, saving)
        if wait:
            self._wait(lambda: handle not in self._jobs)
            return bool(saving.ok)
        return True

    def _saved(self, path: Path, warnings: list[str]) -> None:
        self.path = path
        self._remember(path)
        size = path.stat().st_size if path.exists() else 0
        self.host.clear_messages(BANNER_SOURCE)
        if warnings:
            self.host.show_warning("Saved without: " + "; ".join(warnings), BANNER_SOURCE)
        self.host.refresh_busy(f"Saved the session to {path} ({_mib(size)})")
        self.session_saved.emit(str(path))

    # ========================================================================== opening
    def open_session_dialog(self) -> bool:
        """File > Open session…: pick a session file and open it."""
        start = self.recent_sessions()[:1]
        path, _ = QFileDialog.getOpenFileName(
            self.host.dialog_parent(),
            "Open session",
            start_folder(start[0] if start else None),
            ";;".join([SESSION_FILTER, "All files (*)"]),
        )
        return self.open_session(path) if path else False

    def open_session(self, path: str | Path, *, wait: bool = False) -> bool:
        """Open the session file ``path`` into this window, off the GUI thread.

        Without ``wait``: True when opening started. With it: True once the session's view
        is shown; False when the file could not be opened (the banner says why in one line
        and the window is as it was), or a question was declined.
        """
        if self._closed:
            return False
        if self._opening is not None:
            self._fail_open(self._opening, "")
        opening = _Opening(Path(path))
        self._opening = opening
        self.host.show_status(f"Opening the session {short_source(str(path))}…")

        def read(_stop: Any, _progress: Any) -> tuple[SessionState, ModelCheck]:
            state = load_state(opening.path)
            return state, verify_model_source(state)

        self._submit("read", read, opening)
        if wait:
            self._wait(lambda: opening.done is not None)
        return bool(opening.done) if wait else True

    def _read(self, opening: _Opening, state: SessionState, check: ModelCheck) -> None:
        opening.state = state
        opening.notes.extend(state.warnings)
        parent = self.host.dialog_parent()
        if check.status == "missing":
            where = self.locate_checkpoint(parent, check.message)
            if not where:
                self._fail_open(opening, f"Not opened: {check.message}", level="error")
                return
            opening.model_path = str(where)

            def verify(_stop: Any, _progress: Any) -> tuple[SessionState, ModelCheck]:
                return state, verify_model_source(state, where)

            self._submit("read", verify, opening)
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
                self._fail_open(
                    opening,
                    f"Not opened: {opening.path.name} names no model to open (it was given "
                    "in memory): show the model first, then open the session",
                    level="error",
                )
                return
            opening.notes.append("the session's model was given in memory: the model shown is used")
            self._adopt(opening, None)
            return
        where, trust = opening.model_path, opening.trust
        self.host.show_status(f"Opening {short_source(state.model.source)}…")

        def job(_stop: Any, _progress: Any) -> Any:
            return open_model_source(state, where, trust=trust)

        self._submit("model", job, opening)

    def _model_failed(self, opening: _Opening, error: BaseException) -> None:
        from actviz.io.errors import UntrustedFileError

        if isinstance(error, UntrustedFileError) and not opening.trust:
            if self.host.confirm_untrusted(self.host.dialog_parent(), error.path, str(error)):
                opening.trust = True
                self._open_model(opening)
                return
            self._fail_open(opening, f"Not opened: {error.path} was not trusted.", "warning")
            return
        assert opening.state is not None and opening.state.model is not None
        self._fail_open(
            opening,
            f"Could not open the session's model {opening.state.model.source!r}: "
            f"{describe_error(error)}",
            level="error",
        )

    def _adopt(self, opening: _Opening, loaded: Any) -> None:
        """Put the session on the window (GUI thread), then prepare its saved runs."""
        state = opening.state
        assert state is not None
        host, s = self.host, self.session
        model = loaded.model if loaded is not None else s.model
        ticks = restorable_ticks(model, state.ticked)
        if len(ticks) < len(state.ticked):
            missing = [t for t in state.ticked if t not in ticks]
            opening.notes.append(f"layers not in the model, not ticked: {', '.join(missing)}")
        if loaded is not None:
            src = state.model
            assert src is not None
            host.adopt_model(
                loaded,
                ticks=ticks,
                gradcam_layer=state.gradcam_layer,
                open_args={"arch": src.arch, "weights": src.weights, "trust": opening.trust},
            )
        else:
            host.stop_current_run()
            s.pins.clear()
            s.edits.clear()
            s.replace_ticked(ticks)
        opening.notes.extend(apply_view(host, state))
        if state.layout:
            host.restore_layout_state(state.layout)
        # The saved run is shown as it was: no automatic run replaces it.
        host.stop_current_run()
        if state.capture is None and not any(p.capture is not None for p in state.pins):
            self._opened(opening, None, [])
            return
        request = s.make_request()
        opening.step = "prepare"

        def job(_stop: Any, progress: Callable[[str], None]) -> Any:
            progress("Preparing the saved run…")
            return prepare_saved(state, request)

        self._submit("prepare", job, (opening, request))

    def _opened(self, opening: _Opening, result: Any, pins: list, request: Any = None) -> None:
        state = opening.state
        assert state is not None
        host = self.host
        notes = list(opening.notes)
        notes += restore_pins(self.session, pins, self.session.memory_budget)
        notes += [
            f"pin {p.label!r} was saved without its capture: not restored"
            for p in state.pins
            if p.capture is None
        ]
        if result is not None:
            host.show_result(result, request)
        elif self.session.can_run():
            host.run()  # no saved run (only pins): run it as it was set up
        # After the pins: a comparison set-up names its run B by a pin's label.
        parts = {**state.settings, "comparison": state.comparison, "scan_key": state.scan_key}
        host.restore_session_parts(parts)
        view = state.channel_view
        if view and result is not None and view.get("layer") in result.layers:
            layer, channel = str(view["layer"]), int(view.get("channel", 0))
            host.defer_display(lambda: host.open_channel(layer, channel))
        self._opening = None
        opening.done = True
        kept = opening.path == self.autosave_file()
        if not kept:  # Ctrl+S never writes over the session kept on quit
            self.path = opening.path
            self._remember(opening.path)
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
        if level == "error":
            self.host.show_error(text, BANNER_SOURCE)
        elif level == "warning":
            self.host.show_warning(text, BANNER_SOURCE)
        # The banner holds the whole sentence; the one-line status bar would cut it.
        status = f"The session {opening.path.name} was not opened: see the message above"
        self.host.refresh_busy(text if level is None else status)
        self.session_failed.emit(text)

    # ========================================================================== reports
    def export_report_dialog(self) -> bool:
        """File > Export report…: pick an ``.html`` file and write the report there."""
        # Beside the session, else where the last file dialog was (not the working folder).
        start = str(self.path.with_suffix(".html")) if self.path else start_path("report.html")
        path, _ = QFileDialog.getSaveFileName(
            self.host.dialog_parent(), "Export report", start, REPORT_FILTER
        )
        if not path:
            return False
        return self.export_report(path if path.endswith(".html") else path + ".html")

    def export_report(self, path: str | Path, *, wait: bool = False) -> bool:
        """Write the result shown as one self-contained HTML report (off the GUI thread).

        True when writing started (``wait``: when the report was written; False when it
        could not be, the banner saying why).
        """
        result = self.host.result
        if result is None or result.capture is None:
            self.host.show_warning("Nothing to report yet: run the model first.", REPORT_SOURCE)
            return False
        s = self.session
        out = Path(path)
        kwargs: dict[str, Any] = {
            "model": s.loaded_model if s.loaded_model is not None else s.model,
            "model_name": s.model_name,
            "input_name": "" if s.input is None else (s.input.source or s.input.description),
            "title": f"actviz report: {s.model_name}" if s.model_name else "",
            # The view settings in force now, not the run's (the colour map may have changed
            # since): the report paints as the window does (actviz.display.colormaps.painting).
            "cmap": s.colormap,
            "normalize": s.normalize,
        }
        loaded = s.loaded_model
        if loaded is not None and loaded.model is s.model:
            from actviz.io.export.reproduce import run_source

            args = s.model_open_args
            kwargs["source"] = run_source(
                loaded,
                None,
                arch=args.get("arch"),
                weights=args.get("weights", "DEFAULT"),
                trust=bool(args.get("trust", False)),
                list_input=s.input_as_list,
                target=s.run_target,
            )
        # The features' parts: the comparison shown, the scan's sheets (made in the job).
        parts = self.host.report_parts()
        self.host.show_status(f"Writing the report {out.name}…")

        report = ReportJob(out)

        def job(_stop: Any, progress: Callable[[str], None], submission: int) -> Any:
            from actviz.io.export.report import write_result_report

            if not report.claim(submission):  # an earlier submission of it began after all
                return None

            def pages(done: int, total: int, what: str) -> None:
                progress(f"Report: {what} ({done}/{total})")

            # Runs on the capture worker, so the report's own passes over the model
            # (attention maps, scan sheets) never overlap a run's or a live frame's capture.
            try:
                extra = {k: v() if callable(v) else v for k, v in parts.items()}
                info = write_result_report(result, out, progress=pages, **kwargs, **extra)
            except Exception as exc:
                report.outcome = (None, exc)
                raise
            else:
                report.outcome = (info, None)
                return info
            finally:
                self._report_ended.emit()

        report.job = job
        self._submit_report(report)
        self.host.refresh_busy()
        if wait:
            self._wait(lambda: report not in self._reports)
            return report.outcome is not None and report.outcome[1] is None
        return True

    def _submit_report(self, report: ReportJob) -> None:
        self._reports[report] = None
        report.submit(self.host.worker).on(
            finished=lambda info: info is not None and self._on_report_finished(report, info),
            failed=lambda error: self._on_report_errored(report, error),
            cancelled=lambda: self._on_report_cancelled(report),
            superseded=self._resume_reports,
            progress=self.host.show_status,
        )

    def _resume_reports(self) -> None:
        """Reports a later run superseded: the worker says nothing more of them.

        One that had not begun is skipped by the worker: submit it again (it then runs
        after the run). One that ended superseded: say so from its outcome. A current one
        reports through its own handle.
        """
        if self._closed:
            return
        for report in list(self._reports):
            if report.to_resubmit():
                self._submit_report(report)
            elif report.ended_unheard():
                info, error = report.outcome  # type: ignore[misc]
                if error is not None:
                    self._on_report_errored(report, error)
                else:
                    self._on_report_finished(report, info)

    def _on_report_finished(self, report: ReportJob, info: Any) -> None:
        if self._reports.pop(report, False) is False:
            return
        self.host.clear_messages(REPORT_SOURCE)  # an earlier report's failure is over
        self.host.refresh_busy(f"Wrote the report {info.path} ({_mib(info.nbytes)})")
        self.report_written.emit(str(info.path))

    def _on_report_errored(self, report: ReportJob, error: BaseException) -> None:
        if self._reports.pop(report, False) is False:
            return
        log.error("report failed", exc_info=(type(error), error, error.__traceback__))
        text = f"Could not write the report: {describe_error(error)}"
        self.host.show_error(text, REPORT_SOURCE)
        self.host.refresh_busy("Could not write the report: see the message above")

    def _on_report_cancelled(self, report: ReportJob) -> None:
        if self._reports.pop(report, False) is None:
            self.host.refresh_busy("The report was cancelled.")

    # ========================================================================== the jobs' ends
    def _on_job_finished(self, handle: Job, value: Any) -> None:
        if handle not in self._jobs:
            return
        kind, data = self._jobs.pop(handle)
        self.host.refresh_busy()
        try:
            if kind == "save":
                self._saved(*value)
                data.ok = True
            elif kind == "read" and data is self._opening:
                self._read(data, *value)
            elif kind == "model" and data is self._opening:
                self._adopt(data, value)
            elif kind == "prepare" and data[0] is self._opening:
                result, pins = value
                self._opened(data[0], result, pins, data[1])
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the window down
            log.exception("session step %s failed", kind)
            self._on_step_error(kind, data, exc)

    def _on_job_errored(self, handle: Job, error: BaseException) -> None:
        if handle not in self._jobs:
            return
        kind, data = self._jobs.pop(handle)
        self.host.refresh_busy()
        if kind == "model" and data is self._opening:
            self._model_failed(data, error)
            return
        if not isinstance(error, SessionFileError):
            log.error("session %s failed", kind, exc_info=(type(error), error, None))
        self._on_step_error(kind, data, error)

    def _on_step_error(self, kind: str, data: Any, error: BaseException) -> None:
        text = describe_error(error) if not isinstance(error, SessionFileError) else str(error)
        if kind == "save":
            data.ok = False
            text = f"Could not save the session: {text}"
            self.host.show_error(text, BANNER_SOURCE)
            self.host.refresh_busy("Could not save the session: see the message above")
            self.session_failed.emit(text)
        else:
            opening = data[0] if isinstance(data, tuple) else data
            self._fail_open(opening, f"Could not open the session: {text}", level="error")

    def _on_job_cancelled(self, handle: Job) -> None:
        self._jobs.pop(handle, None)
        self.host.refresh_busy()

    # ========================================================================== autosave
    @property
    def autosave(self) -> bool:
        """Whether the session is kept in :meth:`autosave_file` (the app turns it on)."""
        return self._autosave

    @autosave.setter
    def autosave(self, on: bool) -> None:
        if bool(on) == self._autosave:
            return
        self._autosave = bool(on)
        s = self.session
        events = (s.model_changed, s.input_changed, s.ticks_changed, s.target_changed,
                  s.result_changed, s.pins_changed, s.edits_changed)  # fmt: skip
        for event in events:
            if on:
                event.connect(self._on_session_changed)
            else:
                event.disconnect(self._on_session_changed)
        if not on:
            self._autosave_timer.stop()

    def _on_session_changed(self, *_args: Any) -> None:
        if not self._closed:
            self._autosave_timer.start()

    def _autosave_now(self) -> None:
        """Write the autosave on a thread of its own (not the feature's worker: it would show
        the window busy); a write still under way is let finish and this one comes after."""
        if self._closed or self.session.model is None or self._opening is not None:
            return
        if self._autosave_thread is not None and self._autosave_thread.is_alive():
            self._autosave_timer.start()
            return
        try:
            state = gather_state(self.host, with_model=False)
        except Exception:  # noqa: BLE001 - keeping a copy must never disturb the user
            log.exception("could not gather the session to keep it")
            return
        opened = ModelOpened.of(self.session)
        path = self.autosave_file()

        def write() -> None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                full = model_part(state, opened)
                # Written after every change: large pinned captures wait for the quit.
                keep = pin_capture_bytes(full) <= AUTOSAVE_PIN_LIMIT // 8
                save_state(full, path, pin_captures=keep)
                self.autosaves += 1
            except Exception:  # noqa: BLE001 - logged; the next change tries again
                log.exception("could not keep the session in %s", path)

        self._autosave_thread = threading.Thread(target=write, name="actviz-autosave")
        self._autosave_thread.start()

    def autosave_file(self) -> Path:
        """Where the session is kept on quit."""
        return autosave_path(self._store)

    def write_autosave(self) -> Path | None:
        """Write the session to :meth:`autosave_file` now (on the GUI thread: the window is
        closing); None when there is nothing to keep (no model) or it failed (logged)."""
        if self.session.model is None:
            return None
        path = self.autosave_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            state = self.session_state()
            keep = pin_capture_bytes(state) <= AUTOSAVE_PIN_LIMIT
            save_state(state, path, pin_captures=keep)
        except Exception:  # noqa: BLE001 - quitting must never fail on the autosave
            log.exception("could not keep the session on quit")
            return None
        return path

    def can_offer_restore(self) -> bool:
        """Whether a session was kept on quit and the setting lets a start offer it."""
        return self.restore_on_start and self.autosave_file().is_file()

    def offer_restore(self) -> bool:
        """At start: offer the session kept on quit (unless the setting is off); True when
        the user accepted and it is being opened."""
        path = self.autosave_file()
        if not self.can_offer_restore():
            return False
        what = describe_session_file(path)
        if not self.ask_restore(
            self.host.dialog_parent(),
            "actviz kept your last session when it closed"
            + (f" ({what})" if what else "")
            + ". Restore it?",
        ):
            return False
        return self.open_session(path)

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._autosave_timer.stop()
        if self._autosave_thread is not None:
            self._autosave_thread.join()  # the file is replaced whole: never two writers
        if self.autosave:
            self.write_autosave()
        self.worker.shutdown(timeout_ms=10_000)
        self._jobs.clear()
