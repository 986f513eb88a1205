"""torch's intra-op thread count (held for a block, or chosen by trying) and background priority.

Helper threads run torch on one thread and the GUI keeps one (too many OpenMP team threads
wake sleepers): :func:`parallel_in_workers_only`. :class:`ThreadTuner` picks a scan's count."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator

import torch

log = logging.getLogger(__name__)
#: How much lower than normal background work runs (a ``nice`` increment; 19 is the lowest).
BACKGROUND_NICE = 10
#: The count the window's workers run their jobs at (None: each thread's own).
_worker_threads: int | None = None
# Native thread id -> its lowered priority (a Qt pool thread's Python thread state is not kept).
_lowered: dict[int, int] = {}
_reporters = threading.local()


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch's intra-op pool at ``n`` threads (None: unchanged)."""
    before = torch.get_num_threads()
    if n is None or before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def worker_threads() -> int | None:
    """The torch thread count for a worker's job (None: leave the thread's count alone)."""
    return _worker_threads


def parallel_in_workers_only() -> Callable[[], None]:
    """Run torch single-threaded on the calling (GUI) thread and the worker jobs at the previous
    count (an OpenMP team on the GUI thread slows every later capture); returns the undo."""
    global _worker_threads
    _worker_threads = before = torch.get_num_threads()
    torch.set_num_threads(1)

    def undo() -> None:
        global _worker_threads
        _worker_threads = None
        torch.set_num_threads(before)

    return undo


def lower_thread_priority(increment: int = BACKGROUND_NICE) -> bool:
    """Lower the calling thread's CPU priority for good (Linux); whether it runs lowered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        if _lowered.get(tid) == now:
            return True  # lowered before (a reused id at another priority is lowered anew)
        target = min(19, now + increment)
        os.setpriority(os.PRIO_PROCESS, tid, target)
    except (AttributeError, OSError):
        return False
    _lowered[tid] = target
    return True


def lower_process_priority(_worker_id: int = 0, *, base: int = 0) -> None:
    """Run this process :data:`BACKGROUND_NICE` below the nice value ``base`` (a DataLoader
    ``worker_init_fn``); never raised, which needs privileges."""
    target = min(19, base + BACKGROUND_NICE)
    with contextlib.suppress(AttributeError, OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) < target:
            os.setpriority(os.PRIO_PROCESS, 0, target)


def background_loader_init() -> Callable[[int], None]:
    """A picklable ``worker_init_fn`` running each loader process :data:`BACKGROUND_NICE`
    below this process's main thread, whichever thread forks it."""
    base = 0  # without priorities here lower_process_priority does nothing
    with contextlib.suppress(AttributeError, OSError):
        # The pid, not 0: the calling thread (a scan's worker) runs lowered already.
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    return functools.partial(lower_process_priority, base=base)


def available_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


class ThreadTuner:
    """Tries two intra-op thread counts on a scan's first batches and keeps the faster (CPU
    models only); batches are timed from :meth:`batch_done` to the next, so loader waits count."""

    #: Batches left out before timing starts (worker start-up, first-call costs).
    WARMUP = 4
    TRIAL = 4  #: Batches timed at each count.
    #: The candidate is given up after one batch below this share of the original's rate.
    GIVE_UP = 0.8

    def __init__(
        self,
        workers: int,
        batches: int,
        device: torch.device,
        cores: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._clock = clock
        self.original = torch.get_num_threads()
        cores = available_cores() if cores is None else cores
        self.candidate = fewer = max(1, cores - workers)
        self.active = (
            device.type == "cpu"
            and workers > 0
            and fewer < self.original
            and batches >= self.WARMUP + 2 * self.TRIAL + 1
        )
        #: the count in use (the scan's choice once tuning is over)
        self.threads = self.original
        #: images/s measured at each count tried
        self.rates: dict[int, float] = {}
        self._seen = self._timed = 0
        self._times: dict[int, list[float]] = {}
        self._last = clock()

    def batch_done(self, images: int) -> None:
        """One more batch of ``images`` ran (0 for a batch of unreadable files only)."""
        now = self._clock()
        elapsed, self._last = now - self._last, now
        self._seen += 1
        if not self.active:
            return
        w, t = self.WARMUP, self.TRIAL
        # w warm-up batches, t timed at the original count, up to t at the candidate.
        if self._seen <= w or images == 0:
            return
        self._timed += 1
        threads = self.original if self._timed <= t else self.candidate
        self._times.setdefault(threads, []).append(elapsed / images)
        if self._timed == t:
            self._set(self.candidate)
        elif self._timed > t:
            # The median batch: one held up by something else does not decide.
            self.rates = rate = {n: 1.0 / statistics.median(v) for n, v in self._times.items()}
            first = self._timed == t + 1
            far_slower = first and rate[self.candidate] < self.GIVE_UP * rate[self.original]
            if far_slower or self._timed == 2 * t:
                # The faster; on a tie, fewer threads (they leave cores to the rest of the app).
                self._set(max(rate, key=lambda n: (rate[n], -n)))
                self.active = False
                log.debug(
                    "thread trial: %s images/s; keeping %d thread(s)",
                    ", ".join(f"{n} thread(s) {r:.0f}" for n, r in rate.items()),
                    self.threads,
                )

    def _set(self, threads: int) -> None:
        if threads != self.threads:
            torch.set_num_threads(threads)
            self.threads = threads

    def restore(self) -> int:
        """Back to the count the scan started with; returns the count the scan ended on."""
        used = self.threads
        self.active = False
        self._set(self.original)
        return used


@contextlib.contextmanager
def reporting(listener: Callable[[str], None]) -> Iterator[None]:
    """Send this thread's :func:`report` texts to ``listener`` inside the block (a job's
    progress, from code that takes no callback: guessing a checkpoint's architecture)."""
    previous = getattr(_reporters, "listener", None)
    _reporters.listener = listener
    try:
        yield
    finally:
        _reporters.listener = previous


def report(text: str) -> None:
    """Say ``text`` to this thread's :func:`reporting` listener (nothing without one)."""
    if (listener := getattr(_reporters, "listener", None)) is not None:
        listener(text)
