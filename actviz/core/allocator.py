"""Opt-in allocator tuning for processes that capture repeatedly: keep freed heap in the process.

:func:`tune_allocator` raises glibc's trim and mmap thresholds (process-wide, so only when
called; ``ACTVIZ_TUNE_ALLOCATOR=1`` makes the first capture call it, ``=0`` refuses it);
:func:`release_freed_memory` gives kept memory back. Figures: docs/performance.md."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
#: The environment variable: ``1`` tunes at the first capture, ``0`` never tunes.
ENV = "ACTVIZ_TUNE_ALLOCATOR"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # mallopt's (malloc.h)
# Allocations up to this size come from the heap (and are reused) instead of fresh mmaps.
MMAP_THRESHOLD = 32 * 2**20
# Freed memory at the top of the heap is returned to the OS only past this much.
TRIM_THRESHOLD = 1 * 2**30
#: Arenas a tuned process may have at least, so no thread shares the GUI thread's arena.
MIN_ARENAS = 16
_tuned: bool | None = None  # None: not tried yet in this process
_asked: bool | None = None
_MALLINFO_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
# Per thread that called mark_arena: a block of malloc's from that thread's arena.
_marks: dict[int, int] = {}
_marks_lock = threading.Lock()
#: A mark's size: past FASTBIN_CONSOLIDATION_THRESHOLD (64 KiB), so its free runs ``heap_trim``.
MARK_BYTES = 256 * 1024
# The trim threshold while a trim frees the marks: a thread arena's top beyond it goes back.
_TRIM_LOW = 1 * 2**20
_mkl_free: list[Callable[[], object] | None] = []


def tune_allocator() -> bool:
    """Make glibc keep freed memory in this process, so repeated captures do not page-fault:
    raises the mmap and trim thresholds and caps arenas for the rest of the process (Linux/glibc
    only). Returns whether the thresholds are raised."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    refused = "0" in (os.environ.get(ENV), os.environ.get("ACTVIZ_MALLOC_TUNING"))
    mallopt = None if refused else getattr(_libc(), "mallopt", None)
    if mallopt is None:  # refused, not Linux, or a libc without mallopt (musl)
        return False
    _tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    # A trim holds its arena's lock, so no worker may share the GUI thread's.
    mallopt(_M_ARENA_MAX, arena_max())
    log.debug("glibc malloc thresholds raised: %s", _tuned)
    return _tuned


def arena_max() -> int:
    """Malloc arenas a tuned process may have: :data:`MIN_ARENAS`, or two per core, so the
    idle trim never holds the GUI thread's arena lock while a click waits."""
    from actviz.core.threads import available_cores

    return max(MIN_ARENAS, 2 * available_cores())


def tuned() -> bool:
    """Whether :func:`tune_allocator` has raised glibc's thresholds in this process."""
    return bool(_tuned)


def tune_if_asked() -> None:
    """:func:`tune_allocator` if ``ACTVIZ_TUNE_ALLOCATOR=1`` (read once): each capture calls it."""
    global _asked
    if _asked is None:
        _asked = os.environ.get(ENV) == "1"
        if _asked:
            tune_allocator()


def rss_mib() -> float:
    """The process's resident memory in MiB (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_anon_mib() -> float | None:
    """The process's resident anonymous memory (``RssAnon``) in MiB; None without /proc."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return None


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO_FIELDS.split()]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _mallinfo() -> _Mallinfo2 | None:
    """glibc's ``mallinfo2()``; None without glibc 2.33 or later."""
    if (fn := getattr(_libc(), "mallinfo2", None)) is None:
        return None
    fn.restype = _Mallinfo2
    return fn()


def heap_in_use_mib() -> float | None:
    """Memory malloc handed out and not had back (``mallinfo2``), MiB; None before glibc 2.33."""
    info = _mallinfo()
    return None if info is None else (info.uordblks + info.hblkhd) / 2**20


def memory_breakdown_mib() -> dict[str, float]:
    """Resident memory in MiB: ``rss``, ``files``, ``anonymous``, ``heap_in_use``, ``heap_free``,
    ``rss_anon``; keys whose source is missing (no /proc, no glibc) are left out."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line and "kB" in line)
        rss = int(fields["Rss"].split()[0]) / 1024
        anon = int(fields["Anonymous"].split()[0]) / 1024
        out.update(rss=rss, anonymous=anon, files=max(0.0, rss - anon))
    except (OSError, ValueError, KeyError, IndexError):
        out["rss"] = rss_mib()
    if (anon_rss := rss_anon_mib()) is not None:
        out["rss_anon"] = anon_rss
    if (info := _mallinfo()) is not None:
        out["heap_in_use"] = (info.uordblks + info.hblkhd) / 2**20
        out["heap_free"] = info.fordblks / 2**20
    return out


def mark_arena() -> None:
    """Leave a block in the calling thread's arena: :func:`release_freed_memory` frees it with
    the trim threshold lowered, which trims that arena under its own lock, not the GUI's."""
    ident = threading.get_ident()
    libc = _libc() if _tuned and ident not in _marks else None
    if libc is None:
        return
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    if block := libc.malloc(MARK_BYTES):
        with _marks_lock:
            _marks[ident] = block


def release_kernel_buffers() -> bool:
    """Free the scratch buffers MKL's matrix products keep per thread (``mkl_free_buffers``):
    on some CPUs (Intel's, AVX-512) a pool thread's stay after it ends, so a long session's heap
    grew with every thread the pools replaced. Call it with no torch work running; False without MKL."""
    # MKL's ``mkl_serv_free_buffers`` in the torch loaded (never loads one), looked up once.
    if not _mkl_free and (torch := sys.modules.get("torch")) is not None:
        lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
        loaded = None
        if sys.platform.startswith("linux") and lib.is_file():
            with contextlib.suppress(OSError):  # not loaded (a build without it): nothing to free
                loaded = ctypes.CDLL(str(lib), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        _mkl_free.append(getattr(loaded, "mkl_serv_free_buffers", None))
    if not _mkl_free or (free := _mkl_free[0]) is None:
        return False
    free()
    return True


def release_freed_memory() -> bool:
    """Give memory malloc keeps free back to the system (``malloc_trim(0)`` and marked arena
    tops); safe from any thread. False where there is no glibc."""
    libc = _libc()
    if (trim := getattr(libc, "malloc_trim", None)) is None:
        return False
    with _marks_lock:
        marks = list(_marks.values())
        _marks.clear()
    if marks:
        libc.free.argtypes = [ctypes.c_void_p]
        # Only for these frees: a capture that frees its intermediates keeps them for the next.
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_LOW)
        try:
            for block in marks:
                libc.free(block)
        finally:
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True
