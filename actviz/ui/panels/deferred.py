"""One deferred call per event-loop turn, however often it is asked for: geometry handlers
that change geometry run after the layout pass, never inside it (Qt would re-enter them);
and layouts held to one pass over a block of changes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from PySide6 import QtCore, QtWidgets


@contextlib.contextmanager
def held_layouts(*layouts: QtWidgets.QLayout, now: bool = True) -> Iterator[None]:
    """Lay ``layouts`` out once, after the block (``now``) or in the layout pass Qt posts: Qt
    lays out every layout above a child as it is shown (filling a layer panel showed five
    children, each laying out the whole grid)."""
    held = [layout for layout in layouts if layout is not None and layout.isEnabled()]
    for layout in held:  # (one held already: the outer block lays it out)
        layout.setEnabled(False)
    try:
        yield
    finally:
        for layout in held:
            layout.setEnabled(True)
        for layout in held if now else ():  # outer ones (given first) first: each placed once
            layout.activate()


class DeferredCall:
    """Run ``fn`` once on the next turn after :meth:`request`s (nothing once ``owner`` is gone)."""

    def __init__(self, owner: QtCore.QObject, fn: Callable[[], object]) -> None:
        self._timer = QtCore.QTimer(owner, singleShot=True, interval=0)
        self._timer.timeout.connect(fn)

    def request(self, *_args: object) -> None:
        """Ask for the call (signal arguments are ignored)."""
        if not self._timer.isActive():
            self._timer.start()

    def pending(self) -> bool:
        """Whether a call is waiting for the event loop."""
        return self._timer.isActive()


class TurnBudget:
    """Seconds that deferred steps share in one event-loop turn (two passes in a turn, each on a
    budget of its own, held the window twice as long); a turn's first step always runs."""

    def __init__(self, owner: QtCore.QObject) -> None:
        self._turn = QtCore.QTimer(owner, singleShot=True, interval=0)  # fires the next turn
        self._start, self._stepped = 0.0, False

    def allows(self, seconds: float, cost: float = 0.0) -> bool:
        """Whether a step of about ``cost`` seconds fits in this turn's ``seconds``."""
        if not self._turn.isActive():
            self._turn.start()
            self._start, self._stepped = time.perf_counter(), False
        first, self._stepped = not self._stepped, True
        return first or time.perf_counter() + cost <= self._start + seconds
