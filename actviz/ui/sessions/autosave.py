"""The session kept on quit: written after each change (off the GUI thread) and on close,
offered at the next start."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, QStandardPaths, QTimer
from PySide6.QtWidgets import QWidget

from actviz.ui.host import WindowHost
from actviz.ui.sessions.state import ModelOpened, gather_state, model_part
from actviz.workspace.session_file import (
    SUFFIX,
    SessionState,
    describe_session_file,
    pin_capture_bytes,
    save_state,
)

log = logging.getLogger(__name__)

AUTOSAVE_NAME = "autosave" + SUFFIX
#: Pins' captures bigger than this are left out on quit (written on the GUI thread).
AUTOSAVE_PIN_LIMIT = 256 * 2**20
#: The session is kept this long after its last change (a burst of changes writes once).
AUTOSAVE_DELAY_MS = 3000


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
    save_state(state, path, pin_captures=pin_capture_bytes(state) <= pin_limit)


class Autosave(QObject):
    """Keeps the window's session in :attr:`path` while :attr:`on` (not while ``paused()``)."""

    def __init__(self, host: WindowHost, paused: Callable[[], bool]) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session = host, host.session
        self._store, self._paused = host.settings.store, paused
        #: Whether the session is kept (:meth:`switch`).
        self.on = self._closed = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(AUTOSAVE_DELAY_MS)
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
        opened = ModelOpened.of(self.session)
        path = self.path

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
        what = describe_session_file(self.path)
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
