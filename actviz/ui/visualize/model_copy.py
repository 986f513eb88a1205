"""A private copy of the window's model for a synthesis that runs beside the window's runs.

A synthesis takes seconds to minutes and puts hooks on the model it optimises through (one
model, one worker), so on the window's capture worker every run, and every live frame,
would interrupt it. It runs instead on a worker of its own, on a copy of the model. The copy
is made *on* the capture worker, as a short job of its own between two of its jobs, so that
no capture's hooks are inside the model while it is copied.

Both the channel view's "What it wants" and the "What channels want" page use one each (each
job its own copy: two syntheses at once must not share one model's hooks).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from actviz.ui.host import WindowHost

__all__ = ["ModelCopy"]


class _CopySignals(QObject):
    """From the capture worker's thread to the GUI thread: ``copied(model, copy, error)``."""

    copied = Signal(object, object, object)


class ModelCopy(QObject):
    """Asks the capture worker for a copy of the session's model and hands it over.

    Parameters
    ----------
    host
        The window: its session (the model) and capture worker.
    parent
        The owner.
    """

    def __init__(self, host: WindowHost, parent: QObject) -> None:
        super().__init__(parent)
        self.host = host
        self.session = host.session
        #: True from :meth:`get` until the copy asked for is handed over (or abandoned).
        self.pending = False
        self._gen: int | None = None
        self._gens: set[int] = set()  # every copy job's generation on the capture worker
        self._held: tuple[Any, Any] | None = None  # (session model, its copy)
        self._then: Callable[[Any], None] | None = None
        self._failed: Callable[[BaseException], None] | None = None
        self._closed = False
        self._signals = _CopySignals(self)
        self._signals.copied.connect(self._on_copied)
        host.worker.signals.started.connect(self._check)
        host.worker.signals.cancelled.connect(self._on_worker_cancelled)
        host.run_started.connect(self._check)

    def owns_job(self, generation: int) -> bool:
        """Whether the capture worker's job ``generation`` is one of the copies."""
        return generation in self._gens

    def is_held(self) -> bool:
        """Whether a copy of the model shown now is at hand (:meth:`get` calls back at once)."""
        return self._held is not None and self._held[0] is self.session.model

    def get(self, then: Callable[[Any], None], failed: Callable[[BaseException], None]) -> None:
        """``then(copy)`` once a copy of the session's model is made (at once when one is
        held), or ``failed(error)``. A copy already asked for calls the latest ``then``."""
        if self._closed:
            return
        if self.is_held():
            assert self._held is not None
            then(self._held[1])
            return
        self._then, self._failed = then, failed
        if not self.pending:
            self._submit()

    def abandon(self) -> None:
        """The copy asked for is no longer wanted: it calls nothing when made."""
        self.pending = False

    def forget(self) -> None:
        """Let go of the copy held (another model, or the memory): the next :meth:`get`
        makes a new one."""
        self.pending = False
        self._held = None

    def close(self) -> None:
        """The window is closing: nothing more is asked for or handed over."""
        self._closed = True
        self.forget()

    # ------------------------------------------------------------------ the capture worker
    def _submit(self) -> None:
        model = self.session.model
        signals = self._signals

        def job(_should_stop: Any, _report: Any) -> None:
            # On the capture worker: no capture is running, so no capture hook is copied.
            # Handed over by a signal of its own: a run submitted meanwhile makes this job
            # stale, and the worker would drop its result.
            try:
                signals.copied.emit(model, copy.deepcopy(model), None)
            except Exception as exc:  # noqa: BLE001 - shown by the one who asked
                signals.copied.emit(model, None, exc)

        self.pending = True
        # supersede=False: a run already queued still reports.
        self._gen = self.host.worker.submit(job, supersede=False)
        self._gens.add(self._gen)

    def _check(self, *_args: Any) -> None:
        gen = self._gen
        if self.pending and gen is not None and self.host.worker.is_stale(gen):
            # A run superseded the copy's job, maybe before it ran: ask again behind it (the
            # first copy made is taken).
            self._submit()

    def _on_worker_cancelled(self, gen: int) -> None:
        # A cancel meant for another job of the capture worker (a feature's Cancel cancels
        # every current job there) also stopped the copy queued behind it, which then never
        # reports. Ask again (whoever wants the wait to end calls abandon() first).
        if self.pending and gen == self._gen and not self._closed:
            self._submit()

    def _on_copied(self, model: Any, model_copy: Any, error: Any) -> None:
        if not self.pending or model is not self.session.model or self._closed:
            return
        self.pending = False
        self._gen = None
        if error is not None:
            if self._failed is not None:
                self._failed(error)
            return
        self._held = (model, model_copy)
        if self._then is not None:
            self._then(model_copy)
