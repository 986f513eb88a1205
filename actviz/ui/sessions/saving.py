"""File > Save session / Save session as and Export report (written off the GUI thread), the
window as a SessionState, and the session kept on quit: written after each change (on a thread of
its own) and on close, offered at the next start."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QSettings, QStandardPaths, QTimer, Signal
from PySide6.QtWidgets import QWidget

from actviz.core.capture import CaptureCancelled, format_bytes
from actviz.ui.background_loads import describe_error, format_eta
from actviz.ui.file_dialogs import save_file
from actviz.ui.host import WindowHost, report_value
from actviz.ui.worker import Job
from actviz.workspace import session_file
from actviz.workspace.session_file import SUFFIX, PinState, SessionState, save_state

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.edit_kinds import Edit
    from actviz.workspace.session_state import Session

log = logging.getLogger(__name__)

SESSION_FILTER = f"actviz sessions (*{SUFFIX})"
BANNER_SOURCE = "session"  #: The banner's source for session messages.
AUTOSAVE_NAME = "autosave" + SUFFIX
#: Pins' captures bigger than this are left out on quit (written on the GUI thread).
AUTOSAVE_PIN_LIMIT = 256 * 2**20
#: The session is kept this long after its last change (a burst of changes writes once).
AUTOSAVE_DELAY_MS = 3000
#: The banner's source for report messages (the next report clears them, no others).
REPORT_SOURCE = "report"
REPORT_FILTER = "HTML reports (*.html)"


def gather_state(host: WindowHost, *, with_model: bool = True) -> SessionState:
    """What ``host`` shows, as a :class:`SessionState` (``with_model``: the model's source now)."""
    s = host.session
    pins = tuple(PinState(p.label, float(p.pinned_at), p.result.capture) for p in s.pins)
    parts = dict(host.session_parts())
    view = host.channel_view
    name = getattr(view, "name", "")
    shown = bool(name) and view.isVisibleTo(host.dialog_parent())
    # Every edit of the board (switched off ones too), by layer, in the order made.
    edits: dict[str, list[Edit]] = {}
    for entry in s.edits:
        edits.setdefault(entry.layer, []).append(entry.edit)
    state = SessionState(
        input=None if s.input is None else session_file.input_source_of(s.input),
        ticked=tuple(s.ticked),
        target=s.target,
        categories=tuple(s.categories) if s.categories else None,
        colormap=s.colormap,
        normalize=s.normalize,
        gradcam_layer=s.gradcam_layer,
        input_as_list=bool(s.input_as_list),
        channel_pages=dict(s.channel_pages),
        page_channels=dict(s.page_channels),
        channel_view={"layer": str(name), "channel": int(view.channel)} if shown else None,
        edits={layer: tuple(made) for layer, made in edits.items()},
        pins=pins,
        comparison=parts.pop("comparison", None),
        scan_key=parts.pop("scan_key", None),
        layout=host.layout_state(),
        capture=None if s.result is None else s.result.capture,
        settings=parts,
    )
    return model_part(state, ModelOpened.of(s)) if with_model else state


@dataclasses.dataclass(frozen=True)
class ModelOpened:
    """How the model was opened, taken on the GUI thread (it may change while a save runs)."""

    loaded: Any
    open_args: Mapping[str, Any]

    @classmethod
    def of(cls, session: Session) -> ModelOpened | None:
        """None for a module given in memory (it has no source to open again)."""
        loaded = session.loaded_model
        if loaded is None or loaded.model is not session.model or loaded.kind == "module":
            return None
        return cls(loaded, dict(session.model_open_args))


def model_part(state: SessionState, opened: ModelOpened | None) -> SessionState:
    """``state`` with how to open the model again (hashes the checkpoint: off the GUI thread)."""
    if opened is None:
        return state
    source = session_file.model_source_of(opened.loaded, **opened.open_args)
    weights = session_file.weights_to_keep(opened.loaded)
    return dataclasses.replace(state, model=source, model_weights=weights)


class SessionSaver:
    """Saves ``feature``'s session on its worker and says the outcome (never raises into Qt)."""

    def __init__(self, feature: Any) -> None:
        self.feature, self.host = feature, feature.host

    def save(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save to ``path``, else to the file last saved or opened, else ask where."""
        target = Path(path) if path is not None else self.feature.path
        return self.save_as(wait=wait) if target is None else self._save(target, wait=wait)

    def save_as(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save to a file chosen in a dialog (or ``path``)."""
        if path is None:
            f = self.feature
            start = str(f.path) if f.path else (self.host.settings.recent_sessions() or [""])[0]
            parent = self.host.dialog_parent()
            chosen = save_file(parent, "Save session", start or "session" + SUFFIX, SESSION_FILTER)
            if not chosen:
                return False
            path = chosen if chosen.endswith(SUFFIX) else chosen + SUFFIX
        return self._save(Path(path), wait=wait)

    def _save(self, path: Path, *, wait: bool) -> bool:
        try:
            state = gather_state(self.host, with_model=False)
            pin_captures = True
            if any(p.capture is not None for p in state.pins):
                extra = session_file.pin_capture_bytes(state)
                answer = self.feature.ask_pin_captures(
                    self.host.dialog_parent(),
                    f"The pinned results hold their captures: {format_bytes(extra)} more in the "
                    "session file. Keep them (the pins can be shown and compared again) or "
                    "leave them out (only their labels are kept)?",
                )
                if answer is None:
                    return False
                pin_captures = bool(answer)
            opened = ModelOpened.of(self.host.session)
            self.host.show_status(f"Saving the session to {path.name}…")

            def job(_stop: Any, _progress: Callable[[str], None]) -> tuple[Path, list[str]]:
                return path, save_state(model_part(state, opened), path, pin_captures=pin_captures)

            saved: list[bool] = []
            handle = self.feature.submit(
                job, lambda value: saved.append(self._saved(*value)), self._failed
            )
            if wait:
                self.host.wait_until(lambda: handle.done)
            return bool(saved and saved[0]) if wait else True
        except Exception as exc:  # noqa: BLE001 - a failed save is said, never raised into Qt
            self._failed(exc)
            return False

    def _saved(self, path: Path, warnings: list[str]) -> bool:
        try:
            self.feature.saved(path)
            size = path.stat().st_size if path.exists() else 0
            self.host.clear_messages(BANNER_SOURCE)
            if warnings:
                self.host.show_warning("Saved without: " + "; ".join(warnings), BANNER_SOURCE)
            self.host.refresh_busy(f"Saved the session to {path} ({format_bytes(size)})")
            self.feature.session_saved.emit(str(path))
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the window down
            self._failed(exc)
            return False
        return True

    @staticmethod
    def failure_text(error: BaseException, doing: str) -> str:
        """What to say of ``error`` while ``doing``: a session file's own words, else logged."""
        if isinstance(error, session_file.SessionFileError):
            return str(error)
        log.error("%s failed", doing, exc_info=(type(error), error, error.__traceback__))
        return describe_error(error)

    def _failed(self, error: BaseException) -> None:
        text = f"Could not save the session: {self.failure_text(error, 'saving the session')}"
        self.host.show_error(text, BANNER_SOURCE)
        self.host.refresh_busy("Could not save the session: see the message above")
        self.feature.session_failed.emit(text)


def autosave_path(store: QSettings) -> Path:
    """Where the session is kept: beside an INI settings file, else in the app data folder."""
    if store.format() == QSettings.Format.IniFormat and store.fileName():
        return Path(store.fileName()).parent / AUTOSAVE_NAME
    # The generic folder plus our own name: the application's name is not always set yet.
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return Path(base or Path.home()) / "actviz" / AUTOSAVE_NAME


def _keep(state: SessionState, path: Path, pin_limit: int) -> None:
    """Write ``state`` to ``path``, pinned captures only when together within ``pin_limit``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    save_state(state, path, pin_captures=session_file.pin_capture_bytes(state) <= pin_limit)


class Autosave(QObject):
    """Keeps the window's session in :attr:`path` while :attr:`on` (not while ``paused()``)."""

    def __init__(self, host: WindowHost, paused: Callable[[], bool]) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session = host, host.session
        self._store, self._paused = host.settings.store, paused
        self.on = self._closed = False  #: Whether the session is kept (:meth:`switch`).
        self._timer = QTimer(self, singleShot=True, interval=AUTOSAVE_DELAY_MS)
        self._timer.timeout.connect(self._write_later)
        self._thread: threading.Thread | None = None
        self.writes = 0  # background writes done (tests read it)

    @property
    def path(self) -> Path:
        """Where the session is kept (:func:`autosave_path`)."""
        return autosave_path(self._store)

    def switch(self, on: bool) -> None:
        """Keep the session after each change (the app turns it on), or stop."""
        if bool(on) == self.on:
            return
        self.on = bool(on)
        s = self.session
        events = (s.model_changed, s.input_changed, s.ticks_changed, s.target_changed,
                  s.result_changed, s.pins_changed, s.edits_changed)  # fmt: skip
        for event in events:
            (event.connect if on else event.disconnect)(self._changed)
        if not on:
            self._timer.stop()

    def _changed(self, *_args: Any) -> None:
        if not self._closed:
            self._timer.start()

    def _write_later(self) -> None:
        """Write on a thread of its own (the worker would show the window busy), in order."""
        if self._closed or self.session.model is None or self._paused():
            return
        if self._thread is not None and self._thread.is_alive():
            self._timer.start()
            return
        try:
            state = gather_state(self.host, with_model=False)
        except Exception:  # noqa: BLE001 - keeping a copy must never disturb the user
            log.exception("could not gather the session to keep it")
            return
        opened, path = ModelOpened.of(self.session), self.path

        def write() -> None:
            try:
                # Written after every change: large pinned captures wait for the quit.
                _keep(model_part(state, opened), path, AUTOSAVE_PIN_LIMIT // 8)
                self.writes += 1
            except Exception:  # noqa: BLE001 - logged; the next change tries again
                log.exception("could not keep the session in %s", path)

        self._thread = threading.Thread(target=write, name="actviz-autosave")
        self._thread.start()

    def can_offer(self) -> bool:
        """Whether a session was kept and the setting lets a start offer it."""
        return bool(self.host.settings.restore_on_start) and self.path.is_file()

    def offer(
        self, ask: Callable[[QWidget, str], bool], open_session: Callable[[Path], bool]
    ) -> bool:
        """At start, ``ask`` whether to restore the session kept; True when it is opening."""
        if not self.can_offer():
            return False
        what = session_file.describe_session_file(self.path)
        text = "actviz kept your last session when it closed"
        asked = ask(self.host.dialog_parent(), f"{text}{f' ({what})' if what else ''}. Restore it?")
        return asked and open_session(self.path)

    def close(self) -> None:
        """On close: wait for the write under way (never two writers), then write once more."""
        if self._closed:
            return
        self._closed = True
        self._timer.stop()
        if self._thread is not None:
            self._thread.join()
        if not self.on or self.session.model is None:
            return
        try:  # on the GUI thread, large pinned captures too
            _keep(gather_state(self.host), self.path, AUTOSAVE_PIN_LIMIT)
        except Exception:  # noqa: BLE001 - quitting must never fail on the autosave
            log.exception("could not keep the session on quit")


class ReportExport(QObject):
    """A window's reports, in order, on the capture worker: a run started meanwhile waits for
    them (they are kept, not superseded)."""

    report_written = Signal(str)

    def __init__(self, host: WindowHost, session_path: Callable[[], Path | None]) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session = host, host.session
        self._session_path = session_path
        self._reports: dict[Job, None] = {}

    def is_busy(self) -> bool:
        """Whether a report is being written."""
        return bool(self._reports)

    def dialog(self) -> bool:
        """File > Export report…: pick an ``.html`` file and write the report there."""
        # Beside the session, else where the last file dialog was (not the working folder).
        saved = self._session_path()
        start = str(saved.with_suffix(".html")) if saved else "report.html"
        path = save_file(self.host.dialog_parent(), "Export report", start, REPORT_FILTER)
        return bool(path) and self.export(path if path.endswith(".html") else path + ".html")

    def export(self, path: str | Path, *, wait: bool = False) -> bool:
        """Write the result shown as an HTML report; True if started (``wait``: written)."""
        if (result := self.host.result) is None or result.capture is None:
            self.host.show_warning("Nothing to report yet: run the model first.", REPORT_SOURCE)
            return False
        out, s = Path(path), self.session
        kwargs = {
            "model": s.loaded_model if s.loaded_model is not None else s.model,
            "model_name": s.model_name,
            "input_name": "" if s.input is None else (s.input.source or s.input.description),
            "title": f"actviz report: {s.model_name}" if s.model_name else "",
            # The view settings in force now, not the run's: it paints as the window does.
            "cmap": s.colormap,
            "normalize": s.normalize,
            "source": s.run_source(),
        }
        # The features' parts: the comparison shown, the scan's sheets (made in the job).
        parts = self.host.report_parts()
        self.host.show_status(f"Writing the report {out.name}…")

        def job(stop: Callable[[], bool], progress: Callable[[str], None]) -> Any:
            from actviz.io.export.report import write_result_report

            began = time.perf_counter()

            def pages(done: int, total: int, what: str) -> None:
                if stop():  # Esc: the file is written whole or not at all
                    raise CaptureCancelled("the report was cancelled")
                left = (time.perf_counter() - began) * (total - done) / done if done else -1.0
                progress(f"Report: {what} ({done}/{total}, ETA {format_eta(left)})")

            # On the capture worker: its passes over the model never overlap a capture.
            extra = {k: report_value(v, stop, progress) for k, v in parts.items()}
            return write_result_report(result, out, progress=pages, **kwargs, **extra)

        report = self.host.worker.submit(job, supersede=False, keep=True)
        self._reports[report] = None
        report.on(
            finished=lambda info: self._finished(report, info),
            failed=lambda error: self._errored(report, error),
            cancelled=lambda: self._cancelled(report),
            superseded=lambda: self._cancelled(report),  # another model opened
            progress=self.host.show_status,
        )
        self.host.refresh_busy()
        if wait:
            self.host.wait_until(lambda: report not in self._reports)
            return report.outcome == "finished"
        return True

    def _finished(self, report: Job, info: Any) -> None:
        if self._reports.pop(report, False) is False:
            return
        self.host.clear_messages(REPORT_SOURCE)  # an earlier report's failure is over
        self.host.refresh_busy(f"Wrote the report {info.path} ({format_bytes(info.nbytes)})")
        self.report_written.emit(str(info.path))

    def _errored(self, report: Job, error: BaseException) -> None:
        if self._reports.pop(report, False) is False:
            return
        log.error("report failed", exc_info=(type(error), error, error.__traceback__))
        self.host.show_error(f"Could not write the report: {describe_error(error)}", REPORT_SOURCE)
        self.host.refresh_busy("Could not write the report: see the message above")

    def _cancelled(self, report: Job) -> None:
        if self._reports.pop(report, False) is None:
            self.host.refresh_busy("The report was cancelled.")

    def close(self) -> None:
        """The window closes: reports ending later are not told."""
        self._reports.clear()
