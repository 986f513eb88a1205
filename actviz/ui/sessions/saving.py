"""File > Save session / Save session as: what the window shows, written off the GUI thread."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog

from actviz.core.capture import format_bytes
from actviz.ui.background_loads import describe_error
from actviz.ui.file_dialogs import start_path
from actviz.ui.sessions.state import ModelOpened, gather_state, model_part
from actviz.ui.worker import Job
from actviz.workspace.session_file import SUFFIX, SessionFileError, pin_capture_bytes, save_state

log = logging.getLogger(__name__)

SESSION_FILTER = f"actviz sessions (*{SUFFIX})"
#: The banner's source for session messages.
BANNER_SOURCE = "session"


class SessionSaver:
    """Saves ``feature``'s session on its worker and says the outcome (never raises into Qt)."""

    def __init__(self, feature: Any) -> None:
        self.feature, self.host = feature, feature.host
        self.jobs: set[Job] = set()

    def save(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save to ``path``, else to the file last saved or opened, else ask where."""
        target = Path(path) if path is not None else self.feature.path
        return self.save_as(wait=wait) if target is None else self._save(target, wait=wait)

    def save_as(self, path: str | Path | None = None, *, wait: bool = False) -> bool:
        """Save to a file chosen in a dialog (or ``path``)."""
        if path is None:
            f = self.feature
            start = str(f.path) if f.path else (self.host.settings.recent_sessions() or [""])[0]
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

    def _save(self, path: Path, *, wait: bool) -> bool:
        try:
            return self._start(path, wait=wait)
        except Exception as exc:  # noqa: BLE001 - a failed save is said, never raised into Qt
            log.warning("saving the session to %s failed", path, exc_info=True)
            self._failed(exc)
            return False

    def _start(self, path: Path, *, wait: bool) -> bool:
        state = gather_state(self.host, with_model=False)
        pin_captures = True
        if any(p.capture is not None for p in state.pins):
            extra = pin_capture_bytes(state)
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

        handle = self.feature.worker.submit(job, supersede=False)
        outcome: list[bool] = []
        handle.on(
            finished=lambda value: outcome.append(self._saved(handle, *value)),
            failed=lambda error: outcome.append(self._errored(handle, error)),
            cancelled=lambda: self._ended(handle),
            progress=self.host.show_status,
        )
        self.jobs.add(handle)
        self.host.refresh_busy()
        if wait:
            self.host.wait_until(lambda: handle not in self.jobs)
            return bool(outcome and outcome[0])
        return True

    def _ended(self, handle: Job) -> bool:
        known = handle in self.jobs
        self.jobs.discard(handle)
        self.host.refresh_busy()
        return known

    def _saved(self, handle: Job, path: Path, warnings: list[str]) -> bool:
        if not self._ended(handle):
            return False
        try:
            self.feature.saved(path)
            size = path.stat().st_size if path.exists() else 0
            self.host.clear_messages(BANNER_SOURCE)
            if warnings:
                self.host.show_warning("Saved without: " + "; ".join(warnings), BANNER_SOURCE)
            self.host.refresh_busy(f"Saved the session to {path} ({format_bytes(size)})")
            self.feature.session_saved.emit(str(path))
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the window down
            log.exception("after saving the session")
            self._failed(exc)
            return False
        return True

    def _errored(self, handle: Job, error: BaseException) -> bool:
        if self._ended(handle):
            if not isinstance(error, SessionFileError):
                log.error("saving the session failed", exc_info=(type(error), error, None))
            self._failed(error)
        return False

    def _failed(self, error: BaseException) -> None:
        text = describe_error(error) if not isinstance(error, SessionFileError) else str(error)
        text = f"Could not save the session: {text}"
        self.host.show_error(text, BANNER_SOURCE)
        self.host.refresh_busy("Could not save the session: see the message above")
        self.feature.session_failed.emit(text)
