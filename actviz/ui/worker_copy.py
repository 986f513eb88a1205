"""The window's side of the copy service (:mod:`actviz.core.model_copy`): a copy of the
session's model made *on* the capture worker, as a short job of its own between two of its
jobs, so that no capture's hooks or flags are inside the model while it is copied.

Syntheses (What it wants, the Visualise page) and the concept jobs run on such copies on
workers of their own, so a run or a live frame never interrupts them.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from actviz.core.model_copy import ModelCopy, with_loading
from actviz.ui.host import WindowHost
from actviz.ui.worker import Job

__all__ = ["WorkerCopy"]

# References to a held copy's module when only its entry holds it: the entry's attribute and
# getrefcount's own argument.
_HELD_REFS = 2

# Every copier of each window: one asking for a copy takes a sibling's that nobody uses.
_SIBLINGS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[WorkerCopy]] = weakref.WeakKeyDictionary()


class _CopySignals(QObject):
    """From the capture worker's thread to the GUI thread: ``copied(entry)``."""

    copied = Signal(object)


class WorkerCopy(QObject):
    """Asks the capture worker for a copy of the session's model and hands it over.

    Parameters
    ----------
    host
        The window: its session (the model) and capture worker.
    parent
        The owner.
    to_eval
        Put the copy in eval mode (else it keeps the model's train/eval flags).
    """

    def __init__(self, host: WindowHost, parent: QObject, *, to_eval: bool = False) -> None:
        super().__init__(parent)
        self.host = host
        self.session = host.session
        self.to_eval = to_eval
        #: True from :meth:`get` until the copy asked for is handed over (or abandoned).
        self.pending = False
        self._job: Job | None = None  # the copy's job on the capture worker
        self._held: ModelCopy | None = None
        self._then: list[Callable[[Any], None]] = []
        self._failed: Callable[[BaseException], None] | None = None
        self._closed = False
        self._signals = _CopySignals(self)
        self._signals.copied.connect(self._on_copied)
        memory = getattr(host, "memory", None)
        if memory is not None:
            memory.idle.connect(self._on_window_idle)
        # Another model: a copy of the old one (and so the old model, its original) goes now,
        # not a minute later.
        self.session.model_changed.connect(self._on_model_changed)
        try:
            _SIBLINGS.setdefault(host, weakref.WeakSet()).add(self)
        except TypeError:  # a host that cannot be weakly referenced: no sharing
            pass

    def is_held(self) -> bool:
        """Whether a usable copy of the model shown now is at hand (:meth:`get` calls back
        at once)."""
        held = self._held
        return held is not None and held.original is self.session.model and held.usable()

    def get(self, then: Callable[[Any], None], failed: Callable[[BaseException], None]) -> None:
        """``then(copy)`` once a copy of the session's model is made (at once when one is
        held), or ``failed(error)``. Every ``then`` asked for meanwhile is called once."""
        if self._closed:
            return
        if self.is_held() or self._borrow():
            assert self._held is not None
            then(self._held.twin)
            return
        if then not in self._then:
            self._then.append(then)
        self._failed = failed
        if not self.pending:
            self._submit()

    def _borrow(self) -> bool:
        """Take a usable copy of the model shown from another copier of the window that holds
        one no job uses (only its entry refers to it): a window keeps one copy of its model
        where it can, not one per feature (each is as large as the model)."""
        model = self.session.model
        for other in list(_SIBLINGS.get(self.host, ())):
            held = other._held
            if other is self or other.pending or held is None or held.original is not model:
                continue
            if not held.usable() or sys.getrefcount(held.twin) > _HELD_REFS:
                continue
            # The flags this copier hands out: all eval, or the model's own.
            flags = [m.training for m in held.twin.modules()]
            wanted = [False] * len(flags) if self.to_eval else [m.training for m in model.modules()]
            if flags != wanted:
                continue
            self._held, other._held = held, None
            return True
        return False

    def engine_model(self, twin: Any) -> Any:
        """``twin`` with the opened model's preprocessing and input size (what engines read)."""
        return with_loading(twin, self.session.model, self.session.loaded_model)

    def abandon(self) -> None:
        """The copy asked for is no longer wanted: it calls nothing when made."""
        self.pending = False
        self._then = []

    def forget(self) -> None:
        """Let go of the copy held (another model, or the memory): the next :meth:`get`
        makes a new one."""
        self.abandon()
        self._held = None

    def _on_window_idle(self) -> None:
        # A copy is as large as the model: one no job uses goes back to the system with the
        # window's idle trim (made again when wanted, on the capture worker); a job still
        # running on it holds a reference.
        held = self._held
        if held is None or self.pending:
            return
        if held.twin is not None and sys.getrefcount(held.twin) > _HELD_REFS:
            return
        self._held = None

    def _on_model_changed(self, *_args: Any) -> None:
        held = self._held
        if held is not None and held.original is not self.session.model:
            self._held = None

    def close(self) -> None:
        """The window is closing: nothing more is asked for or handed over."""
        self._closed = True
        self.forget()
        self.session.model_changed.disconnect(self._on_model_changed)

    # ------------------------------------------------------------------ the capture worker
    def _submit(self) -> None:
        entry = ModelCopy(self.session.model, to_eval=self.to_eval)
        signals = self._signals

        def job(_should_stop: Any, _report: Any) -> None:
            # Handed over by a signal of its own: a run submitted meanwhile makes this job
            # stale, and the worker would drop its result.
            entry.build()
            signals.copied.emit(entry)

        self.pending = True
        # supersede=False: a run already queued still reports.
        handle = self._job = self.host.worker.submit(job, supersede=False)
        # A run superseded the copy's job (maybe before it ran), or a Cancel meant for
        # another job of the capture worker stopped it: ask again behind it (the first copy
        # made is taken; abandon() ends the wait).
        handle.on(
            superseded=lambda: self._ask_again(handle), cancelled=lambda: self._ask_again(handle)
        )

    def _ask_again(self, job: Job) -> None:
        if self.pending and job is self._job and not self._closed:
            self._submit()

    def _on_copied(self, entry: ModelCopy) -> None:
        if not self.pending or self._closed:
            return
        if entry.original is not self.session.model:
            self._submit()  # another model opened meanwhile: copy the one shown now
            return
        self.pending = False
        self._job = None
        then, self._then = self._then, []
        if entry.error is not None:
            if self._failed is not None:
                self._failed(entry.error)
            return
        self._held = entry
        for call in then:
            call(entry.twin)
