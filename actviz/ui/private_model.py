"""The window's model-copy service: a feature's :class:`PrivateModel`, its copy of the model.

Hooks are per-module state, so work beside the window's captures runs on a copy, made on the
capture worker between jobs (no capture's hooks inside) or in the owner's job. Idle copies are
shared with siblings (each is as large as the model) and go when the window idles."""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from actviz.core.model_copy import ModelCopy, with_loading

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.worker import Job

# A held copy's refcount when only its entry holds it (the entry, getrefcount's argument).
_HELD_REFS = 2


class PrivateModel(QObject):
    """``owner``'s private copy of the model (``to_eval``: in eval mode). With ``keep`` it stays
    between jobs (no sibling takes it, no idle trim) until the model, the window or :meth:`forget`
    lets it go."""

    copied = Signal(object)  #: From the capture worker's thread to the GUI thread: the copy made.

    def __init__(
        self, service: ModelCopyService, owner: QObject, *, to_eval: bool, keep: bool
    ) -> None:
        super().__init__(owner)
        self.service, self.session, self.to_eval = service, service.session, to_eval
        self.keep = keep
        #: True from :meth:`get` until the copy asked for is handed over (or abandoned).
        self.pending = False
        self._job: Job | None = None  # the copy's job on the capture worker
        self.held: ModelCopy | None = None  #: The copy held now (built or not; None: none).
        self._then: list[Callable[[Any], None]] = []
        self._failed: Callable[[BaseException], None] | None = None
        self.closed = False
        self.copied.connect(self._on_copied)

    def is_held(self) -> bool:
        """Whether a usable copy is at hand (:meth:`get` calls back at once)."""
        held = self.held
        return held is not None and held.original is self.session.model and held.usable()

    def get(self, then: Callable[[Any], None], failed: Callable[[BaseException], None]) -> None:
        """``then(copy)`` once a copy is made (at once if held or a sibling's is free), else
        ``failed(error)``; each ``then`` is called once."""
        if self.closed:
            return
        if self.is_held() or self.service.lend_to(self):
            assert self.held is not None
            then(self.held.twin)
            return
        if then not in self._then:
            self._then.append(then)
        self._failed = failed
        if not self.pending:
            self._submit()

    def unbuilt(self, model: Any = None) -> ModelCopy:
        """A copy of ``model`` (None: the session's) to build in the owner's job (``build``
        waits for a running capture), held from now on like any other."""
        entry = ModelCopy(self.session.model if model is None else model, to_eval=self.to_eval)
        self.abandon()
        with self.service.lock:  # a job of the owner's may be letting go of the one before
            self.held = entry
        return entry

    def let_go(self, entry: ModelCopy) -> None:
        """Stop holding ``entry`` if it is still the copy held (from any thread)."""
        with self.service.lock:
            if self.held is entry:
                self.held = None

    def engine_model(self, twin: Any) -> Any:
        """``twin`` with the opened model's preprocessing and input size (what engines read)."""
        return with_loading(twin, self.session.model, self.session.loaded_model)

    def abandon(self) -> None:
        """The copy asked for is no longer wanted: it calls nothing when made."""
        self.pending, self._then, self._failed = False, [], None

    def forget(self) -> None:
        """Let go of the copy held: the next :meth:`get` makes (or borrows) one."""
        self.abandon()
        self.held = None

    def close(self) -> None:
        """The owner is done: nothing more is asked for or handed over."""
        self.closed = True
        self.forget()
        self.service.discard(self)

    def in_use(self) -> bool:
        """Whether a job (or anything besides this holder) refers to the copy held."""
        held = self.held
        return (
            held is not None and held.twin is not None and sys.getrefcount(held.twin) > _HELD_REFS
        )

    def _submit(self) -> None:
        entry = ModelCopy(self.session.model, to_eval=self.to_eval)
        copied = self.copied

        def job(_should_stop: Any, _report: Any) -> None:
            # A signal of its own: a run submitted meanwhile would make the worker drop it.
            entry.build()
            copied.emit(entry)

        self.pending = True
        # supersede=False: a run already queued still reports.
        handle = self._job = self.service.worker.submit(job, supersede=False)
        # A run or another job's Cancel stopped the copy's job: ask again (abandon() ends it).
        again = lambda: self._ask_again(handle)  # noqa: E731
        handle.on(superseded=again, cancelled=again)

    def _ask_again(self, job: Job) -> None:
        if self.pending and job is self._job and not self.closed:
            self._submit()

    def _on_copied(self, entry: ModelCopy) -> None:
        if not self.pending or self.closed:
            return
        if entry.original is not self.session.model:
            self._submit()  # another model opened meanwhile: copy the one shown now
            return
        self.pending, self._job = False, None
        then, self._then = self._then, []
        failed, self._failed = self._failed, None
        if entry.error is not None:
            if failed is not None:
                failed(entry.error)
            return
        with self.service.lock:
            self.held = entry
        for call in then:
            call(entry.twin)


