"""Showing a result in small steps, one event-loop pass at a time, so input and painting never
wait; a zero-interval timer, since Qt handles posted events all in one go."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

log = logging.getLogger(__name__)

#: Steps run in one pass until it took this long (a live frame: one window repaint, not several).
DISPLAY_PASS_S = 0.004


class DisplaySteps:
    """The steps waiting to show a result, tagged with its epoch; ``show_error`` says failures."""

    def __init__(self, parent: QObject, show_error: Callable[[str, str], None]) -> None:
        self.epoch = 0  #: The result shown: a step of an older epoch is skipped.
        self._steps: deque[tuple[int | None, Callable[[], None]]] = deque()
        self._show_error = show_error
        self._timer = QTimer(parent, interval=0)
        self._timer.timeout.connect(self._run)

    def defer(self, step: Callable[[], None], *, stale_ok: bool = False) -> None:
        """Run ``step`` on a later pass; skipped if a newer result came (unless ``stale_ok``)."""
        self._steps.append((None if stale_ok else self.epoch, step))
        if not self._timer.isActive():
            self._timer.start()

    def pending(self) -> bool:
        """Whether steps are still waiting."""
        return bool(self._steps)

    def call(self, step: Callable[[], None]) -> None:
        """Run ``step`` now; its failure is reported, never raised into Qt."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display part of the result")
            self._show_error(f"Could not display the result: {exc}", "run")

    def flush(self) -> None:
        """Run every waiting step of the result shown now."""
        self._run(float("inf"))

    def _run(self, budget_s: float | None = None) -> None:
        steps, end, ran = self._steps, time.perf_counter() + (budget_s or DISPLAY_PASS_S), False
        while steps and not (ran and time.perf_counter() >= end):
            epoch, step = steps.popleft()
            if epoch is None or epoch == self.epoch:  # else a newer result came
                self.call(step)
                ran = True
        if not steps:
            self._timer.stop()
