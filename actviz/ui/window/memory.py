"""Freed memory goes back to the system after :data:`IDLE_MS` idle (malloc trimmed beyond
:data:`SLACK_MIB`); in the app's process the cyclic collector runs then and freezes survivors."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from actviz.core import allocator

#: How long the window must stay idle (no job, no display step) before memory is handed back.
IDLE_MS = 2000
#: Freed memory kept beyond the heap in use before a trim is worth its few milliseconds.
SLACK_MIB = 64.0
#: How long the window must stay idle before a due full collection (~0.2 s) runs.
FULL_IDLE_MS = 20_000
#: Idle moments between two full collections.
FULL_EVERY = 50

_FREEZE = [False]


def keep_collector_off_clicks(on: bool = True) -> None:
    """New windows collect garbage when idle and freeze the rest (``on=False``: Python's way)."""
    _FREEZE[0] = bool(on)


class IdleMemory(QObject):
    """Trims freed memory off the GUI thread once per idle stretch; ``idle`` runs first."""

    idle = Signal()

    def __init__(self, parent: QObject, busy: Callable[[], bool]) -> None:
        super().__init__(parent)
        self._busy = busy
        self._timer = QTimer(self, singleShot=True, interval=IDLE_MS)
        self._timer.timeout.connect(self._on_idle)
        self._thread: threading.Thread | None = None
        self.trims = 0  # trims done (tests read it)
        self.passes = 0  # idle passes ended, with or without a trim (the stress driver waits)
        #: Whether this window freezes what survives its collections (see the module).
        self.freezes = _FREEZE[0]
        #: Idle moments before a full collection is due (the window's start makes one).
        self.idles_before_full = FULL_EVERY
        self._full_timer = QTimer(self, singleShot=True)
        self._full_timer.timeout.connect(self._on_long_idle)
        if self.freezes:
            self.collect_cycles(full=True)

    def touch(self, *_args: Any) -> None:
        """Something changed: trim once the window is idle again."""
        self._timer.start()
        self._full_timer.stop()

    def idle_now(self) -> None:
        """The idle pass now, as after :data:`IDLE_MS` idle (a stress checkpoint is a pause)."""
        self._timer.stop()
        self._on_idle()

    def _on_long_idle(self) -> None:
        self._full_timer.start() if self._busy() else self.collect_cycles(full=True)

    def _on_idle(self) -> None:
        if self._busy():
            self._timer.start()  # still working: look again later
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self.idle.emit()
        self.collect_cycles()
        self._thread = threading.Thread(target=self._trim, name="actviz-trim", daemon=True)
        self._thread.start()

    def _trim(self) -> None:
        try:
            heap = allocator.heap_in_use_mib()
            if heap is not None and allocator.rss_mib() - heap < SLACK_MIB:
                return
            if allocator.release_freed_memory():
                self.trims += 1
        finally:
            self.passes += 1

    def stop(self) -> None:
        """The window closes: no more trims; the collector sees every object again."""
        self._timer.stop()
        self._full_timer.stop()
        if self.freezes:
            gc.unfreeze()

    def collect_cycles(self, *, full: bool = False) -> None:
        """Collect young cyclic garbage (``full``: all) and freeze survivors (the app's process)."""
        if not self.freezes:
            return
        if full:
            gc.unfreeze()
        gc.collect(2 if full else 1)  # else the young objects only: the older ones are frozen
        gc.freeze()
        self.idles_before_full = FULL_EVERY if full else self.idles_before_full - 1
        if self.idles_before_full <= 0:
            self._full_timer.start(FULL_IDLE_MS)
