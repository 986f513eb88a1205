"""Background jobs with stale results dropped and cooperative cancel.

Hooks are per-module state, so two captures on one model at the same time would mix their
records: a capture worker owns a single-thread ``QThreadPool`` and runs jobs strictly one after
the other. Loading a model builds a new module nobody else holds yet, so the window's model
loader may use two threads: a new load starts at once while a stale one finishes unseen. Each :meth:`Worker.submit` bumps a generation counter; a job whose generation is no longer
current is asked to stop (its ``should_stop`` turns True, which ``actviz.capture`` polls before
every module call) and whatever it returns is dropped, so the window only ever shows the result
of the latest request. Errors are emitted, never swallowed (the superqt worker pattern).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

log = logging.getLogger(__name__)

#: A job receives ``should_stop()`` and ``progress(message)`` and returns its result.
Job = Callable[[Callable[[], bool], Callable[[str], None]], Any]


class WorkerSignals(QObject):
    """What the worker reports, on the GUI thread, for the current generation only.

    Signals
    -------
    started(int)
        A job of that generation began running.
    progress(int, str)
        Generation and a short status message.
    finished(int, object)
        Generation and the job's return value.
    errored(int, object)
        Generation and the exception the job raised (cancellation excluded).
    cancelled(int)
        The job of that generation stopped because it was cancelled.
    """

    started = Signal(int)
    progress = Signal(int, str)
    finished = Signal(int, object)
    errored = Signal(int, object)
    cancelled = Signal(int)


class _RunnerSignals(QObject):
    # Emitted from the pool thread; received (queued) by the Worker on the GUI thread.
    started = Signal(int)
    progress = Signal(int, str)
    done = Signal(int, object, object, float)  # generation, result, exception, seconds


def _stopped() -> bool:
    return True


class _Runner(QRunnable):
    def __init__(self, generation: int, job: Job, should_stop: Callable[[], bool]) -> None:
        super().__init__()
        # The Worker keeps the Python object until its ``done`` is handled; Qt reads
        # autoDelete() before run(), so releasing it then is safe.
        self.setAutoDelete(False)
        self.generation = generation
        self.job = job
        self.should_stop = should_stop
        self.signals = _RunnerSignals()

    def run(self) -> None:
        gen = self.generation
        start = time.perf_counter()
        result: Any = None
        error: BaseException | None = None
        try:
            if self.should_stop():
                from actviz.core.capture import CaptureCancelled

                raise CaptureCancelled("superseded before it started")
            self.signals.started.emit(gen)
            result = self.job(self.should_stop, lambda msg: self.signals.progress.emit(gen, msg))
        except BaseException as exc:  # noqa: BLE001 - reported to the GUI, never swallowed
            error = exc
        self.signals.done.emit(gen, result, error, time.perf_counter() - start)


class Worker(QObject):
    """Runs jobs one at a time off the GUI thread; only the latest generation is reported.

    Parameters
    ----------
    parent
        Qt parent (the window), so the worker dies with it.
    max_threads
        Jobs that may run at once. Keep 1 for captures (one model, one worker: hooks are
        per-module state); jobs that touch no shared model (loading a new one) may use more.
    """

    def __init__(self, parent: QObject | None = None, *, max_threads: int = 1) -> None:
        super().__init__(parent)
        self.signals = WorkerSignals(self)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max(1, int(max_threads)))
        self._lock = threading.Lock()
        self._generation = 0
        self._cancelled: set[int] = set()
        self._running: set[int] = set()
        self._runners: dict[int, _Runner] = {}
        self.last_elapsed_s = 0.0

    # -- state ---------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        """Generation of the latest submitted job."""
        return self._generation

    def is_busy(self) -> bool:
        """True while any job (current or stale) is queued or running."""
        return bool(self._runners)

    def has_current_job(self) -> bool:
        """True while the latest submitted job is queued or running (stale ones aside)."""
        with self._lock:
            gen = self._generation
        return gen in self._running

    def is_current(self, generation: int) -> bool:
        with self._lock:
            return generation == self._generation and generation not in self._cancelled

    # -- control -------------------------------------------------------------------------------
    def submit(self, job: Job) -> int:
        """Queue ``job``; every earlier job becomes stale and is asked to stop.

        Returns
        -------
        int
            The new job's generation.
        """
        with self._lock:
            self._generation += 1
            gen = self._generation
        runner = _Runner(gen, job, lambda: not self.is_current(gen))
        runner.signals.started.connect(self._on_runner_started)
        runner.signals.progress.connect(self._on_runner_progress)
        runner.signals.done.connect(self._on_runner_done)
        self._runners[gen] = runner
        self._running.add(gen)
        self._pool.start(runner)
        return gen

    def cancel(self) -> bool:
        """Ask the current job to stop; returns True when one was queued or running."""
        with self._lock:
            gen = self._generation
            if gen not in self._running:
                return False
            self._cancelled.add(gen)
            return True

    def drop(self) -> None:
        """Make every queued or running job stale: none of them reports anything."""
        with self._lock:
            self._generation += 1

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Cancel everything and wait for the thread to finish (the model's hooks are then gone).

        Parameters
        ----------
        timeout_ms
            How long to wait; 0 does not wait (jobs that hold no hooks, like loads).

        Returns
        -------
        bool
            False if a job was still running after ``timeout_ms``.
        """
        self.drop()
        if timeout_ms <= 0:
            return self._pool.activeThreadCount() == 0
        done = self._pool.waitForDone(timeout_ms)
        if not done:
            log.warning("a capture was still running after %d ms", timeout_ms)
        return done

    # -- runner callbacks (GUI thread) ---------------------------------------------------------
    @Slot(int)
    def _on_runner_started(self, gen: int) -> None:
        if self.is_current(gen):
            self.signals.started.emit(gen)

    @Slot(int, str)
    def _on_runner_progress(self, gen: int, message: str) -> None:
        if self.is_current(gen):
            self.signals.progress.emit(gen, message)

    @Slot(int, object, object, float)
    def _on_runner_done(self, gen: int, result: object, error: object, seconds: float) -> None:
        from actviz.core.capture import CaptureCancelled

        runner = self._runners.pop(gen, None)
        if runner is not None:
            # Qt's pool keeps finished runnables (autoDelete is off): drop what the job holds
            # (its request, input tensors, images) or every run would stay in memory.
            runner.job = None
            runner.should_stop = _stopped
        self._running.discard(gen)
        with self._lock:
            current = gen == self._generation
            was_cancelled = gen in self._cancelled
            self._cancelled.discard(gen)
        if not current:
            log.debug("dropping stale result of generation %d", gen)
            return
        self.last_elapsed_s = seconds
        if isinstance(error, CaptureCancelled) or (was_cancelled and error is not None):
            self.signals.cancelled.emit(gen)
        elif was_cancelled:
            # Finished before it noticed the cancel: the user asked not to see it.
            self.signals.cancelled.emit(gen)
        elif error is not None:
            self.signals.errored.emit(gen, error)
        else:
            self.signals.finished.emit(gen, result)
