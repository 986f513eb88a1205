"""The play timer of a live sequence, held while no frame could start.

When the model is slower than the playback speed, a tick could only replace the frame waiting
for room, at a cost to the GUI thread. So the controller holds the clock while the frames in
flight leave no room, and on resuming moves on by the ticks that would have fired meanwhile:
the same frame is shown next, and as many count as dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

__all__ = ["PlayClock"]


class PlayClock:
    """A repeating timer of ``parent``'s that calls ``tick()`` every ``interval_ms``, or is
    held."""

    def __init__(self, parent: QObject, tick: Callable[[], None]) -> None:
        self._timer = QTimer(parent)
        self._timer.timeout.connect(tick)
        self._interval_ms = 1
        self._held_at: float | None = None

    @property
    def running(self) -> bool:
        """Whether it ticks, or is held (it ticks again when resumed)."""
        return self._timer.isActive() or self._held_at is not None

    @property
    def held(self) -> bool:
        return self._held_at is not None

    def start(self, interval_ms: int) -> None:
        self._held_at = None
        self._interval_ms = max(1, int(interval_ms))
        self._timer.start(self._interval_ms)

    def stop(self) -> None:
        self._held_at = None
        self._timer.stop()

    def set_interval(self, interval_ms: int) -> None:
        self._interval_ms = max(1, int(interval_ms))
        if self._timer.isActive():
            self._timer.setInterval(self._interval_ms)

    def hold(self) -> None:
        """Stop ticking until :meth:`resume` (no-op when stopped or held already)."""
        if self._timer.isActive():
            self._timer.stop()
            self._held_at = time.perf_counter()

    def resume(self) -> int:
        """Tick again; returns how many ticks would have fired while held (0: not held)."""
        if self._held_at is None:
            return 0
        missed = int((time.perf_counter() - self._held_at) * 1000.0 / self._interval_ms)
        self._held_at = None
        self._timer.start(self._interval_ms)
        return missed
