"""One deferred call per event-loop turn, however often it is asked for.

Geometry handlers (a resize, a range change) that change geometry themselves must never run
inside the pass that called them: Qt would re-enter them from C++ without end (a hang, then a
stack overflow). They ask for a :class:`DeferredCall` instead, which runs once, after the
current layout pass, with the state of that moment.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore


class DeferredCall:
    """Run ``fn`` once on the next turn of the event loop after :meth:`request`.

    Requests made before it runs (or while it runs) are folded into that one call, or the
    next one. The timer belongs to ``owner``, so nothing runs once the owner is deleted.
    """

    def __init__(self, owner: QtCore.QObject, fn: Callable[[], object]) -> None:
        self._fn = fn
        self._timer = QtCore.QTimer(owner)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run)

    def request(self, *_args: object) -> None:
        """Ask for the call (signal arguments are ignored)."""
        if not self._timer.isActive():
            self._timer.start()

    def pending(self) -> bool:
        """Whether a call is waiting for the event loop."""
        return self._timer.isActive()

    def _run(self) -> None:
        self._fn()