class ModelCopyService(QObject):
    """``window``'s private copies of its model, one :class:`PrivateModel` per owner, made on
    its capture worker; those no job uses go when its memory watch's ``idle`` (if any) fires.
    Closed with the window."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.session, self.worker = window.session, window.worker
        #: Guards the hand-over of held copies between threads (:meth:`PrivateModel.let_go`).
        self.lock = threading.Lock()
        self._owners: weakref.WeakSet[PrivateModel] = weakref.WeakSet()
        self._closed = False
        self._idle = getattr(getattr(window, "memory", None), "idle", None)
        if self._idle is not None:
            self._idle.connect(self.trim)
        # Another model: a copy of the old one (and so the old model, its original) goes now.
        self.session.model_changed.connect(self._on_model_changed)
        window.closed.connect(self.close)

    def private_model(
        self, owner: QObject, *, to_eval: bool = False, keep: bool = False
    ) -> PrivateModel:
        """A new :class:`PrivateModel` for ``owner`` (see its parameters)."""
        handle = PrivateModel(self, owner, to_eval=to_eval, keep=keep)
        handle.close() if self._closed else self._owners.add(handle)
        return handle

    def owners(self) -> list[PrivateModel]:
        """The open :class:`PrivateModel` handed out (weakly held: an owner gone is gone)."""
        return [h for h in list(self._owners) if not h.closed]

    def held(self) -> list[ModelCopy]:
        """The copies held now (one each; a copy shared is listed once)."""
        return list({id(h.held): h.held for h in self.owners() if h.held is not None}.values())

    def discard(self, handle: PrivateModel) -> None:
        """``handle`` is closed: it is no longer one of the window's."""
        self._owners.discard(handle)

    def lend_to(self, taker: PrivateModel) -> bool:
        """Lend ``taker`` a sibling's idle copy, in its flags (one copy a window, not one a
        feature); True if it got one."""
        model = self.session.model
        for other in self.owners():
            held = other.held
            if other is taker or other.keep or other.pending or held is None:
                continue
            if held.original is not model or not held.usable() or other.in_use():
                continue
            flags = [m.training for m in held.twin.modules()]  # type: ignore[union-attr]
            if flags != [m.training and not taker.to_eval for m in model.modules()]:
                continue
            with self.lock:
                taker.held, other.held = held, None  # the service's own hand-over
            return True
        return False

    def trim(self) -> None:
        """Let go of the copies no job uses and no owner keeps (the window idles)."""
        for handle in self.owners():
            if not (handle.keep or handle.pending or handle.held is None or handle.in_use()):
                handle.held = None

    def _on_model_changed(self, *_args: Any) -> None:
        model = self.session.model
        for handle in self.owners():
            if handle.held is not None and handle.held.original is not model:
                handle.held = None

    def close(self) -> None:
        """The window closed: every owner is closed, every copy let go of."""
        if self._closed:
            return
        self._closed = True
        for handle in self.owners():
            handle.close()
        self._owners = weakref.WeakSet()
        self.session.model_changed.disconnect(self._on_model_changed)
        if self._idle is not None:
            with contextlib.suppress(RuntimeError, TypeError):  # the window's idle watch is gone
                self._idle.disconnect(self.trim)
