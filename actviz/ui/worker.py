"""Background jobs as handles (:meth:`Worker.submit` returns a :class:`Job`): a new job
supersedes the earlier ones (their results dropped), cancel is cooperative, errors are emitted.

Captures run one at a time on one thread (hooks are per-module state). A :class:`Staged` result
frees the model while its ``then`` runs on a second thread; ``lane=1`` captures a model copy
beside it. Results are reported in submission order.

Freed memory goes back to the system after :data:`IDLE_MS` idle (malloc trimmed beyond
:data:`SLACK_MIB`, :class:`IdleMemory`); in the app's process the cyclic collector runs then and
freezes survivors."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from PySide6.QtCore import QMetaMethod, QObject, QThreadPool, QTimer, Signal, Slot

from actviz.core import allocator
from actviz.core.allocator import mark_arena
from actviz.core.capture import CaptureCancelled
from actviz.core.threads import lower_thread_priority, torch_threads, worker_threads

log = logging.getLogger(__name__)

#: A job's function receives ``should_stop()`` and ``progress(message)``; returns its result.
JobFn = Callable[[Callable[[], bool], Callable[[str], None]], Any]
#: How long a thread running Python may keep the GIL while another waits for it (seconds).
GIL_SWITCH_INTERVAL_S = 0.001
#: Nice steps of the capture worker and the features' workers below the GUI thread (at one
#: priority a paint waits for a time slice beside a long job).
CAPTURE_NICE = 5
# Windows (GUI thread only) holding the short interval, and the interval before the first.
_favour_count = 0
_interval_before: float | None = None
#: How long the window must stay idle (no job, no display step) before memory is handed back.
IDLE_MS = 2000
#: Freed memory kept beyond the heap in use before a trim is worth its few milliseconds.
SLACK_MIB = 64.0
#: How long the window must stay idle before a due full collection (~0.2 s) runs.
FULL_IDLE_MS = 20_000
FULL_EVERY = 50  #: Idle moments between two full collections.
_FREEZE = [False]


def favour_gui_thread() -> None:
    """Let the GUI thread take the GIL within ~1 ms while workers run Python (process-wide)."""
    global _favour_count, _interval_before
    if _favour_count == 0 and sys.getswitchinterval() > GIL_SWITCH_INTERVAL_S:
        _interval_before = sys.getswitchinterval()  # (else short enough: nothing to put back)
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    _favour_count += 1


def release_gui_thread() -> None:
    """Undo one :func:`favour_gui_thread`; the last restores the interval unless changed since."""
    global _favour_count, _interval_before
    if _favour_count == 0:
        return
    _favour_count -= 1
    if _favour_count == 0 and _interval_before is not None:
        if sys.getswitchinterval() == GIL_SWITCH_INTERVAL_S:
            sys.setswitchinterval(_interval_before)
        _interval_before = None


@dataclass
class Staged:
    """Returned by a job whose first stage is done: ``then(should_stop, progress)`` runs on the
    second thread (it must not touch the model) and returns the job's result."""

    then: JobFn


