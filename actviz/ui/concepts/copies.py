"""Copies of the session's model for the concept jobs (training, scans, effects, syntheses).

Hooks are per-module state (one model, one worker): a job that ran forward passes on the
model the window captures with would mix its records with the window's runs. Each concept
worker therefore runs on a copy of its own, made on the GUI thread while the capture worker
runs nothing (no capture's hooks inside the model then: jobs are submitted from this thread).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer

from actviz.ui.host import WindowHost

__all__ = ["ModelCopies"]

#: How often a copy waits for the capture worker to be idle, and for how many tries.
POLL_MS = 50
TRIES = 200


class ModelCopies(QObject):
    """Makes copies of ``host.session.model`` when the capture worker is idle."""

    def __init__(self, host: WindowHost, parent: QObject) -> None:
        super().__init__(parent)
        self.host = host
        self.session = host.session
        self.closed = False
        self._held: tuple[Any, Any] | None = None  # (session model, the shared copy)

    def copy_now(self) -> Any:
        """A copy made now in eval mode; None while the capture worker is busy."""
        model = self.session.model
        if model is None or self.host.worker.is_busy():
            return None
        clone = copy.deepcopy(model)
        clone.eval()
        return clone

    def engine_model(self, clone: Any) -> Any:
        """``clone`` with the opened model's preprocessing (what the data engines read)."""
        loaded = self.session.loaded_model
        if loaded is not None and loaded.model is self.session.model:
            return dataclasses.replace(loaded, model=clone)
        return clone

    def fresh(
        self,
        then: Callable[[Any], None],
        *,
        wanted: Callable[[], bool] = lambda: True,
        gave_up: Callable[[], None] | None = None,
        tries: int = TRIES,
    ) -> None:
        """``then(copy)`` with a new copy as soon as the capture worker is idle (polled);
        nothing once ``wanted()`` is False; ``gave_up()`` when it stayed busy too long."""
        if self.closed or not wanted():
            return
        clone = self.copy_now()
        if clone is not None:
            then(clone)
        elif tries > 0 and self.session.model is not None:
            QTimer.singleShot(
                POLL_MS,
                self,
                lambda: self.fresh(then, wanted=wanted, gave_up=gave_up, tries=tries - 1),
            )
        elif gave_up is not None:
            gave_up()

    def shared(self, then: Callable[[Any], None]) -> None:
        """``then(copy)`` with the one copy of the current model kept for quick jobs (made
        on first use): jobs on one worker run one at a time, so they may share it."""
        held = self._held
        if held is not None and held[0] is self.session.model:
            then(held[1])
            return

        def keep(clone: Any) -> None:
            self._held = (self.session.model, clone)
            then(clone)

        self.fresh(keep)

    def forget(self) -> None:
        """Let go of the shared copy (another model)."""
        self._held = None
