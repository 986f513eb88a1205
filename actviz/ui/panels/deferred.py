"""One deferred call per event-loop turn, however often it is asked for: geometry handlers
that change geometry run after the layout pass, never inside it (Qt would re-enter them)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore


class DeferredCall:
    """Run ``fn`` once on the next turn after :meth:`request`s (nothing once ``owner`` is gone)."""

    def __init__(self, owner: QtCore.QObject, fn: Callable[[], object]) -> None:
        self._timer = QtCore.QTimer(owner)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(fn)

    def request(self, *_args: object) -> None:
        """Ask for the call (signal arguments are ignored)."""
        if not self._timer.isActive():
            self._timer.start()

    def pending(self) -> bool:
        """Whether a call is waiting for the event loop."""
        return self._timer.isActive()