class Job(QObject):
    """One job of a :class:`Worker`. Exactly one of ``finished``, ``failed``, ``cancelled`` and
    ``superseded`` is emitted, once, on the GUI thread.

    Signals: ``started`` (not for a job superseded or cancelled by then); ``staged`` (its first
    stage returned :class:`Staged`: the model is free for the next job); ``progress(str)`` (a
    short status message); ``finished(object)`` (its value); ``failed(object)`` (its exception,
    cancellation excluded); ``cancelled`` (it stopped, or ended unseen, because cancelled);
    ``superseded`` (a later job or :meth:`Worker.drop` made it stale; its thread may run on)."""

    started = Signal()
    staged = Signal()
    progress = Signal(str)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    superseded = Signal()

    def __init__(self, worker: Worker, number: int, lane: int) -> None:
        super().__init__()  # No Qt parent: the submitter holds it, and the worker until it ends.
        self._worker, self._number, self.lane = worker, number, lane
        self.outcome = ""  #: How it ended: "", "finished", "failed", "cancelled" or "superseded".
        # Slots given to :meth:`on`, by signal name: called directly, not through Qt.
        self._slots: dict[str, list[Callable[..., Any]]] = {}

    @property
    def done(self) -> bool:
        """True once it reported its end or was superseded (nothing more comes)."""
        return bool(self.outcome)

    def cancel(self) -> bool:
        """Ask this job alone to stop; True when it was queued or running and current."""
        return self._worker.cancel(self)

    def is_after(self, other: Job) -> bool:
        """Whether this job was submitted after ``other`` (on the same worker)."""
        return self._number > other._number

    def on(self, **slots: Callable[..., Any]) -> Job:
        """Connect ``signal=slot`` pairs; called directly, before Qt's (cheaper per live frame)."""
        for name, slot in slots.items():
            if name not in _SIGNAL_METHODS:
                raise AttributeError(f"a job has no signal {name!r}")
            if not self.outcome:
                self._slots.setdefault(name, []).append(slot)
        return self

    def _emit(self, name: str, *args: Any) -> None:
        for slot in list(self._slots.get(name, ())):
            try:
                slot(*args)
            except Exception:  # noqa: BLE001 - as Qt does for a slot: reported, others run
                sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
        if self.isSignalConnected(_SIGNAL_METHODS[name]):
            getattr(self, name).emit(*args)

    def _end(self, outcome: str, *args: Any, quietly: bool = False) -> None:
        self.outcome = outcome
        if not quietly:
            self._emit(outcome, *args)
        # Let go of the slots: one that names its job makes a cycle through Qt the GC cannot see.
        self._slots.clear()
        for name, method in _SIGNAL_METHODS.items():
            if self.isSignalConnected(method):
                getattr(self, name).disconnect()


_META = Job.staticMetaObject
#: Each of a job's signals as Qt knows it (to ask whether anything is connected).
_SIGNAL_METHODS = {
    bytes(m.name().data()).decode(): m
    for m in map(_META.method, range(_META.methodOffset(), _META.methodCount()))
    if m.methodType() == QMetaMethod.MethodType.Signal
}


class _RunnerSignals(QObject):
    # Emitted from the pool thread; received (queued) by the Worker on the GUI thread.
    relay = Signal(int, str, object)  # generation, the job's signal name, its arguments
    done = Signal(int, object, object)  # generation, result, exception


@dataclass(eq=False)
class _Runner:
    """One job on a pool thread, as a callable: PySide keeps a QRunnable for the pool's life.
    ``second``: it runs a second stage; ``threads``: torch's count for a first stage."""

    generation: int
    job: JobFn | None
    should_stop: Callable[[], bool]
    signals: _RunnerSignals
    second_stage: QThreadPool | None = None
    second: bool = False
    threads: int | None = None
    nice: int = 0

    def run(self) -> None:
        gen, signals, job, second = self.generation, self.signals, self.job, self.second
        result: Any = None
        error: BaseException | None = None
        if self.nice:  # before torch's first op: the OpenMP team it starts inherits it
            lower_thread_priority(self.nice)
        try:
            if job is None or self.should_stop():
                raise CaptureCancelled("superseded before it started")
            if not second:
                signals.relay.emit(gen, "started", ())
            # One torch thread for a second stage: another OpenMP team slows the capture beside it.
            with torch_threads(1 if second else self.threads):
                result = job(
                    self.should_stop, lambda msg: signals.relay.emit(gen, "progress", (msg,))
                )
            if isinstance(result, Staged):
                if (second_stage := self.second_stage) is None:
                    raise TypeError("a Staged job's `then` returned Staged again")
                # Handed over from this thread: a busy event loop must not delay the capture.
                continuation = _Runner(
                    gen, result.then, self.should_stop, signals, second=True, nice=self.nice
                )
                self.release()
                signals.relay.emit(gen, "staged", ())
                second_stage.start(continuation.run)
                mark_arena()
                return
        except BaseException as exc:  # noqa: BLE001 - reported to the GUI, never swallowed
            error = exc
        self.release()
        del job
        mark_arena()  # what the job freed in this thread's arena goes back at the idle trim
        signals.done.emit(gen, result, error)

    def release(self) -> None:
        """Drop what the job holds (request, tensors, images) and the pools."""
        self.job = None
        self.should_stop = lambda: True
        self.second_stage = None


class Worker(QObject):
    """Runs jobs off the GUI thread; only current jobs report. ``max_threads``: 1 for captures
    (hooks are per-module state). ``nice``: steps below the GUI thread (Linux): paints never wait.
    """

    #: Every job as it is submitted, for whoever watches the whole worker (tests, benchmarks).
    job_submitted = Signal(object)

    def __init__(
        self, parent: QObject | None = None, *, max_threads: int = 1, nice: int = 0
    ) -> None:
        super().__init__(parent)
        self.nice = nice
        self._pool = QThreadPool(self, maxThreadCount=max(1, int(max_threads)))
        # Second stages (Staged.then), one at a time and in order, so results arrive in order.
        self._second = QThreadPool(self, maxThreadCount=1)
        self._lane = QThreadPool(self, maxThreadCount=1)  # lane 1: a copy of the model
        # Set explicitly: a pool thread would otherwise keep torch's last count set anywhere.
        self.threads = worker_threads() or torch.get_num_threads()
        self._lock = threading.Lock()
        self._generation = 0  # number of the latest job submitted (or drop)
        self.submitted = 0  #: How many jobs were submitted so far.
        self._floor = 0  # generations below it are stale (superseded or dropped)
        self._kept: set[int] = set()  # below the floor but current: submitted with ``keep``
        self._cancelled: set[int] = set()
        self._running: set[int] = set()  # generations queued or running, until ``done``
        self._signals = _RunnerSignals(self)  # every runner's, queued to the GUI thread
        self._signals.relay.connect(self._relay)
        self._signals.done.connect(self._on_runner_done)
        self._jobs: dict[int, Job] = {}  # current jobs by generation
        # Results waiting for an earlier job, or for the next turn: one job's end a turn (Qt
        # handles every posted event in one go: a model and its saved run in one block).
        self._held: dict[int, tuple[object, object]] = {}
        self._turn = QTimer(self, singleShot=True, interval=0)
        self._turn.timeout.connect(self._report_held)

    def jobs(self) -> list[Job]:
        """The jobs that will still report, oldest first."""
        return list(self._jobs.values())

    def is_busy(self) -> bool:
        """True while any job (current or stale) is queued, running or yet to report."""
        return bool(self._running or self._held)

    def has_current_job(self) -> bool:
        """True while a current job is queued, running or yet to report (stale ones aside)."""
        with self._lock:
            floor = self._floor
        return any(self._live(gen, floor) for gen in (*self._running, *self._held))

    def _live(self, generation: int, floor: int) -> bool:
        """Whether a later job (``floor``) left ``generation`` current."""
        return generation >= floor or generation in self._kept

    def _is_current(self, generation: int) -> bool:
        # No lock: polled before every module call; each read is atomic under the GIL.
        return (
            self._live(generation, self._floor)
            and generation <= self._generation
            and generation not in self._cancelled
        )

    def run_unreported(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` (must not raise) on the worker's thread after the queue, unreported."""

        def run() -> None:
            if self.nice:
                lower_thread_priority(self.nice)
            with torch_threads(self.threads):
                fn()

        self._pool.start(run)

    def submit(
        self,
        job: JobFn,
        *,
        supersede: bool = True,
        keep: bool = False,
        lane: int = 0,
        threads: int | None = None,
    ) -> Job:
        """Queue ``job(should_stop, progress)`` (it may return :class:`Staged`); by default
        every earlier job is superseded and asked to stop, and has emitted ``superseded`` by the
        time the returned :class:`Job` handle comes back.

        ``supersede=False`` keeps the earlier jobs current, reporting in order (pipelined live
        frames). ``keep``: later jobs do not supersede this one (a report, a file written
        whole); it ends by itself, by a cancel or by :meth:`drop`. ``lane``: 0 the model's
        thread, 1 a second thread for jobs capturing a copy of the model. ``threads``: torch's
        thread count for the first stage (None: :attr:`threads`)."""
        if lane not in (0, 1):
            raise ValueError(f"lane must be 0 or 1, not {lane!r}")
        pool = self._lane if lane else self._pool
        with self._lock:
            self._generation += 1
            gen = self._generation
            self.submitted += 1
            if supersede:
                self._floor = gen
            if keep:
                self._kept.add(gen)
        handle = Job(self, gen, lane)
        runner = _Runner(
            gen,
            job,
            lambda: not self._is_current(gen),
            self._signals,
            second_stage=self._second,
            threads=self.threads if threads is None else max(1, int(threads)),
            nice=self.nice,
        )
        self._running.add(gen)
        self._jobs[gen] = handle
        pool.start(runner.run)
        self._supersede()
        self.job_submitted.emit(handle)
        return handle

    def _supersede(self, *, emit: bool = True) -> None:
        stale = [gen for gen in self._jobs if not self._live(gen, self._floor)]
        for gen in stale:
            # A slot of an earlier one may have submitted (and so ended this one) already.
            if (job := self._jobs.pop(gen, None)) is not None:
                job._end("superseded", quietly=not emit)  # noqa: SLF001 - the worker ends it

    def cancel(self, job: Job | None = None) -> bool:
        """Ask the current jobs (or only ``job``) to stop; True when one was queued or running."""
        with self._lock:
            current = {gen for gen in self._running if self._live(gen, self._floor)}
            if job is not None:
                current &= {job._number}  # noqa: SLF001 - its own handle
            self._cancelled |= current
            return bool(current)

    def drop(self, *, quietly: bool = False) -> None:
        """Make every queued or running job stale; each emits ``superseded`` unless ``quietly``."""
        with self._lock:
            self._generation += 1
            self._floor = self._generation
            self._kept.clear()
        self._supersede(emit=not quietly)

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Cancel everything, wait up to ``timeout_ms`` (0: not at all); False if one still ran."""
        self.drop(quietly=True)
        # The second stages last: a first stage may hand its second over while its pool drains.
        pools = (self._pool, self._lane, self._second)
        if timeout_ms <= 0:
            return all(p.activeThreadCount() == 0 for p in pools)
        t0, done = time.perf_counter(), True
        for pool in pools:
            left = max(1, timeout_ms - int((time.perf_counter() - t0) * 1000))
            done = pool.waitForDone(left) and done
        if not done:
            log.warning("a capture was still running after %d ms", timeout_ms)
        return done

    @Slot(int, str, object)
    def _relay(self, gen: int, name: str, args: tuple[Any, ...]) -> None:
        job = self._jobs.get(gen) if self._is_current(gen) else None
        if job is not None:
            job._emit(name, *args)  # noqa: SLF001 - the worker signals its jobs

    @Slot(int, object, object)
    def _on_runner_done(self, gen: int, result: object, error: object) -> None:
        self._running.discard(gen)
        self._held[gen] = (result, error)
        self._report_held()

    def _report_held(self) -> None:
        # In submission order: a result waits for every earlier current job; stale ones dropped.
        while self._held and not self._turn.isActive():
            with self._lock:
                floor = self._floor
            first = min(self._held)
            if self._live(first, floor) and any(
                self._live(g, floor) for g in self._running if g < first
            ):
                break
            if self._report(first, *self._held.pop(first)):
                self._turn.start()  # the next end on the next turn

    def _report(self, gen: int, result: object, error: object) -> bool:
        with self._lock:
            current = self._live(gen, self._floor) and gen <= self._generation
            was_cancelled = gen in self._cancelled
            self._cancelled.discard(gen)
            self._kept.discard(gen)
        job = self._jobs.pop(gen, None)
        if not current or job is None:
            log.debug("dropping stale result of job %d", gen)
            return False
        # Finished before it noticed the cancel: the user asked not to see it either.
        if was_cancelled or isinstance(error, CaptureCancelled):
            job._end("cancelled")  # noqa: SLF001 - the worker ends its jobs
        elif error is not None:
            job._end("failed", error)  # noqa: SLF001
        else:
            job._end("finished", result)  # noqa: SLF001
        return True


def keep_collector_off_clicks(on: bool = True) -> None:
    """New windows collect garbage when idle and freeze the rest (``on=False``: Python's way)."""
    _FREEZE[0] = bool(on)


class IdleMemory(QObject):
    """Trims freed memory off the GUI thread once per idle stretch; ``idle`` runs first."""

    idle = Signal()

    def __init__(
        self, parent: QObject, busy: Callable[[], bool], still: Callable[[], bool] | None = None
    ) -> None:
        super().__init__(parent)
        self._busy = busy
        #: Whether no job at all runs (features' too): MKL's buffers are freed only then.
        self._still = still or (lambda: not busy())
        self._timer = QTimer(self, singleShot=True, interval=IDLE_MS)
        self._timer.timeout.connect(self._on_idle)
        self._thread: threading.Thread | None = None
        self.trims = 0  # trims done (tests read it)
        self.passes = 0  # idle passes ended, with or without a trim (the stress driver waits)
        #: Whether this window freezes what survives its collections (see the module).
        self.freezes = _FREEZE[0]
        #: Idle moments before a full collection is due (the window's start makes one).
        self.idles_before_full = FULL_EVERY
        self._full_timer = QTimer(self, singleShot=True)
        self._full_timer.timeout.connect(self._on_long_idle)
        if self.freezes:
            self.collect_cycles(full=True)

    def touch(self, *_args: Any) -> None:
        """Something changed: trim once the window is idle again."""
        self._timer.start()
        self._full_timer.stop()

    def idle_now(self) -> None:
        """The idle pass now, as after :data:`IDLE_MS` idle (a stress checkpoint is a pause)."""
        self._timer.stop()
        self._on_idle()

    def _on_long_idle(self) -> None:
        self._full_timer.start() if self._busy() else self.collect_cycles(full=True)

    def _on_idle(self) -> None:
        if self._busy():
            self._timer.start()  # still working: look again later
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self.idle.emit()
        self.collect_cycles()
        if self._still():
            allocator.release_kernel_buffers()
        self._thread = threading.Thread(target=self._trim, name="actviz-trim", daemon=True)
        self._thread.start()

    def _trim(self) -> None:
        try:
            heap = allocator.heap_in_use_mib()
            if heap is not None and allocator.rss_mib() - heap < SLACK_MIB:
                return
            if allocator.release_freed_memory():
                self.trims += 1
        finally:
            self.passes += 1

    def stop(self) -> None:
        """The window closes: no more trims; the collector sees every object again."""
        self._timer.stop()
        self._full_timer.stop()
        if self.freezes:
            gc.unfreeze()

    def collect_cycles(self, *, full: bool = False) -> None:
        """Collect young cyclic garbage (``full``: all) and freeze survivors (the app's process)."""
        if not self.freezes:
            return
        if full:
            gc.unfreeze()
        gc.collect(2 if full else 1)  # else the young objects only: the older ones are frozen
        gc.freeze()
        self.idles_before_full = FULL_EVERY if full else self.idles_before_full - 1
        if self.idles_before_full <= 0:
            self._full_timer.start(FULL_IDLE_MS)
